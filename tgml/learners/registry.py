"""The one table from a learner's name to the learner: its config class, its training function and whether a seed
changes what it learns.

Every command that takes a learner's name reads this table: ``tgml train --method``, ``tgml bench-captaincook
--method``, ``tgml bench-mistakes --method`` and ``prego-bench --method``. Adding a learner is one folder under
`tgml.learners` (its config class and its `tgml.learners.result.Learner` function) and one entry here.

Light to import: the table names each config class and each training function by its import path, imported when a
learner's settings are read or a graph is learned, so that a command's parser lists the learners without loading
numpy, and settings are checked, and the deterministic baselines run, without loading torch.
"""

from __future__ import annotations

import dataclasses
import importlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from graphs.common.errors import InputError
from graphs.common.safe_text import meant_name, unknown_name
from graphs.common.settings_files import field_names, load_config_file

if TYPE_CHECKING:
    from tgml.learners.result import Learner


@dataclass(frozen=True)
class LearnerEntry:
    """One learner of the table.

    Attributes:
        name: what commands call it (``--method NAME``, the ``[NAME]`` table of a settings file).
        settings: ``"module:Class"`` of its settings dataclass (`config_class`).
        trainer: ``"module:function"`` of its `Learner` function (`learn`).
        seeded: a seed changes the graph (benchmarks train it once per seed; the others run once).
        summary: one line for help texts and tables.
        fixed: config fields the name itself sets (MSGI's objective); a settings table may not set them.
        needs: the optional extra it needs beyond the core install, or "".
    """

    name: str
    settings: str
    trainer: str
    seeded: bool
    summary: str
    fixed: Mapping[str, Any] = field(default_factory=dict)
    needs: str = ""

    @property
    def config_class(self) -> type:
        """Its settings dataclass (validated on construction; defaults are the learner's own)."""
        config_class: type = _imported(self.settings)
        return config_class

    @property
    def setting_keys(self) -> frozenset[str]:
        """The keys a ``[name]`` settings table may hold: the config's fields (or its ``TABLE_KEYS``) but the seed and
        the fixed ones."""
        keys = getattr(self.config_class, "TABLE_KEYS", None) or field_names(self.config_class)
        return frozenset(keys) - {"seed"} - set(self.fixed)

    def config(self, settings: Mapping[str, Any] | None = None, seed: int | None = None,
               epochs: int | None = None) -> Any:
        """The learner's config from a settings table; fields it leaves out keep the config class's defaults.

        Args:
            settings: setting -> value (the keys of `setting_keys`; sub-tables for a combined learner); None: the
                config class's defaults.
            seed: the training seed (ignored by a learner without one).
            epochs: override of the configured epochs (quick checks), or None.

        Returns:
            The validated config.
        """
        table = settings is not None
        settings = dict(settings or {})
        unknown = sorted(set(settings) - self.setting_keys)
        if unknown:
            raise InputError(unknown_name(f"{self.name}: setting", str(unknown[0]), sorted(self.setting_keys), None))
        values = {**settings, **self.fixed}
        names = field_names(self.config_class)
        if seed is not None and "seed" in names:
            values["seed"] = seed
        if epochs is not None and "epochs" in names:
            values["epochs"] = epochs
        from_table = getattr(self.config_class, "from_table", None)
        if table and from_table is not None:  # a combined learner reads its learners' sub-tables
            return from_table(values, epochs)
        return self.config_class(**values)

    def config_file(self, path: str | Path, base: Any = None, option: str = "", **overrides: Any) -> Any:
        """The learner's config from a flat settings file of its fields (``tgml train --config FILE``).

        Args:
            path: TOML (or YAML) file with top-level keys named like the config's fields.
            base: the config whose values the file's missing keys keep (default: the config class's defaults).
            option: the option the overrides came from (``"--set"``); empty: each is its own flag (``--beta``).
            overrides: values that win over the file (None values are ignored).

        Returns:
            The validated config; errors name the file, or the option, that gave the value.
        """
        defaults = dataclasses.asdict(base if base is not None else self.config(None))
        return load_config_file(self.config_class, path, defaults, overrides, option)

    def with_seed(self, config: Any, seed: int) -> Any:
        """``config`` learning with ``seed`` (unchanged for a learner without a seed)."""
        return dataclasses.replace(config, seed=seed) if "seed" in field_names(self.config_class) else config

    @property
    def learn(self) -> Learner[Any]:
        """The training function (importing it loads torch for the torch learners)."""
        learner: Learner[Any] = _imported(self.trainer)
        return learner


def _imported(path: str) -> Any:
    """The object a ``"module:name"`` path names."""
    module, _, name = path.partition(":")
    return getattr(importlib.import_module(module), name)


_ENTRIES: Final = (
    LearnerEntry("noisy-and", "tgml.learners.noisy_and.config:NoisyAndConfig",
                 "tgml.learners.noisy_and.train:train_noisy_and", True,
                 "noisy-AND TGML: every pre-condition of a step is kept (ours; tgml train's default)"),
    LearnerEntry("do", "tgml.learners.do.config:DOConfig",
                 "tgml.learners.do.train:train_do", True,
                 "Direct Optimization, the paper's TGML learner"),
    LearnerEntry("do-cv", "tgml.learners.do.config:DOCVConfig",
                 "tgml.learners.do.variants:train_do_cv", True,
                 "DO cut at a threshold chosen by cross-validation on training data (ours)"),
    LearnerEntry("do-ensemble", "tgml.learners.do.config:DOEnsembleConfig",
                 "tgml.learners.do.ensemble:train_do_ensemble", True,
                 "the mean weights of several DO seeds, post-processed (ours)"),
    LearnerEntry("noisy-and-do", "tgml.learners.noisy_and_do.config:NoisyAndDOConfig",
                 "tgml.learners.noisy_and_do.train:train_noisy_and_do", True,
                 "noisy-AND and DO-ensemble evidence combined edge by edge (ours)"),
    LearnerEntry("tgt-text", "tgml.learners.tgt_text.config:TgtTextConfig",
                 "tgml.learners.tgt_text.train:train_tgt_text", True,
                 "the Task Graph Transformer on step-name embeddings", needs="text"),
    LearnerEntry("count-based", "graphs.count_based:CountBasedConfig",
                 "tgml.learners.graph_baselines:learn_count_based", False,
                 "transition counts (baseline)"),
    LearnerEntry("msgi", "graphs.eligibility_search:EligibilitySearchConfig",
                 "tgml.learners.graph_baselines:learn_eligibility", False,
                 "MSGI: greedy eligibility search, accuracy objective (baseline)", {"objective": "accuracy"}),
    LearnerEntry("msg2", "graphs.eligibility_search:EligibilitySearchConfig",
                 "tgml.learners.graph_baselines:learn_eligibility", False,
                 "MSG²: greedy eligibility search, precision objective (baseline)", {"objective": "precision"}),
)
LEARNERS: Final[dict[str, LearnerEntry]] = {entry.name: entry for entry in _ENTRIES}
DEFAULT_LEARNER: Final = "noisy-and"


def learner(name: str) -> LearnerEntry:
    """The entry of a learner's name, or an error naming the known ones."""
    entry = LEARNERS.get(name)
    if entry is None:
        raise InputError(unknown_name("learner", name, LEARNERS))
    return entry


def resolve_learner(method: str | None, given: set[str]) -> str:
    """The learner of a ``tgml train`` run: the one asked for, else the default unless the given settings belong to
    another (a Direct Optimization setting such as ``beta`` or ``augment`` selects ``do``, so DO command lines keep
    working).

    Args:
        method: a learner's name, or None.
        given: names of the settings given (flags and config-file keys).

    Returns:
        The learner's name.
    """
    if method is not None:
        entry = learner(method)
        if "seed" in given and not entry.seeded:  # its config has no seed: replace() raised a TypeError
            raise InputError(f"setting 'seed' does not apply to --method {method}: it learns the same graph from "
                             "the same executions every time")
        foreign = sorted(given - entry.setting_keys - {"seed"})
        if foreign:
            owner = _owner(foreign[0])
            known = ', '.join(sorted(entry.setting_keys))
            if not owner:  # a typo: "does not apply" would send the user looking for the learner it applies to
                raise InputError(unknown_name(f"--method {method} setting", foreign[0], sorted(entry.setting_keys),
                                              None))
            raise InputError(f"setting {foreign[0]!r} does not apply to --method {method} (it belongs to {owner})"
                             f"; its settings: {known}")
        return method
    default = LEARNERS[DEFAULT_LEARNER]
    foreign = sorted(given - default.setting_keys - {"seed"})
    if not foreign:
        return DEFAULT_LEARNER
    do = LEARNERS["do"]
    # A key of no learner is checked first: sorted among the others, a typo was blamed on Direct Optimization.
    unknown = next((key for key in foreign if not _owner(key)), None)
    if unknown is not None:
        raise InputError(f"unknown setting {unknown!r} (the settings of {DEFAULT_LEARNER}: "
                         f"{', '.join(sorted(default.setting_keys))}; of do: {', '.join(sorted(do.setting_keys))}; "
                         "--method names another learner)"
                         f"{meant_name(unknown, default.setting_keys | do.setting_keys, 0)}")
    not_do = sorted(given - do.setting_keys - {"seed"})
    if not_do:
        raise InputError(f"settings {foreign[0]!r} (Direct Optimization) and {not_do[0]!r} ({DEFAULT_LEARNER}) "
                         "belong to different learners" if not_do[0] in default.setting_keys
                         else f"setting {not_do[0]!r} belongs to no learner of --method do or {DEFAULT_LEARNER}")
    return "do"


def _owner(setting: str) -> str:
    """The learners whose settings include ``setting``, for an error message."""
    owners = [name for name, entry in LEARNERS.items() if setting in entry.setting_keys]
    return ", ".join(owners[:3])
