"""Edge precision, recall and F1 between a predicted and a ground-truth task graph (docs/method.md).

Edges are compared on the full ``START..END`` adjacency, START/END edges included. Ground truth can be a
task-graph file of this project or a CaptainCook4D graph (``{"steps": {id: name}, "edges": [[a, b], ...]}``,
node 0 = START, last = END). A CaptainCook4D edge ``[a, b]`` means *a is done before b*, i.e. in our
orientation ``b -> a`` (b requires a); its step ids differ from the taxonomy ids, so steps are matched by name.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from graphs.common.errors import InputError
from graphs.common.file_kinds import is_captaincook_graph
from graphs.common.files import read_json
from graphs.common.safe_text import quoted
from graphs.limits import name_fault
from graphs.llm_graphs import SUFFIX as LLM_SUFFIX
from graphs.llm_graphs import llm_adjacency
from graphs.precision_recall import precision_recall_f1
from graphs.task_graph import (
    END,
    FORMAT_NAME,
    START,
    Node,
    TaskGraph,
    load_graph,
    read_graph_json,
)


@dataclass(frozen=True)
class EdgeScores:
    """Edge-level precision, recall and F1 (in percent; None: nothing to count) with the counts they come from."""

    precision: float | None
    recall: float | None
    f1: float | None
    true_positives: int
    predicted: int
    expected: int


def edge_scores(pred: np.ndarray, gt: np.ndarray) -> EdgeScores:
    """Compare two adjacency matrices of the same node layout (START..END, START/END edges included).

    Args:
        pred: bool ``(m, m)`` predicted edges.
        gt: bool ``(m, m)`` ground-truth edges.

    Returns:
        `EdgeScores`; a score over nothing is None (`graphs.precision_recall`): precision without a predicted edge,
        recall and F1 without a ground-truth edge.
    """
    pred = np.asarray(pred, dtype=bool)
    gt = np.asarray(gt, dtype=bool)
    if pred.shape != gt.shape:
        raise InputError(f"edge metrics: predicted graph has shape {pred.shape}, ground truth {gt.shape}")
    tp = int((pred & gt).sum())
    n_pred = int(pred.sum())
    n_gt = int(gt.sum())
    return EdgeScores(*precision_recall_f1(tp, n_pred, n_gt).in_percent(), tp, n_pred, n_gt)


def compare_graphs(pred: TaskGraph, gt: TaskGraph) -> EdgeScores:
    """Edge scores of ``pred`` against ``gt``; both must have the same set of key-step ids.

    Args:
        pred: predicted graph.
        gt: ground-truth graph (same step ids, any order).

    Returns:
        `EdgeScores` over the full START..END adjacency.
    """
    if set(pred.step_ids) != set(gt.step_ids):
        only_pred = sorted(set(pred.step_ids) - set(gt.step_ids))
        only_gt = sorted(set(gt.step_ids) - set(pred.step_ids))
        raise InputError(
            f"edge metrics: graphs have different steps (only predicted: {only_pred}, only ground truth: {only_gt})"
        )
    renamed = pred.renamed_step(gt.step_ids, gt.step_names)
    if renamed is not None:
        step, here, there = renamed
        raise InputError(f"edge metrics: step {step} is {quoted(here, 60)} in the predicted graph and "
                         f"{quoted(there, 60)} in the ground truth: graphs of different procedures")
    order = [gt.index(node) for node in pred.nodes]  # gt matrix re-ordered into pred's layout
    return edge_scores(pred.adjacency, gt.adjacency[np.ix_(order, order)])


def captaincook_graph(data: Any, like: TaskGraph, source: str) -> TaskGraph:
    """Convert CaptainCook4D ground-truth content into a `TaskGraph` with ``like``'s step ids.

    Args:
        data: parsed ``{"steps": {id: name}, "edges": [[a, b], ...]}``.
        like: a graph over the same procedure; its step names are matched to the ground-truth names.
        source: file name for error messages.

    Returns:
        The ground truth as a `TaskGraph` (edge ``[a, b]`` becomes "b requires a").
    """
    steps = data.get("steps") if isinstance(data, dict) else None
    edges = data.get("edges") if isinstance(data, dict) else None
    if not isinstance(steps, dict) or not isinstance(edges, list):
        raise InputError(f"{source}: expected {{'steps': {{id: name}}, 'edges': [[a, b], ...]}}")
    numbered = _numbered_steps(steps, source)
    if len(numbered) < 2:
        raise InputError(f"{source}: 'steps' must hold at least START and END (node 0 and the last node)")
    first, last = min(numbered), max(numbered)
    for what, names in ((source, list(numbered.values())), (f"the {like.scenario or 'given'} graph", like.step_names)):
        repeated = next((name for k, name in enumerate(names) if name in names[:k]), None)
        if repeated is not None:  # steps are matched by name: a repeated name would merge two steps silently
            raise InputError(f"{source}: step name {repeated!r} appears twice in {what}, so steps cannot be matched")
    by_name = {name: sid for sid, name in zip(like.step_ids, like.step_names, strict=True)}
    node_of: dict[int, Node] = {first: START, last: END}
    for gid, name in numbered.items():
        if gid in (first, last):
            continue
        if name not in by_name:
            raise InputError(f"{source}: step {gid} {name!r} is not a step of the {like.scenario or 'given'} graph")
        node_of[gid] = by_name[name]
    missing = set(like.step_ids) - set(node_of.values())
    if missing:
        raise InputError(f"{source}: ground truth lacks steps {sorted(missing)} of the predicted graph")
    index = {node: i for i, node in enumerate(like.nodes)}
    adj = np.zeros((like.n_steps + 2, like.n_steps + 2), dtype=bool)
    listed: dict[tuple[int, int], int] = {}  # (before, after) -> the edges[] index that gave it first
    for k, edge in enumerate(edges):
        if not (isinstance(edge, list) and len(edge) == 2 and all(type(x) is int for x in edge)):
            raise InputError(f"{source}: edges[{k}] must be a pair of step ids")
        before, after = edge
        if before not in node_of or after not in node_of:
            raise InputError(f"{source}: edges[{k}] = {edge} names a step not in 'steps'")
        if (before, after) in listed:  # CaptainCook4D's 24 files list each once: a hand edit or a merge gone wrong
            raise InputError(f"{source}: edges[{k}] = {edge} repeats edges[{listed[before, after]}] (step {after} "
                             f"requires step {before}); each pre-condition of a step is listed once")
        listed[before, after] = k
        adj[index[node_of[after]], index[node_of[before]]] = True  # "a before b" == b requires a
    try:
        return TaskGraph(like.step_ids, like.step_names, adj, None, like.scenario, {"source": source})
    except InputError as err:  # a cycle or a self-loop in the file: named as the file's
        raise InputError(f"{source}: {str(err).removeprefix('task graph: ')}") from None


def load_reference_graph(path: str | Path, like: TaskGraph) -> TaskGraph:
    """Read a ground-truth graph: a task-graph file, or a CaptainCook4D graph matched to ``like`` by name.

    Args:
        path: the ground-truth file.
        like: the predicted graph (gives step ids and names for CaptainCook4D files).

    Returns:
        The ground truth as a `TaskGraph`.
    """
    path = Path(path)
    data = read_json(path, "ground-truth graph")
    if isinstance(data, dict) and data.get("format") == FORMAT_NAME:
        return TaskGraph.from_dict(data, source=str(path))
    return captaincook_graph(data, like, str(path))


def load_shown_graph(path: str | Path) -> TaskGraph:
    """A graph to show: a task-graph file, or a CaptainCook4D ground-truth graph as it is, with its own step ids (the
    files the dataset ships; ``tgml eval --gt`` reads them too)."""
    source = str(path)
    data = read_graph_json(path)
    if is_captaincook_graph(data):
        return captaincook_graph(data, _taxonomy_of(data, source), source)
    return TaskGraph.from_dict(data, source=source)


def _taxonomy_of(data: Any, source: str) -> TaskGraph:
    """An edgeless graph over the steps of a CaptainCook4D ground-truth file (its own ids), to read a graph against."""
    steps = data.get("steps") if isinstance(data, dict) else None
    if not isinstance(steps, dict) or len(steps) < 2:
        raise InputError(f"{source}: expected a CaptainCook4D graph {{'steps': {{id: name}}, 'edges': [...]}}")
    numbered = sorted(_numbered_steps(steps, source).items())
    inner = numbered[1:-1]  # node 0 is START and the last node END
    size = len(inner) + 2
    try:
        return TaskGraph(tuple(k for k, _ in inner), tuple(v for _, v in inner), np.zeros((size, size), dtype=bool),
                         scenario=Path(source).stem)
    except InputError as err:  # two steps of one name, too many steps: named as the file's
        raise InputError(f"{source}: {str(err).removeprefix('task graph: ')}") from None


def _numbered_steps(steps: dict[Any, Any], source: str) -> dict[int, str]:
    """The ``{id: name}`` table of a CaptainCook4D graph's ``steps``, START and END included, every name held to the
    task-graph file's rules (`graphs.limits.name_fault`), so a file that reads here is one
    ``tgml show`` and the live pipeline can show."""
    try:
        numbered = {int(k): str(v) for k, v in steps.items()}
    except ValueError:
        raise InputError(f"{source}: 'steps' keys must be integer ids") from None
    for gid, name in numbered.items():
        fault = name_fault(name)
        if fault is not None:
            raise InputError(f"{source}: the name of step {gid} {fault}")
    return numbered


def evaluate_files(pred_path: str | Path, gt_path: str | Path) -> EdgeScores:
    """Edge scores of a predicted graph file against a ground-truth file (what ``tgml eval`` runs).

    Args:
        pred_path: task-graph file, or an LLM graph (``.adjlist``, `graphs.llm_graphs`; its nodes are matched by
            name to the steps of ``gt_path``, which must then be a CaptainCook4D graph, and it is scored as written).
        gt_path: task-graph file or CaptainCook4D ground-truth graph.

    Returns:
        `EdgeScores` on the full START..END adjacency.
    """
    if str(pred_path).endswith(LLM_SUFFIX):
        data = read_json(gt_path, "ground-truth graph")
        like = _taxonomy_of(data, str(gt_path))
        adjacency = llm_adjacency(pred_path, like.step_ids, like.step_names, like.scenario)
        return edge_scores(adjacency, captaincook_graph(data, like, str(gt_path)).adjacency)
    pred = load_graph(pred_path)
    gt = load_reference_graph(gt_path, pred)
    try:
        return compare_graphs(pred, gt)
    except InputError as err:  # name the two files, and their procedures where they say
        scenarios = (f" ({pred.scenario} and {gt.scenario})" if pred.scenario and gt.scenario
                     and pred.scenario != gt.scenario else "")
        raise InputError(f"--pred {pred_path} and --gt {gt_path}{scenarios}: "
                         f"{str(err).removeprefix('edge metrics: ')}") from None
