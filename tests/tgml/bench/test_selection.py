"""Choosing settings on the training split only (``prego-bench select``): validation items, the cross-validation
search of ``do-cv`` and ``do-ensemble``, and the command."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from graphs import InputError
from tests.cli_errors import cli_error
from tgml.bench import prego
from tgml.bench import prego_bench_cli as bench_cli
from tgml.bench.prego.selection import SelectionConfig, cross_validate, synthetic_slips


def test_synthetic_validation_items_end_with_a_step_done_too_early() -> None:
    items = prego.synthetic_mistakes([[5, 6, 6, 7, 8, 9]], per_video=20, seed=0)
    assert len(items) == 20
    for item in items:
        order = [5, 6, 7, 8, 9]
        prefix, last = item[:-1], item[-1]
        assert list(prefix) == order[: len(prefix)]  # a correct prefix
        assert order.index(last) > len(prefix)  # skips at least the true next step


def test_cross_validation_ranks_candidates_on_training_data(epic: prego.BenchData) -> None:
    settings = prego.load_method_settings("epic-tent-o")["do"]
    search = prego.do_cv_search(folds=2, epochs=(20,), scales=(0.5, 1.0), workers=1)
    rows = prego.cross_validate(epic, settings, search, progress=False)
    assert [r["score"] for r in rows] == sorted((r["score"] for r in rows), reverse=True)
    assert {r["threshold_scale"] for r in rows} == {0.5, 1.0}
    # Each row holds its own candidate's score: searched alone, a candidate scores what its row says.
    for scale in (0.5, 1.0):
        alone = prego.cross_validate(epic, settings, prego.do_cv_search(2, (20,), (scale,), workers=1), progress=False)
        assert next(r for r in rows if r["threshold_scale"] == scale)["score"] == alone[0]["score"]
    assert rows[0]["score"] > rows[1]["score"]  # the two cuts do differ on these folds: the ranking means something
    with pytest.raises(InputError, match="--folds 99"):
        prego.cross_validate(epic, settings, prego.do_cv_search(99, (20,), (1.0,), workers=1), progress=False)


def test_slip_items_end_with_an_order_mistake_or_a_step_not_done_yet() -> None:
    order = [5, 6, 7, 8, 9]
    taxonomy = list(range(20))
    items = synthetic_slips([[5, 6, 6, 7, 8, 9]], taxonomy, per_video=200, seed=0, slip_rate=0.5)
    assert len(items) == 200
    early = 0
    for item in items:
        prefix, last = list(item[:-1]), item[-1]
        assert prefix == order[: len(prefix)] and last not in prefix
        early += last in order and order.index(last) > len(prefix)
    assert 80 < early < 160  # both kinds occur (slips can also land on a later step of the video)
    only_order = synthetic_slips([order], taxonomy, per_video=50, seed=1, slip_rate=0.0)
    assert all(item[-1] in order[len(item) :] for item in only_order)
    with pytest.raises(InputError, match="slip rate"):
        synthetic_slips([order], taxonomy, 1, 0, slip_rate=2.0)


def test_selection_reads_training_videos_only(epic: prego.BenchData) -> None:
    # Without test or recognised sequences the search runs the same: it cannot have used them.
    train_only = prego.BenchData(epic.name, epic.scenario, epic.step_ids, epic.step_names, epic.train, {})
    config = SelectionConfig(folds=3, epochs=(15,), scales=(1.0, 2.0), sizes=(1, 2), workers=1)
    settings = prego.load_method_settings("epic-tent-o")["do"]
    rows = cross_validate(train_only, replace_epochs(settings, 30), config, progress=False)
    assert len(rows) == 2 * 2 * 2  # (15 epochs, SA early stopping) x sizes x scales
    assert [r["score"] for r in rows] == sorted((r["score"] for r in rows), reverse=True)
    assert {r["early_stop"] for r in rows} == {"none", "sa-threshold:0.97"}
    assert all(0 <= r["clean"] <= 100 and r["score"] == (r["clean"] + r["noisy"]) / 2 for r in rows)
    with pytest.raises(InputError, match="--folds 99"):
        cross_validate(train_only, settings, replace(config, folds=99), progress=False)
    with pytest.raises(InputError, match="SelectionConfig.sizes"):
        SelectionConfig(sizes=(0,))


def replace_epochs(settings: dict, epochs: int) -> dict:
    return {**settings, "epochs": epochs}


def test_select_command_prints_the_best_ensemble(data_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["select", "--data", str(data_dir), "--dataset", "epic-tent-o", "--method", "do-ensemble", "--folds", "2"]
    argv += ["--epochs", "10", "--scales", "1", "--sizes", "2", "--no-early-stop", "--workers", "1", "--quiet"]
    assert bench_cli.main(argv) == 0
    out = capsys.readouterr().out
    assert "best: epochs = 10, early_stop = none, size = 2, threshold_scale = 1" in out
    bad = list(argv)
    bad[bad.index("--sizes") + 1] = "two"
    err = cli_error(bench_cli.main, bad, capsys)
    assert err.startswith("error: --sizes 'two': expected comma-separated numbers")


def test_combination_search_scores_do_ensemble_alone_as_its_own_search_does(epic: prego.BenchData) -> None:
    settings = prego.load_method_settings("epic-tent-o")["noisy-and-do"]
    settings = {**settings, "noisy-and": {**settings["noisy-and"], "epochs": 30},
                "do-ensemble": {**settings["do-ensemble"], "epochs": 20, "ensemble_size": 2}}
    folds = SelectionConfig(folds=2, workers=1)
    rows = prego.combination_cross_validate(
        epic, settings, prego.CombinationSearch(("either", "both"), (1.0, 2.0), folds), progress=False
    )
    assert [r["score"] for r in rows] == sorted((r["score"] for r in rows), reverse=True)
    assert {r["rule"] for r in rows} == {"either", "both", "noisy-and", "do-ensemble"} and len(rows) == 6
    do_table = {k: v for k, v in settings["do-ensemble"].items() if k not in ("ensemble_size", "threshold_scale")}
    alone = cross_validate(epic, do_table, replace(folds, epochs=(20,), early_stop=False, sizes=(2,),
                                                   scales=(settings["do-ensemble"]["threshold_scale"],)),
                           progress=False)
    assert next(r for r in rows if r["rule"] == "do-ensemble")["score"] == alone[0]["score"]
