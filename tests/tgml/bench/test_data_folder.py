"""Every benchmark finds the data the same way: ``--data DIR``, else ``$MISTAKE_DATA`` (set once for all of them).

``tgml bench-captaincook`` and ``tgml bench-queries`` used to require ``--data`` while ``prego-bench`` read the
variable, and ``bench-captaincook`` wanted the ``captaincook4d`` folder where ``bench-queries`` wanted its parent.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.cli_errors import cli_error
from tgml.bench.data_folder import DATA_ENV, captaincook_folder, data_folder
from tgml.bench.prego_bench_cli import main as prego_bench
from tgml.tgml_cli import main as tgml

COMMANDS: dict[str, tuple[Callable[[list[str]], object], list[str]]] = {
    "prego-bench": (prego_bench, ["--method", "count-based"]),
    "prego-bench select": (prego_bench, ["select", "--dataset", "epic-tent-o"]),
    "tgml bench-captaincook": (tgml, ["bench-captaincook", "--seeds", "1"]),
    "tgml bench-queries": (tgml, ["bench-queries"]),
    "prego-bench replay": (prego_bench, ["replay", "--no-sweep"]),
}


def test_the_option_wins_over_the_variable(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "from-env").mkdir()
    monkeypatch.setenv(DATA_ENV, str(tmp_path / "from-env"))
    assert data_folder(tmp_path / "given") == tmp_path / "given"
    assert data_folder(None) == tmp_path / "from-env"


@pytest.mark.parametrize("command", COMMANDS)
def test_each_benchmark_reads_the_data_folder_from_the_variable(
    command: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    main, argv = COMMANDS[command]
    monkeypatch.setenv(DATA_ENV, str(tmp_path / "nowhere"))
    # The variable is named: a forgotten export's folder was a mystery ("error: /nope: ... not found").
    assert cli_error(main, argv, capsys) == (f"error: $MISTAKE_DATA {tmp_path / 'nowhere'}: no such folder; set it "
                                             "to the data folder (like shared/data), or give --data DIR")


@pytest.mark.parametrize("command", COMMANDS)
def test_a_variable_naming_a_file_is_said_to_name_a_file(
    command: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # "no such folder" of a path that is there (a file: the data archive, a settings file) sent the user looking
    # for a typo in a path that was right.
    main, argv = COMMANDS[command]
    archive = tmp_path / "data.tar"
    archive.write_text("")
    monkeypatch.setenv(DATA_ENV, str(archive))
    assert cli_error(main, argv, capsys) == (f"error: $MISTAKE_DATA {archive}: a file, expected a folder; set it "
                                             "to the data folder (like shared/data), or give --data DIR")


@pytest.mark.parametrize("command", COMMANDS)
def test_without_option_or_variable_the_error_says_both_ways(
    command: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    main, argv = COMMANDS[command]
    monkeypatch.delenv(DATA_ENV, raising=False)
    assert "no data folder: give --data DIR or set $MISTAKE_DATA" in cli_error(main, argv, capsys)


def test_captaincook_folder_is_found_inside_the_data_folder(tmp_path: Path) -> None:
    (tmp_path / "captaincook4d").mkdir()
    assert captaincook_folder(tmp_path) == tmp_path / "captaincook4d"
    assert captaincook_folder(tmp_path / "captaincook4d") == tmp_path / "captaincook4d"


def test_bench_captaincook_takes_the_data_folder_or_its_captaincook4d_folder(
    data_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(DATA_ENV, raising=False)
    argv = ["bench-captaincook", "--procedures", "ramen", "--seeds", "1", "--workers", "1", "--quiet"]
    runs = {"parent": ["--data", str(data_dir)], "captaincook4d": ["--data", str(data_dir / "captaincook4d")]}
    results = {}
    for name, data in runs.items():
        assert tgml([*argv, *data, "--json", str(tmp_path / f"{name}.json")]) == 0
        results[name] = json.loads((tmp_path / f"{name}.json").read_text())["methods"]["do"]["runs"]
    assert results["parent"] == results["captaincook4d"]
    assert results["parent"][0]["scenario"] == "ramen"
    monkeypatch.setenv(DATA_ENV, str(data_dir))
    assert tgml([*argv, "--json", str(tmp_path / "env.json")]) == 0
    assert json.loads((tmp_path / "env.json").read_text())["methods"]["do"]["runs"] == results["parent"]


def test_another_dataset_folder_is_named_as_the_wrong_folder(
    data_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # The folder of another dataset is a wrong --data, not a missing file to rebuild: each command says so.
    tent = data_dir / "epic-tent-o"
    line = cli_error(tgml, ["bench-captaincook", "--data", str(tent), "--quiet"], capsys)
    assert line == (f"error: {tent}: not a CaptainCook4D folder (no task_graph_generation_annotations.json): give the "
                    "data folder holding captaincook4d/, or that folder")
    cook = data_dir / "captaincook4d"
    line = cli_error(prego_bench, ["--data", str(cook)], capsys)
    assert line.startswith(f"error: data folder {cook} holds none of assembly101-o/, epic-tent-o/")


def test_bench_live_takes_the_captaincook4d_folder_and_finds_the_features_beside_it(
    data_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # bench-live took captaincook4d/ as --data, as the other benchmarks do, then looked for the features inside it
    # and stopped on "--features .../captaincook4d/captaincook4d-pe/features: folder not found", an option never given.
    runs = {}
    # One cache for both runs: its entries are keyed by the features' content, so the second run trains nothing
    # (half the test's time) exactly when it read the same features files as the first.
    cache = tmp_path / "cache"
    entries: list[Path] = []
    for name, data in {"parent": data_dir, "captaincook4d": data_dir / "captaincook4d"}.items():
        out = tmp_path / f"{name}.json"
        argv = ["bench-live", "--data", str(data), "--recipes", "pinwheels", "--folds", "2", "--epochs", "1",
                "--workers", "1", "--quiet", "--json", str(out), "--cache", str(cache)]
        assert exit_status(tgml, argv) == 0, capsys.readouterr().err
        runs[name] = {r["recording_id"]: r["recognised"] for r in json.loads(out.read_text())["recordings"]}
        if name == "parent":
            entries = sorted(cache.iterdir())
    assert runs["parent"] == runs["captaincook4d"] and len(runs["parent"]) == 12
    assert len(entries) == 2 and sorted(cache.iterdir()) == entries  # one per fold, none added by the second run
    # A data folder without the data set's features names --data, and the option that gives features of one's own.
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "captaincook4d").symlink_to(data_dir / "captaincook4d")
    for data in (tmp_path / "mine", tmp_path / "mine" / "captaincook4d"):
        line = cli_error(tgml, ["bench-live", "--data", str(data), "--quiet"], capsys)
        assert line == (f"error: --data {data}: no captaincook4d-pe/features beside captaincook4d/, the data set's "
                        "features; give a folder of <recording_id>.npy files with --features")


def exit_status(main: Callable[[list[str]], object], argv: list[str]) -> object:
    """``main(argv)``'s exit status, whether it returns it or ends with ``SystemExit``."""
    try:
        return main(argv)
    except SystemExit as ended:
        return ended.code


def test_a_link_loop_for_the_captaincook_annotations_is_named_as_such(
    data_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # It was "not a CaptainCook4D folder (no task_graph_generation_annotations.json)": a wrong --data, where the
    # folder was right and its file a link loop.
    cook = tmp_path / "captaincook4d"
    cook.mkdir()
    for source in (data_dir / "captaincook4d").iterdir():
        (cook / source.name).symlink_to(source)
    annotations = cook / "task_graph_generation_annotations.json"
    annotations.unlink()
    annotations.symlink_to(annotations.name)
    line = cli_error(tgml, ["bench-captaincook", "--data", str(cook), "--procedures", "ramen", "--quiet"], capsys)
    assert line == f"error: {annotations}: cannot read the annotation file (Too many levels of symbolic links)"
