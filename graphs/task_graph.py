"""The `TaskGraph` type and its versioned JSON file.

Layout (docs/method.md, "Task graphs"): nodes are ``START, K_1..K_n, END``; ``adjacency[i, j]`` is true when node ``j``
is a pre-condition of node ``i`` (edges point from a step to what it needs). ``weights`` has the
same layout and holds the learned, row-normalised scores the binary graph was cut from.

File format (``version`` 2), documented in the README::

    {
      "format": "task-graph",
      "version": 2,
      "scenario": "epic-tent",
      "steps": [{"id": 0, "name": "assemble_support", "optional": 0.0}, ...],   # matrix order K_1..K_n
      "edges": [{"step": 0, "requires": "START"}, ...],           # binary pre-conditions
      "weights": [[...], ...] | null,                             # (n+2)x(n+2), START..END order
      "info": {...}                                               # how the graph was made
    }

Steps are named by their taxonomy id; the two placeholders are the strings ``"START"`` and
``"END"``. Other tools can read the pre-conditions from ``edges`` without this package.

``optional`` (new in version 2, per step, may be left out) is the step's global optionality score: the
fraction of the training executions containing the step whose likelihood under the weights says the step
could have been skipped (`graphs.procedure_queries.global_optionality`); above ``OPTIONAL_THRESHOLD`` the step
is optional. A step without it, and every step of a version 1 file (still read), is required.

A graph holds what the live pipeline can serve (`graphs.limits`): at most `MAX_STEPS` key-steps, ids in
``0..2^31-1``, names (and the scenario) of at most `MAX_NAME` characters. Construction refuses anything else, so a
graph that loads, or that a learner produced, is never refused by the wire half-way through a run. Every step name
shows something (`blank_name`), and a file lists each pre-condition of a step once.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

import numpy as np

from graphs.annotation_csv import is_table, looks_like_table
from graphs.common.errors import InputError
from graphs.common.file_kinds import GRAPH_FORMAT, is_captaincook_graph, mistaken_file
from graphs.common.files import output_start, read_json, read_text_file, write_text
from graphs.common.settings_files import as_written
from graphs.limits import MAX_NAME, MAX_STEP_ID, MAX_STEPS, STEP_ID_RULE, is_step_id, name_fault

if TYPE_CHECKING:
    import networkx as nx

START: Final = "START"
END: Final = "END"
FORMAT_NAME: Final = GRAPH_FORMAT
FORMAT_VERSION: Final = 2
READABLE_VERSIONS: Final = (1, 2)
# A step whose global optionality score is above this is optional (the score is a fraction of executions).
OPTIONAL_THRESHOLD: Final = 0.5
# ``info["weights"]`` of a graph whose weights are independent per-edge probabilities (noisy-AND TGML) rather than
# Direct Optimization's row-softmax: formulas that read the weights as transition mass must not use them.
EDGE_PROBABILITY_WEIGHTS: Final = "edge probabilities theta[step, requires]"
PROBABILITY_SLACK: Final = 1e-6  # float rounding a saved probability may carry beyond [0, 1]

Node = int | str


@dataclass(frozen=True, eq=False)
class TaskGraph:
    """A binary pre-condition DAG over key-steps, with the weights it was cut from.

    Args:
        step_ids: taxonomy ids of ``K_1..K_n`` in matrix order.
        step_names: human-readable names, same order.
        adjacency: bool ``(n+2, n+2)``; ``adjacency[i, j]`` iff node ``j`` is a pre-condition of ``i``.
        weights: optional float ``(n+2, n+2)`` in the same layout.
        scenario: the procedure this graph describes (``"epic-tent"``, ``"coffee"``...).
        info: provenance: method and settings that produced the graph (saved with it).
        optional_scores: optional float ``(n,)`` in [0, 1], same order as ``step_ids``: each step's global
            optionality score, learned from the training executions; None when never learned (every step is
            then required).
    """

    step_ids: tuple[int, ...]
    step_names: tuple[str, ...]
    adjacency: np.ndarray
    weights: np.ndarray | None = None
    scenario: str = ""
    info: dict[str, Any] = field(default_factory=dict)
    optional_scores: np.ndarray | None = None
    # Derived from the adjacency in __post_init__, for the checkers' per-step lookups.
    _index: dict[Node, int] = field(init=False, repr=False)
    _preconditions: dict[Node, frozenset[Node]] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        n = len(self.step_ids)
        object.__setattr__(self, "step_ids", tuple(int(s) for s in self.step_ids))
        object.__setattr__(self, "step_names", tuple(str(s) for s in self.step_names))
        if len(self.step_names) != n:
            raise InputError(f"task graph: {n} step ids but {len(self.step_names)} step names")
        if len(set(self.step_ids)) != n:
            raise InputError("task graph: step ids are not unique")
        if len(set(self.step_names)) != n:  # alerts, views and eval name steps: two alike would be one to a user
            twice = next(name for name in self.step_names if self.step_names.count(name) > 1)
            raise InputError(f"task graph: two steps are named {twice!r}; a step's name must be its own")
        if n > MAX_STEPS:
            raise InputError(f"task graph: {n} key-steps; at most {MAX_STEPS} can be served live")
        out_of_range = next((s for s in self.step_ids if not 0 <= s <= MAX_STEP_ID), None)
        if out_of_range is not None:
            raise InputError(f"task graph: step id {out_of_range} must be {STEP_ID_RULE}")
        named = next(((step, fault) for step, name in zip(self.step_ids, self.step_names, strict=True)
                      if (fault := name_fault(name)) is not None), None)
        if named is not None:  # from_dict names the file (its files' names are checked here, once)
            raise InputError(f"task graph: the name of step {named[0]} {named[1]}")
        if len(self.scenario) > MAX_NAME:
            raise InputError(
                f"task graph: the scenario name is {len(self.scenario)} characters long; at most {MAX_NAME}"
            )
        adjacency = np.asarray(self.adjacency).astype(bool)
        if adjacency.shape != (n + 2, n + 2):
            raise InputError(f"task graph: adjacency has shape {adjacency.shape}, expected {(n + 2, n + 2)}")
        adjacency.setflags(write=False)
        object.__setattr__(self, "adjacency", adjacency)
        if self.weights is not None:
            weights = np.asarray(self.weights, dtype=np.float64)
            if weights.shape != (n + 2, n + 2):
                raise InputError(f"task graph: weights have shape {weights.shape}, expected {(n + 2, n + 2)}")
            if not np.all(np.isfinite(weights)):
                raise InputError("task graph: weights contain NaN or infinity")
            weights.setflags(write=False)
            object.__setattr__(self, "weights", weights)
        if self.optional_scores is not None:
            scores = np.asarray(self.optional_scores, dtype=np.float64)
            if scores.shape != (n,):
                raise InputError(f"task graph: optional scores have shape {scores.shape}, expected {(n,)}")
            outside = ~((scores >= 0) & (scores <= 1))  # NaN is outside too
            if outside.any():
                step = self.step_ids[int(np.flatnonzero(outside)[0])]
                raise InputError(f"task graph: optional score of step {step} is not a number in [0, 1]")
            scores.setflags(write=False)
            object.__setattr__(self, "optional_scores", scores)
        if adjacency[np.arange(n + 2), np.arange(n + 2)].any():
            bad = self.nodes[int(np.flatnonzero(np.diag(adjacency))[0])]
            raise InputError(f"task graph: step {bad!r} is its own pre-condition")
        if adjacency[0].any():
            raise InputError("task graph: START cannot have pre-conditions")
        if adjacency[:, n + 1].any():
            needer = self.nodes[int(np.flatnonzero(adjacency[:, n + 1])[0])]
            raise InputError(f"task graph: step {needer!r} requires END, which nothing may require")
        if (execution_levels(adjacency) < 0).any():
            import networkx as nx  # only to name the cycle: loading a graph must not cost networkx's import

            cycle = nx.find_cycle(self.to_networkx())
            path = " -> ".join(str(u) for u, _ in cycle) + f" -> {cycle[0][0]}"
            raise InputError(f"task graph: pre-conditions form a cycle ({path}); a task graph must be a DAG")
        index = {node: i for i, node in enumerate(self.nodes)}
        object.__setattr__(self, "_index", index)
        pre = {
            node: frozenset(self.nodes[j] for j in np.flatnonzero(adjacency[i]))
            for i, node in enumerate(self.nodes)
        }
        object.__setattr__(self, "_preconditions", pre)

    # -- structure -----------------------------------------------------------------------------
    @property
    def n_steps(self) -> int:
        """Number of key-steps ``n`` (START and END excluded)."""
        return len(self.step_ids)

    @property
    def nodes(self) -> tuple[Node, ...]:
        """All nodes in matrix order: ``START, K_1..K_n, END``."""
        return (START, *self.step_ids, END)

    def index(self, node: Node) -> int:
        """Matrix index of a node (a step id, ``START`` or ``END``); `KeyError` if unknown."""
        return self._index[node]

    def renamed_step(self, step_ids: Sequence[int], step_names: Sequence[str]) -> tuple[int, str, str] | None:
        """The first of ``step_ids`` this graph names otherwise than ``step_names`` does: ``(id, its name here, the
        other name)``; None when every shared id has one name (two files with the same ids but other names are
        graphs of different procedures, whose scores would mean nothing)."""
        here = dict(zip(self.step_ids, self.step_names, strict=True))
        return next(((step, here[step], name) for step, name in zip(step_ids, step_names, strict=True)
                     if step in here and here[step] != name), None)

    def ids_by_name(self, named: Mapping[int, str]) -> dict[int, int] | None:
        """This graph's id of each step of another file (its step id -> name), matched by name: an annotation table
        numbers its steps in sorted name order, a JSON file as its taxonomy does, so a graph learned from one and a
        detector or annotation of the other name the same steps under other numbers.

        Args:
            named: the other file's steps (step id -> name).

        Returns:
            Each of ``named``'s step ids -> the graph's id of the step so named (equal where the two agree); None when
            the names cannot say which step is which: a name given to two of ``named``'s steps, or a name the graph
            lacks (a graph's own names are each its own: `__post_init__` refuses two alike).
        """
        here = dict(zip(self.step_names, self.step_ids, strict=True))
        names = set(named.values())
        if len(names) != len(named) or not names <= here.keys():
            return None
        return {step: here[name] for step, name in named.items()}

    def name_of(self, node: Node) -> str:
        """Readable name of a node."""
        if node in (START, END):
            return str(node)
        return self.step_names[self.index(int(node)) - 1]  # matrix index 0 is START

    @property
    def removed_steps(self) -> tuple[int, ...]:
        """Steps with no edge at all: removed because they were never seen in training (post-processing step 1)."""
        inner = self.adjacency[1:-1]
        isolated = ~inner.any(axis=1) & ~self.adjacency[:, 1:-1].any(axis=0)
        return tuple(self.step_ids[i] for i in np.flatnonzero(isolated))

    @property
    def row_softmax_weights(self) -> np.ndarray | None:
        """The weights when they are a row-softmax ``Z`` (each row a distribution over pre-conditions, as DO learns
        them), which the weighted procedure questions read; None when the graph has no weights or declares other
        weights in ``info["weights"]`` (per-edge probabilities, `EDGE_PROBABILITY_WEIGHTS`, or a combined evidence)."""
        if self.weights is None or "weights" in self.info:
            return None
        return self.weights

    @property
    def edge_probability_weights(self) -> np.ndarray | None:
        """The weights when they are per-edge probabilities ``θ`` (`EDGE_PROBABILITY_WEIGHTS`, as the noisy-AND
        learner saves them); None otherwise."""
        if self.weights is None or self.info.get("weights") != EDGE_PROBABILITY_WEIGHTS:
            return None
        return self.weights

    @property
    def optional_steps(self) -> tuple[int, ...]:
        """Steps whose stored optionality score is above `OPTIONAL_THRESHOLD`; empty when none was learned."""
        if self.optional_scores is None:
            return ()
        return tuple(self.step_ids[i] for i in np.flatnonzero(self.optional_scores > OPTIONAL_THRESHOLD))

    def edges(self) -> list[tuple[Node, Node]]:
        """Binary pre-condition edges as ``(step, requires)`` pairs, in matrix order."""
        rows, cols = np.nonzero(self.adjacency)
        return [(self.nodes[i], self.nodes[j]) for i, j in zip(rows.tolist(), cols.tolist(), strict=True)]

    def to_networkx(self) -> nx.DiGraph:
        """The binary DAG as a `networkx.DiGraph`, edges ``step -> requirement``, names as attributes."""
        import networkx as nx

        graph = nx.DiGraph()
        for node in self.nodes:
            graph.add_node(node, name=self.name_of(node) if node in (START, END) else None)
        for node, name in zip(self.step_ids, self.step_names, strict=True):
            graph.nodes[node]["name"] = name
        graph.add_edges_from(self.edges())
        return graph

    # -- queries -------------------------------------------------------------------------------
    def preconditions(self, step: Node) -> frozenset[Node]:
        """Pre-conditions of a step; empty for a step that is not in the graph or was removed."""
        return self._preconditions.get(step, frozenset())

    # -- serialisation -------------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        """The JSON-ready file content (see the module docstring)."""
        return {
            "format": FORMAT_NAME,
            "version": FORMAT_VERSION,
            "scenario": self.scenario,
            "steps": self._step_entries(),
            "edges": [{"step": s, "requires": r} for s, r in self.edges()],
            "weights": None if self.weights is None else [[float(x) for x in row] for row in self.weights],
            "info": self.info,
        }

    def _step_entries(self) -> list[dict[str, Any]]:
        entries: list[dict[str, Any]] = [{"id": i, "name": n} for i, n in zip(self.step_ids, self.step_names,
                                                                             strict=True)]
        if self.optional_scores is not None:
            for entry, score in zip(entries, self.optional_scores.tolist(), strict=True):
                entry["optional"] = score
        return entries

    @classmethod
    def from_dict(cls, data: Any, source: str = "task graph") -> TaskGraph:
        """Build a graph from file content, with one-line errors that name ``source`` and the field."""
        if not isinstance(data, dict):  # CaptainCook4D's error annotations (a list) are named as such
            raise InputError(mistaken_file(data, "graph", source) or f"{source}: expected a JSON object")
        if "format" not in data and isinstance(data.get("annotations"), dict):
            raise InputError(f"{source}: this looks like an annotation file, not a task graph; learn a graph from "
                             "it with tgml train")
        if is_captaincook_graph(data):
            raise InputError(f"{source}: a CaptainCook4D graph file, which numbers the steps its own way: tgml show "
                             "and tgml eval --gt read it; to check recordings against it, write it with the recipe's "
                             "step ids (tgml bench-live --save-graphs writes <recipe>-hand-made.json)")
        if "format" not in data:
            # A split or eval's results given as the graph: said as the kind it is, as an annotation file is above.
            raise InputError(mistaken_file(data, "graph", source)
                             or f"{source}: not a task-graph file (no 'format' field; tgml train writes them)")
        if data.get("format") != FORMAT_NAME:
            raise InputError(f"{source}: field 'format' is {as_written(data.get('format'))}, expected "
                             f"{as_written(FORMAT_NAME)}")
        version = data.get("version")
        if not _is_int(version) or version not in READABLE_VERSIONS:
            readable = " and ".join(map(str, READABLE_VERSIONS))
            raise InputError(f"{source}: unsupported version {as_written(version)} (this program reads {readable})")
        steps = data.get("steps")
        if not isinstance(steps, list) or not steps:
            raise InputError(f"{source}: field 'steps' must be a non-empty list")
        if len(steps) > MAX_STEPS:
            raise InputError(f"{source}: {len(steps)} steps; at most {MAX_STEPS} can be served live")
        ids: list[int] = []
        names: list[str] = []
        for k, step in enumerate(steps):
            if not isinstance(step, dict):
                raise InputError(f"{source}: steps[{k}] = {as_written(step, 40)} must be an object "
                                 '{"id": integer, "name": string}')
            for key, fits, kind in (("id", _is_int, "an integer"), ("name", _is_str, "a string")):
                if key not in step:
                    raise InputError(f"{source}: steps[{k}] has no field {key!r}; each step is "
                                     '{"id": integer, "name": string}')
                if not fits(step[key]):
                    raise InputError(f"{source}: steps[{k}].{key} = {as_written(step[key], 40)} must be {kind}")
            if not is_step_id(step["id"]):
                raise InputError(f"{source}: steps[{k}].id = {step['id']} must be {STEP_ID_RULE}")
            ids.append(int(step["id"]))
            names.append(step["name"])
        optional_scores = _optional_scores(steps, version, source)
        if len(set(ids)) != len(ids):
            counts = Counter(ids)
            dup = next(i for i in ids if counts[i] > 1)
            raise InputError(f"{source}: step id {dup} appears twice in 'steps'")
        nodes: list[Node] = [START, *ids, END]
        index = {node: i for i, node in enumerate(nodes)}
        adjacency = np.zeros((len(nodes), len(nodes)), dtype=bool)
        edges = data.get("edges")
        if not isinstance(edges, list):
            raise InputError(f"{source}: field 'edges' must be a list")
        listed: dict[tuple[int, int], int] = {}  # (step, requires) matrix cell -> the edges[] index that set it
        for k, edge in enumerate(edges):
            if not isinstance(edge, dict) or "step" not in edge or "requires" not in edge:
                raise InputError(f"{source}: edges[{k}] must be {{'step': id, 'requires': id}}")
            ends = []
            for key in ("step", "requires"):
                node = edge[key]
                if not (_is_int(node) or isinstance(node, str)) or node not in index:
                    raise InputError(f"{source}: edges[{k}].{key} = {as_written(node)} is not a step of this graph")
                ends.append(index[node])
            cell = (ends[0], ends[1])
            if cell in listed:  # never written so (to_dict lists each once): a hand edit or a merge gone wrong
                raise InputError(f"{source}: edges[{k}] repeats edges[{listed[cell]}] (step {nodes[cell[0]]} "
                                 f"requires {nodes[cell[1]]}); each pre-condition of a step is listed once")
            listed[cell] = k
            adjacency[cell] = True
        weights = data.get("weights")
        if weights is not None:
            weights = _number_array(weights)
            if weights is None:
                raise InputError(f"{source}: field 'weights' must be a square matrix of numbers")
        info = data.get("info", {})
        if not isinstance(info, dict):
            raise InputError(f"{source}: field 'info' must be an object")
        if weights is not None and weights.shape == (len(ids) + 2, len(ids) + 2):
            _check_probabilities(weights, info.get("weights"), source)
        scenario = data.get("scenario", "")
        if not isinstance(scenario, str):
            raise InputError(f"{source}: field 'scenario' must be a string")
        try:
            return cls(tuple(ids), tuple(names), adjacency, weights, scenario, info, optional_scores)
        except InputError as err:
            raise InputError(f"{source}: {str(err).removeprefix('task graph: ')}") from None


def execution_levels(adjacency: np.ndarray) -> np.ndarray:
    """The execution level of every node: 0 for a node without pre-conditions, else one more than its deepest
    pre-condition (Kahn's algorithm, one whole level per pass).

    Args:
        adjacency: bool ``(m, m)``, ``adjacency[i, j]`` when node ``j`` is a pre-condition of node ``i``.

    Returns:
        int ``(m,)``; -1 for the nodes on or behind a cycle, which never become ready.
    """
    adjacency = np.asarray(adjacency, dtype=bool)
    unmet = adjacency.sum(axis=1)  # (m,) pre-conditions not yet placed on a level
    levels = np.full(len(unmet), -1)
    level = np.flatnonzero(unmet == 0)
    depth = 0
    while level.size:
        levels[level] = depth
        unmet[level] = -1  # placed: never ready again
        unmet -= adjacency[:, level].sum(axis=1)
        level = np.flatnonzero(unmet == 0)
        depth += 1
    return levels


def _number_array(value: Any) -> np.ndarray | None:
    """``value`` as a float array if it holds numbers only; None for ragged rows, strings, nulls or objects
    (``np.asarray(..., dtype=float)`` would quietly turn the string ``"0.5"`` into a number)."""
    try:
        array = np.asarray(value)
    except (TypeError, ValueError):
        return None
    return array.astype(np.float64) if array.dtype.kind in "iuf" else None


def _check_probabilities(weights: np.ndarray, kind: object, source: str) -> None:
    """Refuse weights read as probabilities (a row-softmax, untagged, or per-edge `EDGE_PROBABILITY_WEIGHTS`) that
    lie outside [0, 1]: the procedure questions would take -5 or 7 for a probability, and the next-step scores change
    without a word. Weights of another kind (a combined evidence) have ranges of their own."""
    if kind is not None and kind != EDGE_PROBABILITY_WEIGHTS:
        return
    outside = (weights < -PROBABILITY_SLACK) | (weights > 1 + PROBABILITY_SLACK)
    if outside.any():
        i, j = (int(x) for x in np.argwhere(outside)[0])
        raise InputError(f"{source}: weights[{i}][{j}] = {weights[i, j]:g} is not a probability in [0, 1]"
                         f"{' (info.weights: ' + str(kind) + ')' if kind else ''}")


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_str(value: Any) -> bool:
    return isinstance(value, str)


def _optional_scores(steps: list[dict[str, Any]], version: int, source: str) -> np.ndarray | None:
    """The per-step ``optional`` fields as an ``(n,)`` array; None when no step has one (all required).

    A step that leaves the field out is required (0); a value that is not a number in [0, 1] (true/false
    included: the field is a score, not a flag) is refused, naming the step entry.
    """
    if not any("optional" in step for step in steps):
        return None
    scores = np.zeros(len(steps))
    for k, step in enumerate(steps):
        if "optional" not in step:
            continue
        if version < 2:
            raise InputError(f"{source}: steps[{k}].optional needs version 2 (the file says version {version})")
        value = step["optional"]
        if not isinstance(value, int | float) or isinstance(value, bool) or not 0 <= value <= 1:
            raise InputError(f"{source}: steps[{k}].optional = {as_written(value)} is not a number in [0, 1]")
        scores[k] = float(value)
    return scores


def save_graph(graph: TaskGraph, path: str | Path) -> None:
    """Write a graph file (atomically: never half a graph); the parent folder is created if needed.

    An OS failure (the path is a folder, a parent is a file, no permission) is a one-line `InputError`.
    """
    write_text(path, json.dumps(graph.to_dict(), indent=2) + "\n", "graph file")


GRAPH_MARK: Final = re.compile(rb'"format"\s*:\s*"' + FORMAT_NAME.encode() + rb'"')
MARK_BYTES: Final = 4096  # `save_graph` writes the format first; a hand-edited file keeps it near the top


def check_replaces_a_graph(path: str | Path, option: str = "--out") -> None:
    """Refuse an output that names an existing file other than a task graph (a label file, a checkpoint): a run
    replaces a graph it learns again, but ``--out labels2.json`` replaced a label file without a word. Only the start
    of the file is read (`MARK_BYTES`).

    Raises:
        InputError: a non-empty regular file whose start does not hold the graph format's mark.
    """
    start = output_start(path, MARK_BYTES)
    if start and not GRAPH_MARK.search(start) and not _holds_a_graph(Path(path)):
        raise InputError(f"{option} {path}: exists and is not a task graph file (a label file, a checkpoint?); a run "
                         "replaces only a graph: choose another name, or remove the file first")


def _holds_a_graph(path: Path) -> bool:
    """Whether a file whose start lacks the format's mark is a graph all the same (its keys re-sorted, ``jq -S``):
    read whole, when it is small enough to be one (`read_json` refuses a file over its size limit, 256 MiB, from its
    size alone; a 4096-step graph's file is far smaller)."""
    try:
        data = read_json(path, "graph file")
    except InputError:
        return False
    return isinstance(data, dict) and data.get("format") == FORMAT_NAME


def read_graph_json(path: str | Path) -> Any:
    """A graph file's JSON (every reader of a graph file reads it here); the labels given for the graph as a table
    are named as such, as `TaskGraph.from_dict` names the annotation JSON, where they were "invalid JSON at line 1
    column 1"."""
    try:
        return read_json(path, "graph file")
    except InputError as err:
        if "invalid JSON at line 1 column 1" in str(err) and (
                is_table(path) or looks_like_table(read_text_file(path, "graph file"))):
            raise InputError(f"{path}: this looks like an annotation table, not a task graph; learn a graph from it "
                             "with tgml train") from None
        raise


def load_graph(path: str | Path, option: str | None = None) -> TaskGraph:
    """Read and validate a graph file; `InputError` names the file and what is wrong, after ``option`` when given
    (``--graph nope.json: graph file not found``: the option the user typed it under)."""
    try:
        return TaskGraph.from_dict(read_graph_json(path), source=str(path))
    except InputError as err:
        if option is None:
            raise
        raise InputError(f"{option} {err}") from None

