"""Which labelled executions ``tgml train`` learns from.

The walkthrough's shelf procedure (`tests.procedure_videos`): 11 valid executions and ``video_11``, which attaches the
legs before unboxing the parts and is marked ``has_errors`` there. Learning from it would teach the graph that
``attach_legs`` may follow START, the very pre-condition the mistake breaks.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from graphs.annotations import TrainingVideos, load_annotations
from graphs.task_graph import START, Node, load_graph
from tests.cli_errors import cli_error
from tests.procedure_videos import MISTAKE_STEP, PRECONDITIONS, SCENARIO, annotation_file, walkthrough_orders
from tgml.tgml_cli import main as tgml


@pytest.fixture
def labels(tmp_path: Path) -> Path:
    """The walkthrough's annotation file (segments one second apart: the learners read the order only)."""
    executions = {name: [(s, float(k), k + 1.0) for k, s in enumerate(order)]
                  for name, order in walkthrough_orders().items()}  # fmt: skip
    path = tmp_path / "labels.json"
    path.write_text(json.dumps(annotation_file(executions)))
    return path


def _train(labels: Path, out: Path, *flags: str) -> list[Node]:
    assert tgml(["train", "--annotations", str(labels), "--scenario", SCENARIO, "--out", str(out), "--quiet",
                 *flags]) == 0  # fmt: skip
    return sorted(load_graph(out).preconditions(MISTAKE_STEP), key=str)


@pytest.mark.parametrize("method", ["noisy-and", "do"])
def test_train_leaves_out_the_mistaken_execution_and_keeps_the_precondition_it_breaks(
    labels: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], method: str
) -> None:
    out = tmp_path / "shelf.json"
    assert _train(labels, out, "--method", method) == list(PRECONDITIONS[MISTAKE_STEP])
    err = capsys.readouterr().err.strip()
    assert err == ("tgml train: left out 1 execution with an annotated mistake (video_11); "
                   "--include-mistakes keeps them")  # fmt: skip
    graph = load_graph(out)
    assert graph.info["left_out"] == {"mistakes": ["video_11"], "excluded": []}
    assert graph.info["train_sequences"] == 11
    assert tgml(["show", str(out)]) == 0
    assert "left out 1 execution with an annotated mistake (video_11)" in " ".join(capsys.readouterr().out.split())


def test_include_mistakes_learns_the_mistake_as_allowed(
    labels: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "shelf.json"
    assert _train(labels, out, "--include-mistakes") == [START]  # what the walkthrough's user got before
    assert capsys.readouterr().err == ""
    assert "left_out" not in load_graph(out).info and load_graph(out).info["train_sequences"] == 12


def test_exclude_videos_holds_executions_out(labels: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "shelf.json"
    _train(labels, out, "--exclude-videos", "video_10, video_03")  # a space after the comma, as other commands take
    assert load_graph(out).info["left_out"] == {"mistakes": ["video_11"], "excluded": ["video_03", "video_10"]}
    assert load_graph(out).info["train_sequences"] == 9
    assert "2 executions named by --exclude-videos (video_03, video_10)" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        # The names to keep are said: a features folder's test recordings may be only partly in the graph's file.
        (["--exclude-videos", "video_10,video_99,run1"],
         "--exclude-videos: video_99, run1 not an execution of 'shelf' in {labels} (of the names given, video_10 is "
         "one: give only those)"),
        (["--exclude-videos", "video_99"],
         "--exclude-videos: video_99 not an execution of 'shelf' in {labels} (none of the names given is, so the "
         "graph cannot hold them: leave --exclude-videos out, unless a name is mistyped; its executions: video_00, "
         "video_01, video_02, video_03, video_04 and 7 more)"),
        (["--exclude-videos", "video_10,video_10"], "--exclude-videos: video_10 named twice"),
        (["--exclude-videos", ",".join(f"video_{k:02d}" for k in range(11))],
         "no usable sequence (1 with an annotated mistake left out (--include-mistakes keeps them); "
         "11 excluded by --exclude-videos)"),
    ],
)  # fmt: skip
def test_bad_or_emptying_selections_are_one_line_errors_before_training(
    labels: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], flags: list[str], message: str
) -> None:
    out = tmp_path / "shelf.json"
    argv = ["train", "--annotations", str(labels), "--scenario", SCENARIO, "--out", str(out), "--quiet", *flags]
    assert message.format(labels=labels) in cli_error(tgml, argv, capsys)
    assert not out.exists()


def test_the_library_keeps_every_execution_unless_asked(data_dir: Path) -> None:
    # The PREGO EPIC-Tent-O training split holds 3 executions with a has_errors segment; the paper learned from all 13.
    tent = load_annotations(data_dir / "epic-tent-o" / "train.json", check_times=False)
    assert len(tent.training_data("epic-tent")[2]) == 13
    chosen = tent.training_selection("epic-tent", TrainingVideos())
    assert len(chosen.sequences) == 10 and len(chosen.mistakes) == 3 and chosen.excluded == ()


def test_an_out_naming_another_kind_of_file_is_refused_and_a_graph_is_replaced(
    labels: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # --out labels2.json replaced a label file with a graph without a word.
    other = tmp_path / "labels2.json"
    other.write_text(labels.read_text())
    argv = ["train", "--annotations", str(labels), "--scenario", SCENARIO, "--out", str(other), "--quiet"]
    assert cli_error(tgml, argv, capsys) == (
        f"error: --out {other}: exists and is not a task graph file (a label file, a checkpoint?); a run replaces "
        "only a graph: choose another name, or remove the file first")
    assert other.read_text() == labels.read_text()
    out = tmp_path / "shelf.json"
    _train(labels, out)
    _train(labels, out)  # a graph learned again replaces the one before
    # Re-saved with its keys sorted (jq -S): "edges" comes before "format", here more than the 4 KiB first read.
    out.write_text(json.dumps(json.loads(out.read_text()), sort_keys=True, indent=400))
    assert out.read_text().index('"format"') > 4096
    _train(labels, out)


def test_the_left_out_line_with_stderr_closed_stays_out_of_standard_output(labels: Path, tmp_path: Path) -> None:
    # With `2>&-` Python has no sys.stderr, and print(file=None) wrote "tgml train: left out ..." on standard output.
    out = tmp_path / "shelf.json"
    command = [sys.executable, "-m", "tgml.tgml_cli", "train", "--annotations", str(labels), "--scenario", SCENARIO,
               "--out", str(out), "--quiet"]
    done = subprocess.run(["sh", "-c", 'exec "$@" 2>&-', "sh", *command], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and "left out" not in done.stdout
    assert load_graph(out).info["left_out"] == {"mistakes": ["video_11"], "excluded": []}
