"""Graph-learning methods of the benchmark and their per-dataset settings files.

The settings of each dataset ship inside the package, ``tgml/bench/settings/prego-<dataset>.toml``, so that an
installed ``prego-bench`` finds them without a source checkout. Builders are top-level functions because they run
in worker processes.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from functools import partial
from pathlib import Path
from typing import Any, Final

from graphs.count_based import CountBasedConfig, count_based_graph
from graphs.eligibility_search import OBJECTIVES, EligibilitySearchConfig, eligibility_search_graph
from graphs.errors import InputError
from graphs.postprocess import present_steps
from graphs.settings_files import check_tables, naming_the_file, read_settings
from graphs.task_graph import TaskGraph
from tgml.bench.prego.data import BenchData
from tgml.ensemble import EnsembleConfig, mean_weights_graph, train_ensemble
from tgml.evidence_combination import METHOD_NAME as NOISY_AND_DO
from tgml.evidence_combination import CombinationConfig, combined_graph
from tgml.noisy_and_config import SETTING_KEYS as NOISY_AND_KEYS
from tgml.noisy_and_config import noisy_and_config
from tgml.tgt_config import SETTING_KEYS as TGT_TEXT_KEYS
from tgml.tgt_config import tgt_text_config
from tgml.train_config import TrainConfig

SETTINGS_DIR: Final = Path(__file__).resolve().parents[1] / "settings"


def load_method_settings(dataset: str, config_file: str | Path | None = None) -> dict[str, dict[str, Any]]:
    """Per-dataset method settings, from the shipped ``tgml/bench/settings/prego-<dataset>.toml`` or a user's file.

    Args:
        dataset: dataset name.
        config_file: another settings file with the same tables (``[do]``, ``[count-based]``...).

    Returns:
        ``{method: {setting: value}}``, every value checked by the config it feeds.
    """
    path = Path(config_file) if config_file is not None else SETTINGS_DIR / f"prego-{dataset}.toml"
    hint = "" if config_file is not None else " (it ships inside the package: reinstall mistake-detection)"
    methods = read_settings(path, "benchmark settings file", hint)
    check_tables(methods, METHOD_KEYS, path, kind="method")
    for method, settings in methods.items():
        with naming_the_file(path, method):
            _check_settings(method, settings)
    return methods


def do_train_config(settings: Mapping[str, Any], seed: int, epochs: int | None) -> TrainConfig:
    """The `TrainConfig` of a DO-type table (values are passed as read, so `TrainConfig` checks their types)."""
    return TrainConfig(
        beta=settings.get("beta", 0.005),
        epochs=epochs if epochs is not None else settings.get("epochs", 1000),
        lr=settings.get("lr", 0.1),
        seed=seed,
        augment=settings.get("augment", True),
        relaxed=settings.get("relaxed", True),
        early_stop=settings.get("early_stop", "none"),
        edge_threshold=settings.get("edge_threshold", "1/n"),
    )


def _ensemble_config(settings: Mapping[str, Any]) -> EnsembleConfig:
    return EnsembleConfig(
        size=settings.get("ensemble_size", 5),
        threshold_scale=settings.get("threshold_scale", 1.0),
        relaxed=settings.get("relaxed", True),
    )


def _count_based_config(settings: Mapping[str, Any]) -> CountBasedConfig:
    return CountBasedConfig(first_occurrence=settings.get("first_occurrence", False))


def _eligibility_config(method: str, settings: Mapping[str, Any]) -> EligibilitySearchConfig:
    return EligibilitySearchConfig(OBJECTIVES[method], unique_executions=settings.get("unique_executions", True))


def _check_settings(method: str, settings: Mapping[str, Any]) -> None:
    """Build every config object a method table feeds, so a bad value fails before any training starts."""
    if method in SETTINGS_CHECKS:
        SETTINGS_CHECKS[method](settings)
        return
    if "beta" not in METHOD_KEYS[method]:  # a method without a check of its own (the builder checks its values)
        return
    do_train_config(_do_settings(settings), seed=0, epochs=None)
    if "threshold_scale" in METHOD_KEYS[method]:
        _ensemble_config(settings)


def _do_settings(settings: Mapping[str, Any]) -> dict[str, Any]:
    """The DO training part of a ``do-cv`` / ``do-ensemble`` table."""
    return {k: v for k, v in settings.items() if k in METHOD_KEYS["do"]}


def build_do(data: BenchData, settings: Mapping[str, Any], seed: int, epochs: int | None = None) -> TaskGraph:
    """Direct Optimization (TGML) graph of one seed, with the dataset's settings."""
    from tgml.train import train_task_graph  # torch loads only when a graph is trained

    config = do_train_config(settings, seed, epochs)
    result = train_task_graph(data.train, data.step_ids, data.step_names, config, scenario=data.scenario)
    return result.graph


def build_count_based(data: BenchData, settings: Mapping[str, Any], seed: int, epochs: int | None = None) -> TaskGraph:
    """Count-Based baseline graph (deterministic: ``seed`` and ``epochs`` are ignored)."""
    config = _count_based_config(settings)
    return count_based_graph(data.train, data.step_ids, data.step_names, config, scenario=data.scenario)


def build_msgi(data: BenchData, settings: Mapping[str, Any], seed: int, epochs: int | None = None) -> TaskGraph:
    """MSGI baseline graph: greedy eligibility search, accuracy objective (deterministic)."""
    return eligibility_search_graph(data.train, data.step_ids, data.step_names, _eligibility_config("msgi", settings),
                                    data.scenario)


def build_msg2(data: BenchData, settings: Mapping[str, Any], seed: int, epochs: int | None = None) -> TaskGraph:
    """MSG² baseline graph: greedy eligibility search, precision objective (deterministic)."""
    return eligibility_search_graph(data.train, data.step_ids, data.step_names, _eligibility_config("msg2", settings),
                                    data.scenario)


def build_noisy_and(data: BenchData, settings: Mapping[str, Any], seed: int, epochs: int | None = None) -> TaskGraph:
    """Our noisy-AND TGML learner (`tgml.noisy_and_train.build_noisy_and`), with the dataset's settings."""
    from tgml.noisy_and_train import build_noisy_and as build  # torch loads only when a graph is trained

    return build(data, settings, seed, epochs)


def build_tgt_text(data: BenchData, settings: Mapping[str, Any], seed: int, epochs: int | None = None) -> TaskGraph:
    """The Task Graph Transformer on the step names (`tgml.tgt_train.build_tgt_text`; needs the ``text`` extra)."""
    from tgml.tgt_train import build_tgt_text as build  # torch and the text encoder load only when a graph is trained

    return build(data, settings, seed, epochs)


def build_do_cv(data: BenchData, settings: Mapping[str, Any], seed: int, epochs: int | None = None) -> TaskGraph:
    """Our variant: DO with the epochs and edge threshold chosen by cross-validation on the training split.

    The graph is trained like `build_do` and re-binarised with the threshold ``1 / round(n * threshold_scale)``
    instead of DO's ``1 / n``; ``threshold_scale`` and ``epochs`` come from the settings file, where they were
    written after ``prego-bench select`` picked them on training data only.
    """
    graph = build_do(data, _do_settings(settings), seed, epochs)
    assert graph.weights is not None
    cut = _ensemble_config(settings)  # one member: only its threshold and relaxed rule apply
    n_threshold = cut.threshold_steps(graph.n_steps)
    info = {**graph.info, "method": "do-cv", "threshold_scale": cut.threshold_scale, "threshold": 1.0 / n_threshold}
    present = present_steps(graph.step_ids, data.train)
    return mean_weights_graph(
        graph.step_ids, graph.step_names, [graph.weights], present, cut.relaxed, n_threshold, graph.scenario, info
    )


def build_do_ensemble(data: BenchData, settings: Mapping[str, Any], seed: int, epochs: int | None = None) -> TaskGraph:
    """Ours: the weights of ``ensemble_size`` DO seeds averaged, then post-processed (`tgml.ensemble`).

    ``epochs`` / ``early_stop`` / ``threshold_scale`` come from the settings file, where they were written after
    ``prego-bench select --method do-ensemble`` picked them on the training split only.
    """
    training = do_train_config(_do_settings(settings), seed, epochs)
    return train_ensemble(
        data.train, data.step_ids, data.step_names, training, _ensemble_config(settings), seed, data.scenario
    )


# The two learners' tables nested in a ``[noisy-and-do]`` table (``[noisy-and-do.noisy-and]``...).
COMBINED_LEARNERS: Final = ("noisy-and", "do-ensemble")


def _combination_config(settings: Mapping[str, Any]) -> CombinationConfig:
    """The rule of a ``[noisy-and-do]`` table, after checking its two learners' sub-tables."""
    config = CombinationConfig(
        rule=settings.get("rule", "geometric"),
        threshold=settings.get("threshold", 1.0),
        relaxed=settings.get("relaxed", True),
    )
    for learner in COMBINED_LEARNERS:
        where = f"sub-table [{NOISY_AND_DO}.{learner}]"
        table = settings.get(learner)
        if not isinstance(table, dict):
            raise InputError(f"{NOISY_AND_DO} needs the {where} of that learner's settings")
        unknown = sorted(set(table) - METHOD_KEYS[learner])
        if unknown:
            raise InputError(f"{where} has unknown setting {unknown[0]!r} "
                             f"(known: {', '.join(sorted(METHOD_KEYS[learner]))})")
        try:
            _check_settings(learner, table)
        except InputError as err:
            raise InputError(f"{where}: {err}") from None
    return config


def build_noisy_and_do(data: BenchData, settings: Mapping[str, Any], seed: int, epochs: int | None = None) -> TaskGraph:
    """Ours: noisy-AND and DO-ensemble graphs of the same seed, each edge kept by the combined evidence of both
    (`tgml.evidence_combination`); ``rule`` and ``threshold`` were chosen by ``prego-bench select --method
    noisy-and-do`` on the training split only."""
    config = _combination_config(settings)
    noisy_and = build_noisy_and(data, settings["noisy-and"], seed, epochs)
    do_ensemble = build_do_ensemble(data, settings["do-ensemble"], seed, epochs)
    info = {"noisy_and_seed": seed, "member_seeds": do_ensemble.info.get("member_seeds", [])}
    return combined_graph(noisy_and, do_ensemble, present_steps(data.step_ids, data.train), config, info)


GraphBuilder = Callable[[BenchData, Mapping[str, Any], int, "int | None"], TaskGraph]
METHOD_BUILDERS: dict[str, GraphBuilder] = {
    "do": build_do,
    "count-based": build_count_based,
    "do-cv": build_do_cv,
    "do-ensemble": build_do_ensemble,
    "msgi": build_msgi,
    "msg2": build_msg2,
    "noisy-and": build_noisy_and,
    "tgt-text": build_tgt_text,
    NOISY_AND_DO: build_noisy_and_do,
}
# How a non-DO table's values are checked when the settings file is read (DO-type tables: `do_train_config`).
SETTINGS_CHECKS: dict[str, Callable[[Mapping[str, Any]], object]] = {
    "count-based": _count_based_config,
    "msgi": partial(_eligibility_config, "msgi"),
    "msg2": partial(_eligibility_config, "msg2"),
    "noisy-and": lambda settings: noisy_and_config(dict(settings), seed=0),
    "tgt-text": lambda settings: tgt_text_config(dict(settings), seed=0),
    NOISY_AND_DO: _combination_config,
}
# Methods of the paper that `prego-bench` knows but cannot run, and why.
UNAVAILABLE: dict[str, str] = {
    "llm": "the LLM graphs exist for CaptainCook4D only (tgml bench-captaincook --method llm)",
}
METHOD_KEYS: dict[str, frozenset[str]] = {
    "do": frozenset({"beta", "epochs", "lr", "augment", "relaxed", "early_stop", "edge_threshold"}),
    "count-based": frozenset({"first_occurrence"}),
    "do-cv": frozenset({"beta", "epochs", "lr", "augment", "relaxed", "early_stop", "threshold_scale"}),
    "do-ensemble": frozenset(
        {"beta", "epochs", "lr", "augment", "relaxed", "early_stop", "threshold_scale", "ensemble_size"}
    ),
    "msgi": frozenset({"unique_executions"}),
    "msg2": frozenset({"unique_executions"}),
    "noisy-and": frozenset(NOISY_AND_KEYS),
    "tgt-text": frozenset(TGT_TEXT_KEYS),
    NOISY_AND_DO: frozenset({"rule", "threshold", "relaxed", *COMBINED_LEARNERS}),
}
SEEDED: dict[str, bool] = {
    "do": True, "count-based": False, "do-cv": True, "do-ensemble": True, "msgi": False, "msg2": False,
    "noisy-and": True, "tgt-text": True, NOISY_AND_DO: True,
}
