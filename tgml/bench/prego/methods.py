"""The graph-learning methods of the PREGO benchmark (the learners of `tgml.learners.registry`) and their per-dataset
settings files.

The settings of each dataset ship inside the package, ``tgml/bench/settings/prego-<dataset>.toml``, so that an
installed ``prego-bench`` finds them without a source checkout: one table per learner, named like it, whose keys are
that learner's config fields (a key a table leaves out keeps the config class's default). `build_graph` runs in worker
processes.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any, Final

from graphs.common.settings_files import check_tables, naming_the_file, read_settings
from graphs.task_graph import TaskGraph
from tgml.bench.prego.data import BenchData
from tgml.learners.registry import LEARNERS, learner

SETTINGS_DIR: Final = Path(__file__).resolve().parents[1] / "settings"
# Methods of the paper that `prego-bench` knows but cannot run, and why.
UNAVAILABLE: Final[dict[str, str]] = {
    "llm": "the LLM graphs exist for CaptainCook4D only (tgml bench-captaincook --method llm)",
}


def load_method_settings(dataset: str, config_file: str | Path | None = None) -> dict[str, dict[str, Any]]:
    """Per-dataset method settings, from the shipped ``tgml/bench/settings/prego-<dataset>.toml`` or a user's file.

    Args:
        dataset: dataset name.
        config_file: another settings file with the same tables (``[do]``, ``[count-based]``...).

    Returns:
        ``{method: {setting: value}}``, every table checked by the config of its learner.
    """
    path = Path(config_file) if config_file is not None else SETTINGS_DIR / f"prego-{dataset}.toml"
    hint = "" if config_file is not None else " (it ships inside the package: reinstall mistake-detection)"
    methods = read_settings(path, "benchmark settings file", hint)
    check_tables(methods, {name: entry.setting_keys for name, entry in LEARNERS.items()}, path, kind="method")
    for method, settings in methods.items():
        with naming_the_file(path, method, {method: LEARNERS[method].setting_keys}):
            learner(method).config(settings, seed=0)  # a bad value fails before any training starts
    return methods


def build_graph(method: str, data: BenchData, settings: Mapping[str, Any], seed: int,
                epochs: int | None = None) -> TaskGraph:
    """The graph one learner learns from a dataset's training split, with its settings table.

    Args:
        method: a learner's name (`tgml.learners.registry.LEARNERS`).
        data: the dataset (only ``train`` and the taxonomy are read).
        settings: the learner's ``[method]`` table.
        seed: training seed (ignored by a learner without randomness).
        epochs: override of the configured epochs (quick checks), or None.

    Returns:
        The post-processed `TaskGraph`.
    """
    entry = learner(method)
    config = entry.config(settings, seed, epochs)
    return entry.learn(data.train, data.step_ids, data.step_names, config, data.scenario).graph
