"""Synthetic procedures: the random DAGs and executions, the scores, a short run and the command."""

from __future__ import annotations

import json
from pathlib import Path

import networkx as nx
import numpy as np
import pytest

from graphs.common.errors import InputError
from tests.cli_errors import cli_error
from tgml.bench.synthetic_procedures import (
    SyntheticConfig,
    canonical_graph,
    make_cases,
    multi_precondition_recall,
    perturb_execution,
    random_procedure,
    run_synthetic,
    sample_execution,
    summary_table,
    synthetic_table,
)
from tgml.tgml_cli import main


def test_random_procedures_are_canonical_dags_with_multi_precondition_steps() -> None:
    rng = np.random.default_rng(0)
    graphs = [random_procedure(20, "dense", rng) for _ in range(5)]
    for adj in graphs:
        assert adj.shape == (22, 22)
        assert nx.is_directed_acyclic_graph(nx.DiGraph(np.argwhere(adj).tolist()))
        assert np.array_equal(canonical_graph(adj[1:-1, 1:-1]), adj)  # already reduced, START/END attached
        assert adj[1:-1].any(axis=1).all()  # every step has a pre-condition (START at least)
    in_degree = np.concatenate([adj[1:-1, 1:-1].sum(axis=1) for adj in graphs])
    assert (in_degree >= 2).mean() > 0.2 and in_degree.max() >= 3
    sparse = np.concatenate([random_procedure(20, "sparse", rng)[1:-1, 1:-1].sum(axis=1) for _ in range(5)])
    assert sparse.mean() < in_degree.mean()
    with pytest.raises(InputError, match="density 'thick'"):
        random_procedure(5, "thick", rng)


def test_executions_respect_every_precondition_and_noise_breaks_them() -> None:
    rng = np.random.default_rng(1)
    adj = random_procedure(12, "dense", rng)
    requires = adj[1:-1, 1:-1]
    for _ in range(50):
        order = sample_execution(adj, rng)
        assert sorted(order) == list(range(12))
        position = {s: k for k, s in enumerate(order)}
        assert all(position[j] < position[i] for i, j in np.argwhere(requires))
    perturbed = [perturb_execution(list(range(6)), rng) for _ in range(40)]
    assert any(len(p) == 7 for p in perturbed) and any(len(p) == 6 and p != list(range(6)) for p in perturbed)


def test_cases_share_graphs_across_execution_counts_and_noise() -> None:
    config = SyntheticConfig(sizes=(6,), executions=(5, 10), noise=(0.0, 0.5), densities=("medium",), seeds=1)
    cases = make_cases(config)
    assert [(c.noise, c.executions) for c in cases] == [(0.0, 5), (0.0, 10), (0.5, 5), (0.5, 10)]
    assert all(np.array_equal(c.truth, cases[0].truth) for c in cases)
    assert cases[1].sequences[:5] == cases[0].sequences  # more executions = the same ones plus new ones
    assert cases[3].sequences != cases[1].sequences  # noise perturbs some of them
    assert make_cases(config)[3].sequences == cases[3].sequences  # seeded: the same cases every run


def test_multi_precondition_recall_counts_edges_into_steps_with_several_preconditions() -> None:
    gt = np.zeros((5, 5), dtype=bool)
    gt[3, 1] = gt[3, 2] = gt[1, 0] = gt[2, 0] = gt[4, 3] = True
    pred = gt.copy()
    pred[3, 2] = False
    assert multi_precondition_recall(pred, gt) == (1, 2)


def test_short_run_scores_the_learners_and_noisy_and_recovers_and_preconditions() -> None:
    config = SyntheticConfig(sizes=(8,), executions=(40,), noise=(0.0,), densities=("dense",), seeds=2,
                             learners=("noisy-and",), workers=1)
    result = run_synthetic(config)
    cell = result.cell("noisy-and", 8, 40, 0.0)
    assert cell["graphs"] == 2 and cell["f1"] >= 90 and cell["multi_recall"] >= 90
    content = result.to_dict()
    assert content["table"][0]["f1"] == pytest.approx(cell["f1"])
    assert len(content["runs"]) == 2 and content["sampler"] == "uniform among ready steps"
    assert synthetic_table(result).row_count == 1 and summary_table(result).row_count == 1


def test_config_and_learner_names_are_checked() -> None:
    with pytest.raises(InputError, match=r"SyntheticConfig.sizes = \[1\]"):
        SyntheticConfig(sizes=(1,))
    with pytest.raises(InputError, match="SyntheticConfig.noise"):
        SyntheticConfig(noise=(1.5,))
    with pytest.raises(InputError, match="learner 'tgt': not one of"):
        run_synthetic(SyntheticConfig(sizes=(4,), executions=(2,), seeds=1, learners=("tgt",), workers=1))


def test_bench_synthetic_command_prints_the_table_and_writes_json(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "syn.json"
    assert main(["bench-synthetic", "--sizes", "5", "--executions", "10", "--noise", "0", "--seeds", "1",
                 "--learners", "do,noisy-and", "--workers", "1", "--json", str(out), "--quiet"]) == 0
    printed = capsys.readouterr().out
    assert "Synthetic procedures" in printed and "noisy-and" in printed and f"wrote {out}" in printed
    content = json.loads(out.read_text())
    assert {row["learner"] for row in content["table"]} == {"do", "noisy-and"}
    assert len(content["runs"]) == 2 * 3  # two learners x three densities


@pytest.mark.parametrize(
    ("flags", "fragment"),
    [(["--sizes", "5,x"], "--sizes '5,x'"), (["--learners", "tgt"], "learner 'tgt': not one of"),
     (["--noise", "0.1,2"], "--noise 0.1,2.0: need rates in [0, 1]"),  # the option typed, not the settings field
     (["--seeds", "0"], "--seeds 0: need at least 1")],
)
def test_bench_synthetic_refuses_bad_options(flags: list[str], fragment: str,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    assert fragment in cli_error(main, ["bench-synthetic", "--workers", "1", "--quiet", *flags], capsys)
