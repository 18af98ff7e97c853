"""The PREGO online mistake-detection benchmark (Flaborea et al. 2024; docs/method.md) on Assembly101-O and EPIC-Tent-O.

Pipeline: check the data folder (`data.resolve_data`) and read each dataset (`data.load_dataset`); learn one task
graph per dataset / method / seed from the training split (`methods`, seeds in parallel processes by `run`); score
the GT (*) and PRED (+) test sequences online with the same `graphs.PreconditionChecker` the live pipeline runs
(`scoring`); aggregate mean ± std over seeds and print them beside the published figures (`published`, `report`).
`selection` chooses our methods' settings on the training split only. The result JSON schema is in `run`.
`own_dataset` runs GT mode on a dataset of the user's (one annotation file, test videos cut at their first mistake).
The names below load on first use (`graphs.common.lazy_exports`): the commands' parsers read `DATASETS` without paying
for the whole harness.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from graphs.common.lazy_exports import lazy_exports

if TYPE_CHECKING:
    from tgml.bench.prego.data import (
        DATASETS,
        MODE_MARKS,
        MODES,
        BenchData,
        DataLayout,
        DatasetSpec,
        check_graph_matches,
        load_dataset,
        load_sequence_file,
        mode_has_mistake,
        mode_sequences,
        resolve_data,
    )
    from tgml.bench.prego.methods import UNAVAILABLE, build_graph, load_method_settings
    from tgml.bench.prego.own_dataset import (
        DEFAULT_SETTINGS,
        AnnotationSource,
        first_mistake_cut,
        load_annotation_dataset,
        only_scenario,
        own_method_settings,
    )
    from tgml.bench.prego.published import PUBLISHED, published_best
    from tgml.bench.prego.report import perturbation_tables, plot_perturbation, result_tables, write_results
    from tgml.bench.prego.run import RESULTS_FORMAT, RESULTS_VERSION, BenchConfig, GraphJob, learn_graphs, run_benchmark
    from tgml.bench.prego.scoring import METRIC_KEYS, aggregate, evaluate_graph, flat_metrics
    from tgml.bench.prego.selection import (
        CombinationSearch,
        SelectionConfig,
        combination_cross_validate,
        cross_validate,
        do_cv_search,
        synthetic_mistakes,
    )

__all__ = [
    "CombinationSearch",
    "combination_cross_validate",
    "DATASETS",
    "DEFAULT_SETTINGS",
    "METRIC_KEYS",
    "MODES",
    "MODE_MARKS",
    "PUBLISHED",
    "RESULTS_FORMAT",
    "RESULTS_VERSION",
    "UNAVAILABLE",
    "AnnotationSource",
    "BenchConfig",
    "BenchData",
    "DataLayout",
    "DatasetSpec",
    "GraphJob",
    "SelectionConfig",
    "aggregate",
    "build_graph",
    "check_graph_matches",
    "cross_validate",
    "do_cv_search",
    "evaluate_graph",
    "first_mistake_cut",
    "flat_metrics",
    "learn_graphs",
    "load_annotation_dataset",
    "load_dataset",
    "load_method_settings",
    "load_sequence_file",
    "mode_has_mistake",
    "mode_sequences",
    "only_scenario",
    "own_method_settings",
    "perturbation_tables",
    "plot_perturbation",
    "published_best",
    "resolve_data",
    "result_tables",
    "run_benchmark",
    "synthetic_mistakes",
    "write_results",
]
__getattr__ = lazy_exports(__name__, {
    "tgml.bench.prego.data": (
        "DATASETS", "MODE_MARKS", "MODES", "BenchData", "DataLayout", "DatasetSpec", "check_graph_matches",
        "load_dataset", "load_sequence_file", "mode_has_mistake", "mode_sequences", "resolve_data"
    ),
    "tgml.bench.prego.methods": ("UNAVAILABLE", "build_graph", "load_method_settings"),
    "tgml.bench.prego.own_dataset": (
        "DEFAULT_SETTINGS", "AnnotationSource", "first_mistake_cut", "load_annotation_dataset", "only_scenario",
        "own_method_settings"
    ),
    "tgml.bench.prego.published": ("PUBLISHED", "published_best"),
    "tgml.bench.prego.report": ("perturbation_tables", "plot_perturbation", "result_tables", "write_results"),
    "tgml.bench.prego.run": (
        "RESULTS_FORMAT", "RESULTS_VERSION", "BenchConfig", "GraphJob", "learn_graphs", "run_benchmark"
    ),
    "tgml.bench.prego.scoring": ("METRIC_KEYS", "aggregate", "evaluate_graph", "flat_metrics"),
    "tgml.bench.prego.selection": (
        "CombinationSearch", "SelectionConfig", "combination_cross_validate", "cross_validate", "do_cv_search",
        "synthetic_mistakes"
    ),
})
