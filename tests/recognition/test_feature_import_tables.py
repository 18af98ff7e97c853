"""``recognition-features import`` of an annotation table (`graphs.annotation_csv`), and the lines that name what a
user got wrong between the feature files and the labels: a recording named two ways, times written in frames."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from streaming.offline.features_cli import main as features_main
from tests.cli_errors import cli_error

HEADER = "video,step,start,end"
ROWS = ("run1,unfold,1.5,10", "run1,insert_pole,12,20", "run2,unfold,0,8", "run2,insert_pole,9,15.25")


def write(tmp_path: Path, lines: list[str]) -> Path:
    path = tmp_path / "tent.csv"
    path.write_text("\n".join(lines) + "\n")
    return path


def _recordings(tmp_path: Path, names: tuple[str, ...] = ("run1", "run2", "run3"), rows: int = 30) -> Path:
    folder = tmp_path / "npy"
    folder.mkdir()
    for name in names:
        np.save(folder / f"{name}.npy", np.random.default_rng(0).normal(size=(rows, 4)).astype(np.float32))
    return folder


def test_import_reads_a_table(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    npy = _recordings(tmp_path)
    table = write(tmp_path, [HEADER, *ROWS, "run3,unfold,2,6", "run3,insert_pole,7,12"])
    features_main(["import", "--features", str(npy), "--annotations", str(table), "--rate", "1",
                   "--test-videos", "run3", "--out", str(tmp_path / "out")])
    split = json.loads((tmp_path / "out" / "split.json").read_text())
    assert split["class_names"][1:] == ["insert_pole", "unfold"] and split["test"] == ["run3"]
    targets = np.load(tmp_path / "out" / "target_perframe" / "run1.npy")
    assert targets[1].argmax() == 0 and targets[2].argmax() == 2 and targets[12].argmax() == 1  # 1.5 s: unfold
    capsys.readouterr()


def test_import_names_the_annotated_twin_of_an_unannotated_file(tmp_path: Path,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    npy = _recordings(tmp_path)
    table = write(tmp_path, [HEADER, *ROWS, "run_3,unfold,2,6"])
    line = cli_error(features_main, ["import", "--features", str(npy), "--annotations", str(table), "--rate", "1",
                                     "--out", str(tmp_path / "out")], capsys)
    assert "(run3)" in line and line.endswith("; 'run3' and the annotated 'run_3': one recording named two ways? "
                                              "(the annotated name has no feature file): name them alike")


def test_import_of_times_in_frames_asks_whether_they_are_seconds(tmp_path: Path,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    npy = _recordings(tmp_path, ("run1", "run2"))
    table = write(tmp_path, [HEADER, "run1,unfold,45,300", "run1,insert_pole,360,600", "run2,unfold,0,240"])
    line = cli_error(features_main, ["import", "--features", str(npy), "--annotations", str(table), "--rate", "1",
                                     "--out", str(tmp_path / "out")], capsys)
    assert line.endswith("is that the rate it was written at, or are the annotation's times frame numbers (they "
                         "must be seconds)?")
    # A file merely read at twice its rate is not said to be timed in frames.
    table = write(tmp_path, [HEADER, "run1,unfold,1,40", "run2,unfold,0,20"])
    line = cli_error(features_main, ["import", "--features", str(npy), "--annotations", str(table), "--rate", "1",
                                     "--out", str(tmp_path / "out")], capsys)
    assert line.endswith("is that the rate it was written at?")
