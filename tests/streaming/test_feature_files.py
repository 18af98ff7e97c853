"""Feature files as a source: recordings' own features, imported, trained on and replayed one vector at a time through
the detector, the online segmenter and the checker by ``stream-detect eval --features``, as a camera's frames are; and
what is refused there, with one line naming the file or the option."""

from __future__ import annotations

import csv
import json
import os
import pty
import re
import shutil
import sys
import threading
import unicodedata
from pathlib import Path

import numpy as np
import pytest
import torch
import zmq

from graphs.annotations import load_annotations
from graphs.common.errors import InputError
from graphs.task_graph import load_graph
from recognition.checkpoint import DetectorCheckpoint, load_detector, save_detector
from recognition.model import largest_by_row, scale_mismatch
from recognition.recognition_train_cli import main as train_main
from streaming.checker.config import CheckerConfig
from streaming.checker.service import CheckerService
from streaming.detector.loading import detector_for_graph, file_stream_ids
from streaming.extractors import EXTRACTOR_NAMES
from streaming.feature_files import FeatureFileReader, PrecomputedExtractor, annotated_feature_files, is_feature_file
from streaming.offline.features_cli import main as features_main
from streaming.readers import ReaderConfig
from streaming.stream_detect_cli import main as stream_detect
from streaming.view.client import Viewer
from streaming.view.state import ViewState
from tests.cli_errors import cli_error
from tests.command_lines import with_options
from tests.streaming.helpers import drain_terminal, running_checker, wait_for
from tgml.tgml_cli import main as tgml_main

STEPS = ("open_box", "take_part", "fix_part")
WIDTH = 6
TINY = """
[features]
rgb = "rgb_imported"
extractor = "imported"
[model]
embed_dim = 32
hidden_dim = 32
motion_lag_s = 0.0
[train]
window_s = 30.0
batch_size = 4
lr = 0.003
epochs = 40
seed = 1
threads = 1
val_fraction = 0.25
"""


def recording(order: tuple[int, ...], rng: np.random.Generator, step_s: int = 12, gap_s: int = 3
              ) -> tuple[np.ndarray, list[tuple[int, float, float]]]:
    """Features at one vector a second of the steps in ``order`` (each ``step_s`` long after a ``gap_s`` pause): each
    step's vectors sit around its own point, the pauses around the origin."""
    rows: list[np.ndarray] = []
    segments = []
    t = 0
    for step in order:
        rows.append(rng.normal(0, 0.3, size=(gap_s, WIDTH)))
        t += gap_s
        rows.append(np.eye(len(STEPS), WIDTH)[step] * 3 + rng.normal(0, 0.3, size=(step_s, WIDTH)))
        segments.append((step, float(t), float(t + step_s)))
        t += step_s
    rows.append(rng.normal(0, 0.3, size=(gap_s, WIDTH)))
    return np.concatenate(rows).astype(np.float16), segments


def write_procedure(root: Path) -> Path:
    """Eight correct recordings to train on, a correct and a wrong one (``take_part`` before ``open_box``) to test."""
    rng = np.random.default_rng(3)
    (root / "npy").mkdir(parents=True)
    annotations = {}
    orders = {f"rec{v}": (0, 1, 2) for v in range(8)} | {"test_ok": (0, 1, 2), "test_wrong": (1, 0, 2)}
    for name, order in orders.items():
        features, segments = recording(order, rng)
        np.save(root / "npy" / f"{name}.npy", features)
        annotations[name] = {"scenario": "kit", "recording_id": name, "segments": [
            {"step_id": s, "start_time": a, "end_time": b, "description": "", "step_name": STEPS[s],
             "has_errors": name == "test_wrong" and s == 1} for s, a, b in segments]}
    taxonomy = {"kit": {str(k): {"id": k, "name": n} for k, n in enumerate(STEPS)}}
    (root / "labels.json").write_text(json.dumps({"taxonomy": taxonomy, "annotations": annotations}))
    return root


@pytest.fixture(scope="module")
def trained(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Imported at one vector a second, a detector trained on them, a graph learned from the correct recordings."""
    root = write_procedure(tmp_path_factory.mktemp("byof"))
    assert features_main(["import", "--features", str(root / "npy"), "--annotations", str(root / "labels.json"),
                          "--rate", "1", "--out", str(root / "folder"), "--test-videos", "test_ok,test_wrong"]) == 0
    (root / "tiny.toml").write_text(TINY)
    assert train_main(["--features", str(root / "folder"), "--config", str(root / "tiny.toml"),
                       "--out", str(root / "detector.pt"), "--quiet"]) == 0
    assert tgml_main(["train", "--annotations", str(root / "labels.json"), "--scenario", "kit",
                      "--out", str(root / "graph.json")]) == 0
    return root


def eval_argv(root: Path, *extra: str) -> list[str]:
    """An eval command line over ``root``'s recordings; an option in ``extra`` replaces the one set here (an option
    given twice is refused)."""
    defaults = {"--features": str(root / "npy"), "--annotations": str(root / "labels.json"),
                "--graph": str(root / "graph.json"), "--detector": str(root / "detector.pt")}
    return ["eval", *with_options(defaults, "--quiet", "--no-cache", *extra)]


def test_eval_replays_feature_files_through_the_live_chain_and_catches_the_mistake(trained: Path) -> None:
    out = trained / "eval.json"
    assert stream_detect(eval_argv(trained, "--split", str(trained / "folder" / "split.json"), "--rate", "1",
                                   "--alert-on", "end", "--checker", "binary", "--json", str(out))) == 0
    videos = {v["video"]: v for v in json.loads(out.read_text())["videos"]}
    assert set(videos) == {"test_ok", "test_wrong"}
    # Every step recognised, one vector a second, in the recorded order.
    assert [s["step"] for s in videos["test_wrong"]["recognised"]] == [1, 0, 2]
    wrong = [a for a in videos["test_wrong"]["alerts"] if not a["retracted"]]
    assert [a["step"] for a in wrong] == [1]  # take_part, done before open_box, its pre-condition
    assert not [a for a in videos["test_ok"]["alerts"] if not a["retracted"]]


def on_terminal(argv: list[str], columns: int, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """What ``stream-detect argv`` prints on a terminal (a pseudo-terminal) of ``columns``, its lines without styles."""
    master, slave = pty.openpty()
    reader, received = drain_terminal(master)
    with monkeypatch.context() as patch, open(slave, "w", encoding="utf-8") as terminal:
        patch.setenv("COLUMNS", str(columns))
        patch.setattr(sys, "stdout", terminal)
        assert stream_detect(argv) == 0
        terminal.flush()
    reader.join(timeout=30)
    os.close(master)
    text = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", bytes(received).decode("utf-8"))
    return text.replace("\r\n", "\n").splitlines()


def test_eval_results_table_fits_the_terminal_it_is_printed_on(trained: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # It was printed 160 wide whatever the terminal: at 80 columns every row broke mid-number into the next line.
    lines = on_terminal(eval_argv(trained, "--split", str(trained / "folder" / "split.json")), 80, monkeypatch)
    assert max(len(line) for line in lines) <= 80
    # Every figure whole, beside its name: the wrong recording's mistake caught, its steps recognised.
    entries: list[str] = []
    for line in lines:
        if line.startswith(" ") and entries:  # an entry goes on indented
            entries[-1] += " " + line.strip()
        else:
            entries.append(line)
    wrong = next(entry for entry in entries if entry.startswith("test_wrong"))
    assert wrong.startswith("test_wrong: 1 alert, 0 retracted; P 100.0, R 100.0, F1 100.0; P err 100.0, R err 100.0,"
                            " F1 err 100.0;")  # the table's names, which the notes below use too
    assert "key-steps F1@10 100.0, F1@25 100.0, F1@50 100.0, edit 100.0;" in wrong and "…" not in "\n".join(lines)
    # Under them, what the names mean: the two sets of P / R / F1 were told apart only in docs/evaluation.md.
    legend = next(entry for entry in entries if entry.startswith("P, R, F1: precision, recall, F1 (%)"))
    assert "P err, R err, F1 err: the same against the annotation's own mistake labels (has_errors)" in legend
    # The lines under it wrap between words too: the terminal broke them anywhere ("not mea" / "sured").
    narrow = on_terminal(eval_argv(trained, "--videos-list", "test_ok"), 40, monkeypatch)
    notes = " ".join(line.strip() for line in narrow[narrow.index(next(n for n in narrow if n.startswith("no "))):])
    assert "R and F1 not measured" in notes and max(len(line) for line in narrow) <= 40


def test_a_feature_folder_given_as_the_split_names_its_split_file(trained: Path,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    # "--split features/: is a folder, expected a split file": the folder import wrote holds the file meant.
    folder = trained / "folder"
    line = cli_error(stream_detect, eval_argv(trained, "--split", str(folder)), capsys)
    assert line == f"error: --split {folder}: is a folder, expected a split file (its {folder / 'split.json'}?)"


def with_a_tent_recording(root: Path, recording: str, name: str) -> Path:
    """``root/name``: ``root``'s labels plus ``recording``, annotated under another scenario (``tent``)."""
    raw = json.loads((root / "labels.json").read_text())
    raw["taxonomy"]["tent"] = {"0": {"id": 0, "name": "unfold"}}
    raw["annotations"][recording] = {"scenario": "tent", "recording_id": recording, "segments": [
        {"step_id": 0, "start_time": 0.0, "end_time": 2.0, "description": "", "step_name": "unfold",
         "has_errors": False}]}
    path = root / name
    path.write_text(json.dumps(raw))
    return path


def test_a_listed_recording_of_another_scenario_is_said_to_be_one(trained: Path,
                                                                   capsys: pytest.CaptureFixture[str]) -> None:
    # It was "not annotated in labels.json", though the file annotates it (under another recipe).
    both = with_a_tent_recording(trained, "tent_rec", "two-scenarios.json")
    line = cli_error(stream_detect, eval_argv(trained, "--annotations", str(both), "--videos-list", "tent_rec"), capsys)
    assert line == f"error: --videos-list: tent_rec not a recording of scenario 'kit' (the graph's) in {both}"
    line = cli_error(stream_detect, eval_argv(trained, "--annotations", str(both), "--videos-list", "nowhere"), capsys)
    assert line == f"error: --videos-list: nowhere not annotated in {both} (scenario kit)"


def test_a_misspelt_recording_of_videos_list_is_refused_with_the_one_meant(trained: Path,
                                                                          capsys: pytest.CaptureFixture[str]) -> None:
    # "not annotated in labels.json" alone: the recording meant was to be found in the file.
    labels = trained / "labels.json"
    line = cli_error(stream_detect, eval_argv(trained, "--videos-list", "test_wrng"), capsys)
    assert line == (f"error: --videos-list: test_wrng not annotated in {labels} (scenario kit); "
                    "did you mean 'test_wrong'?")


def test_videos_list_hints_no_recording_spelt_right_nor_one_listed_already(
        trained: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # "did you mean 'test_ok'?" was said of test_ok2, a recording the file annotates under another recipe, and of a
    # typo beside test_ok itself in the list (taking it would list test_ok twice).
    both = with_a_tent_recording(trained, "test_ok2", "two-scenarios-hint.json")
    line = cli_error(stream_detect, eval_argv(trained, "--annotations", str(both), "--videos-list", "test_ok2"), capsys)
    assert line == f"error: --videos-list: test_ok2 not a recording of scenario 'kit' (the graph's) in {both}"
    line = cli_error(stream_detect, eval_argv(trained, "--videos-list", "test_ok,test_okk"), capsys)
    assert "test_okk not annotated" in line and "did you mean 'test_ok'?" not in line


def test_a_listed_recording_with_a_feature_file_but_no_annotation_hints_no_neighbour(
        trained: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # Spelt as its file, rec1 lacks an annotation: "did you mean 'rec0'?" sent the user to another recording.
    raw = json.loads((trained / "labels.json").read_text())
    del raw["annotations"]["rec1"]
    labels = trained / "without-rec1.json"
    labels.write_text(json.dumps(raw))
    line = cli_error(stream_detect, eval_argv(trained, "--annotations", str(labels), "--videos-list", "rec1"), capsys)
    assert line == f"error: --videos-list: rec1 not annotated in {labels} (scenario kit)"
    line = cli_error(stream_detect, eval_argv(trained, "--annotations", str(labels), "--videos-list", "rec01"), capsys)
    assert line.endswith("; did you mean 'rec0'?")  # no file of that name: a typo, perhaps


def test_two_feature_sources_of_one_stream_id_are_named_as_features(trained: Path,
                                                                    capsys: pytest.CaptureFixture[str]) -> None:
    # The message named them "--video", an option the user had not given.
    ok, wrong = str(trained / "npy" / "test_ok.npy"), str(trained / "npy" / "test_wrong.npy")
    line = cli_error(stream_detect, ["detector", "--features", ok, "--features", wrong, "--stream-id", "a",
                                     "--stream-id", "a", "--detector", str(trained / "detector.pt"), "--graph",
                                     str(trained / "graph.json")], capsys)
    assert line == (f"error: --stream-id a is given to two sources (--features {ok} and --features {wrong}): each "
                    "stream needs its own id")


def test_a_results_file_that_would_overwrite_a_feature_file_is_refused_before_the_run(
        trained: Path, capsys: pytest.CaptureFixture[str]) -> None:
    target = trained / "npy" / "test_ok.npy"
    before = target.read_bytes()
    err = cli_error(stream_detect, eval_argv(trained, "--json", str(target)), capsys)
    assert "--json" in err and "test_ok.npy: the results file would overwrite this input file" in err
    assert target.read_bytes() == before


def test_a_feature_file_with_nan_is_refused_naming_it(trained: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = trained / "bad"
    bad.mkdir()
    features = np.load(trained / "npy" / "test_ok.npy")
    features[4, 0] = np.nan
    np.save(bad / "test_ok.npy", features)
    err = cli_error(stream_detect, eval_argv(trained, "--videos-list", "test_ok", "--features", str(bad)), capsys)
    assert "test_ok.npy" in err and "NaN or infinite values (first in row 4)" in err


def test_float64_features_beyond_float32s_range_are_refused_naming_the_row(trained: Path,
                                                                           capsys: pytest.CaptureFixture[str]) -> None:
    # 1e39 is finite in float64 and inf once cast to float32: eval ended in a traceback (non-finite probabilities in
    # the segmenter) and the live stream was lost.
    huge = trained / "huge"
    huge.mkdir()
    features = np.load(trained / "npy" / "test_ok.npy").astype(np.float64)
    features[6, 1] = 1e39
    np.save(huge / "test_ok.npy", features)
    err = cli_error(stream_detect, eval_argv(trained, "--videos-list", "test_ok", "--features", str(huge)), capsys)
    assert "test_ok.npy" in err and "beyond float32's range" in err and "first in row 6" in err
    err = cli_error(stream_detect, ["--features", str(huge / "test_ok.npy"), "--graph", str(trained / "graph.json"),
                                    "--detector", str(trained / "detector.pt"), "--fast", "--jsonl"], capsys)
    assert "test_ok.npy" in err and "beyond float32's range" in err


def test_features_that_make_the_detector_overflow_are_refused_naming_the_file(
        trained: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # 1e38 is a finite float32, but the detector's output on it is not: "segmenter: frame 0 has ... non-finite
    # probabilities" named no file, which an eval over a folder needs most.
    big = trained / "big"
    big.mkdir()
    np.save(big / "test_ok.npy", np.full_like(np.load(trained / "npy" / "test_ok.npy"), 1e38, dtype=np.float32))
    graph = trained / "unseen.json"  # learned without test_ok, so that eval says nothing before the error
    assert tgml_main(["train", "--annotations", str(trained / "labels.json"), "--scenario", "kit", "--exclude-videos",
                      "test_ok", "--out", str(graph), "--quiet"]) == 0
    # Known by name: the fixture annotates rec0..rec7 exactly as test_ok (same order, same times), and by its
    # annotation a graph that learned them learned test_ok's too.
    learned = json.loads(graph.read_text())
    del learned["info"]["train_identities"]
    graph.write_text(json.dumps(learned))
    capsys.readouterr()
    # Warned of as it opens (far beyond the training's scale), then refused once the output is not finite.
    err = refused_after_scale_warning(eval_argv(trained, "--videos-list", "test_ok", "--features", str(big),
                                                "--graph", str(graph)), capsys)
    # The cause said as it is, with the value: "features far outside the range it was trained on?" guessed.
    cause = "(float32 arithmetic overflowed in the detector; the features reach 1e+38 in absolute value: rescale them"
    assert str(big / "test_ok.npy") in err and "non-finite probabilities" in err and cause in err
    err = refused_after_scale_warning(["--features", str(big / "test_ok.npy"), "--graph", str(trained / "graph.json"),
                                       "--detector", str(trained / "detector.pt"), "--fast", "--jsonl"], capsys)
    assert str(big / "test_ok.npy") in err and "non-finite probabilities" in err and cause in err


def scale_warnings(err: str) -> list[str]:
    """The lines of ``err`` that warn of features far beyond the detector's training scale."""
    return [line for line in err.splitlines() if line.startswith("warning: ") and "the features reach" in line]


def refused_after_scale_warning(argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    """``stream-detect argv``'s error line, checked as `cli_error` checks it, after the one warning of the file's
    scale that comes before it."""
    with pytest.raises(SystemExit) as exit_info:
        stream_detect(argv)
    lines = capsys.readouterr().err.strip().splitlines()
    assert exit_info.value.code == 2 and len(lines) == 2 and scale_warnings(lines[0]) == lines[:1], lines
    assert lines[1].startswith("error: ") and "Traceback" not in lines[1], lines
    return lines[1]


def test_feature_files_far_beyond_the_detectors_training_scale_are_warned_of_once_each(
        trained: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # Multiplied by 1e6 from vector 10 on (other units, another extractor): every value and every output stays finite,
    # so nothing was said, and eval scored the detector on features of a scale it never saw.
    scale = load_detector(trained / "detector.pt")[1].training_scale()
    training = [np.load(trained / "npy" / f"rec{v}.npy") for v in range(8)]  # test_ok, test_wrong: the test split
    assert scale is not None and scale == pytest.approx(max(float(np.abs(f).max()) for f in training))
    far = tmp_path / "far"
    far.mkdir()
    features = np.load(trained / "npy" / "test_ok.npy").astype(np.float32)
    features[10:] *= np.float32(1e6)
    np.save(far / "test_ok.npy", features)
    shutil.copy(trained / "npy" / "test_wrong.npy", far / "test_wrong.npy")  # of the training's scale: nothing said
    largest = float(np.abs(features).max())
    said = (f"the features reach {largest:.3g} in absolute value (first past 100 times the "
            f"training's at vector 10), {largest / scale:.3g} times the largest of those the detector was trained on "
            f"({scale:.3g}): its output may mean nothing; give it features scaled as its training features were (the "
            "same extractor, units and standardisation)")
    capsys.readouterr()
    assert stream_detect(eval_argv(trained, "--features", str(far), "--videos-list", "test_ok,test_wrong")) == 0
    # Named as eval names the file in its errors.
    assert scale_warnings(capsys.readouterr().err) == [
        f"warning: --features {far / 'test_ok.npy'} (annotated video 'test_ok'): {said}"]
    # Live, the file's stream: said once, as it opens, naming the first vector past the rule; the run goes on.
    assert stream_detect(["--features", str(far / "test_ok.npy"), "--graph", str(trained / "graph.json"),
                          "--detector", str(trained / "detector.pt"), "--fast", "--jsonl"]) == 0
    assert scale_warnings(capsys.readouterr().err) == [f"warning: --features {far / 'test_ok.npy'}: {said}"]
    # A detector written before checkpoints recorded the scale loads as it did, and nothing is compared.
    older = torch.load(trained / "detector.pt", weights_only=True)
    del older["info"]["feature_scale"]
    torch.save(older, tmp_path / "older.pt")
    assert stream_detect(eval_argv(trained, "--features", str(far), "--videos-list", "test_ok,test_wrong",
                                   "--detector", str(tmp_path / "older.pt"))) == 0
    assert scale_warnings(capsys.readouterr().err) == []


@pytest.mark.parametrize("rates", ["measured", "none"])
def test_a_live_detector_whose_output_goes_non_finite_part_way_ends_no_session(
        trained: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], rates: str) -> None:
    # Rows past the first step make the detector's output infinite: the run stopped with its error line, but its last
    # heartbeat said `ended`, and the checker reported "open_box" done and take_part, fix_part never done. A detector
    # that measured its rates then sent no last heartbeat at all, its evidence gone NaN (the checker's last word of the
    # stream was a heartbeat of frame 16): one that holds none sent it, as every other failed run does.
    features = np.load(trained / "npy" / "test_ok.npy").astype(np.float32)
    features[24:] = 1e38  # a finite float32, so the file is read; open_box (3-15 s) was confirmed by then
    np.save(tmp_path / "far.npy", features)
    checkpoint = torch.load(trained / "detector.pt", weights_only=False)
    assert checkpoint["evidence"] is not None
    if rates == "none":
        del checkpoint["evidence"]
    torch.save(checkpoint, tmp_path / "detector.pt")
    log: list[str] = []
    ctx = zmq.Context()
    service = CheckerService(load_graph(str(trained / "graph.json")),
                             CheckerConfig(f"ipc://{tmp_path}/in", f"ipc://{tmp_path}/out", stream_timeout_s=1.0), ctx,
                             log=lambda line, *_args, **_fields: log.append(line))
    stop = threading.Event()
    thread = threading.Thread(target=service.run, args=(stop,), daemon=True)
    thread.start()
    viewer = Viewer(ctx, service.alerts_endpoint, ViewState(), jsonl=False)
    try:
        with pytest.raises(SystemExit) as exit_info:
            stream_detect(["detector", "--features", str(tmp_path / "far.npy"), "--graph", str(trained / "graph.json"),
                           "--detector", str(tmp_path / "detector.pt"), "--fast", "--connect", service.events_endpoint])
        assert wait_for(lambda: any(line.startswith("checker: far ") and (" lost (" in line or " ended (" in line)
                                    for line in log), 10.0)
        rows = viewer.state.streams
        # Its last heartbeat, of the 24 frames delivered before the failing one, as a failed run's always is.
        assert wait_for(lambda: "far" in rows and rows["far"].frames == 24, 5.0, lambda: viewer.pump(20)), \
            rows.get("far")
    finally:
        viewer.close()
        stop.set()
        thread.join(5)
        ctx.destroy(linger=0)
    err = capsys.readouterr().err
    assert exit_info.value.code == 2 and "Traceback" not in err, err
    errors = [line for line in err.splitlines() if line.startswith("error: ")]
    assert errors == [err.splitlines()[-1]], err
    assert errors[0].startswith(f"error: {tmp_path / 'far.npy'}: segmenter: frame 24 has empty or non-finite"), err
    said = [line for line in log if line.startswith("checker: far ")]
    assert not [line for line in said if " ended (" in line or " stopped (" in line], said
    assert any(line.startswith("checker: far lost (") for line in said), said


def test_a_feature_file_that_ends_before_its_annotated_steps_is_refused(trained: Path,
                                                                        capsys: pytest.CaptureFixture[str]) -> None:
    # Cut short, or features at half the rate they are read at: every later step was scored as missed, without a word.
    short = trained / "short"
    short.mkdir()
    np.save(short / "test_ok.npy", np.load(trained / "npy" / "test_ok.npy")[:20])  # 20 s; its steps run to 45 s
    err = cli_error(stream_detect, eval_argv(trained, "--videos-list", "test_ok", "--features", str(short)), capsys)
    assert "test_ok.npy" in err and "covers 20.0 s" in err and "run to 45.0 s" in err and "--rate" in err


def test_an_annotated_end_far_past_a_feature_file_is_written_short() -> None:
    # An end of 1e300 s was written with its 301 digits, the line then ran on for 470 characters.
    from streaming.offline.eval_run import EvalVideo, check_annotation_fits
    from streaming.offline.eval_scores import AnnotatedSegment

    video = EvalVideo("v", Path("v.npy"), (AnnotatedSegment(1, 0.5, 1e300, False),), "--features v.npy")
    with pytest.raises(InputError) as refused:
        check_annotation_fits(video, 60.0, 1.0, "a.json")
    assert str(refused.value) == ("--features v.npy: covers 60.0 s at the rate it is read at, but its annotated steps "
                                  "in a.json run to 1e+300 s (a file cut short, or features at another --rate, or are "
                                  "the annotation's times frame numbers (they must be seconds)?)")


def test_feature_files_written_at_twice_the_detectors_rate_are_warned_of(trained: Path, tmp_path: Path,
                                                                        capsys: pytest.CaptureFixture[str]) -> None:
    # Two vectors a second read at the detector's one: each file lasts twice its steps, every step is recognised and
    # scored in the first half of its file, and eval printed wrong figures without a word.
    double = trained / "double"
    double.mkdir(exist_ok=True)
    for name in ("test_ok", "test_wrong"):
        np.save(double / f"{name}.npy", np.repeat(np.load(trained / "npy" / f"{name}.npy"), 2, axis=0))
    argv = eval_argv(trained, "--videos-list", "test_ok,test_wrong", "--json", str(tmp_path / "x.json"))
    assert stream_detect(argv) == 0
    assert "times as long" not in capsys.readouterr().err  # at the rate they were written at: no warning
    assert stream_detect(eval_argv(trained, "--videos-list", "test_ok,test_wrong", "--features", str(double),
                                   "--json", str(tmp_path / "y.json"))) == 0
    err = capsys.readouterr().err
    assert ("warning: --features: at the detector's rate (1 a second) the feature files last a median 2." in err
            and "were they written at that rate?" in err)


def test_a_feature_folder_s_file_extracted_at_another_rate_than_the_detector_s_is_refused(
    trained: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # The folder's split.json records the rate: a 2-a-second folder's file fed to the 1-a-second detector was replayed
    # live without a word (eval only guessed it from the annotations' lengths).
    twice = trained / "npy2"  # the same recordings at two vectors a second
    twice.mkdir()
    for file in (trained / "npy").glob("*.npy"):
        np.save(twice / file.name, np.repeat(np.load(file), 2, axis=0))
    folder = trained / "folder2"
    assert features_main(["import", "--features", str(twice), "--annotations", str(trained / "labels.json"),
                          "--rate", "2", "--out", str(folder), "--test-videos", "test_ok,test_wrong"]) == 0
    file = folder / "rgb_imported" / "test_wrong.npy"
    why = (f"extracted at 2 per second ({folder / 'split.json'}), but the detector {trained / 'detector.pt'} was "
           "trained at 1 and reads it at that rate: give a detector trained on features at 2, or features extracted "
           "at 1 (recognition-features --fps 1)")
    live = ["--features", str(file), "--graph", str(trained / "graph.json"), "--detector", str(trained / "detector.pt"),
            "--fast", "--jsonl"]
    assert cli_error(stream_detect, live, capsys) == f"error: --features {file}: {why}"
    err = cli_error(stream_detect, eval_argv(trained, "--videos-list", "test_wrong", "--features",
                                             str(folder / "rgb_imported")), capsys)
    assert err == f"error: --features {file} (annotated video 'test_wrong'): {why}"
    # The folder the detector was trained on records its own rate: read as before.
    same = trained / "folder" / "rgb_imported"
    assert stream_detect(eval_argv(trained, "--videos-list", "test_wrong", "--features", str(same))) == 0


def test_a_feature_file_whose_annotation_runs_a_few_seconds_past_it_is_scored(trained: Path, tmp_path: Path) -> None:
    # Public annotations end past the last whole second a per-second file holds (CaptainCook4D's 17_19: 0.95 s):
    # a few seconds are no sign of a file cut short, and such a file must not be refused.
    near = trained / "near"
    near.mkdir(exist_ok=True)
    np.save(near / "test_ok.npy", np.load(trained / "npy" / "test_ok.npy")[:42])  # 42 s; its steps run to 45 s
    out = tmp_path / "near.json"
    assert stream_detect(eval_argv(trained, "--videos-list", "test_ok", "--features", str(near), "--json",
                                                                         str(out))) == 0
    assert out.exists()


def test_features_of_another_width_than_the_detectors_are_refused(trained: Path,
                                                                  capsys: pytest.CaptureFixture[str]) -> None:
    wide = trained / "wide"
    wide.mkdir()
    np.save(wide / "test_ok.npy", np.zeros((40, WIDTH + 2), dtype=np.float32))
    err = cli_error(stream_detect, eval_argv(trained, "--videos-list", "test_ok", "--features", str(wide)), capsys)
    assert "test_ok.npy" in err and f"the features are {WIDTH + 2} wide" in err and f"reads {WIDTH}" in err


def test_a_rate_that_is_not_the_detectors_is_refused(trained: Path, capsys: pytest.CaptureFixture[str]) -> None:
    err = cli_error(stream_detect, eval_argv(trained, "--rate", "5"), capsys)
    assert "--rate 5: the detector" in err and "features at 1 per second; give features at its rate" in err
    # Files written at the detector's rate with a mistyped --rate were told only to "give features at its rate".
    assert err.endswith("(files written at it: --rate 1, or leave --rate out, which reads them at the detector's)")


def test_a_feature_file_with_no_annotation_is_refused(trained: Path, capsys: pytest.CaptureFixture[str]) -> None:
    stray = trained / "stray"
    stray.mkdir()
    np.save(stray / "unknown.npy", np.zeros((40, WIDTH), dtype=np.float32))
    err = cli_error(stream_detect, eval_argv(trained, "--features", str(stray)), capsys)
    assert "1 feature file with no annotation" in err and "unknown" in err
    assert err.endswith("is it the annotation file of these recordings?")
    shutil.copy(trained / "npy" / "test_ok.npy", stray / "test_ok.npy")
    err = cli_error(stream_detect, eval_argv(trained, "--features", str(stray)), capsys)
    assert "(unknown): annotate them, name the recordings to evaluate (--videos-list, --split), or move them out" in err


def test_files_of_recordings_not_annotated_beside_the_chosen_ones_are_left_out(trained: Path) -> None:
    # A data set's folder of every recording, read with one recipe's labels and the split import wrote: the other
    # recordings' files were refused though none of them was to be evaluated.
    folder = trained / "dataset"
    folder.mkdir()
    shutil.copy(trained / "npy" / "test_ok.npy", folder / "test_ok.npy")
    shutil.copy(trained / "npy" / "test_wrong.npy", folder / "test_wrong.npy")
    np.save(folder / "other_recipe.npy", np.zeros((40, WIDTH), dtype=np.float32))
    out = trained / "dataset.json"
    split = str(trained / "folder" / "split.json")
    assert stream_detect(eval_argv(trained, "--features", str(folder), "--split", split, "--json", str(out))) == 0
    assert {v["video"] for v in json.loads(out.read_text())["videos"]} == {"test_ok", "test_wrong"}
    assert stream_detect(eval_argv(trained, "--features", str(folder), "--videos-list", "test_ok",
                                   "--json", str(out))) == 0
    assert [v["video"] for v in json.loads(out.read_text())["videos"]] == ["test_ok"]


def test_a_chosen_recording_s_file_in_another_unicode_form_is_the_one_refused(tmp_path: Path) -> None:
    # Recordings chosen (--split, --videos-list): the other recordings' files are left out, and a file whose name
    # differs from an annotated one only in its Unicode form is refused alone, with what to do. The line named every
    # other recording's file too and told to name the recordings to evaluate, which the command line did.
    composed = unicodedata.normalize("NFC", "vid\u00e9o_1")
    labels = tmp_path / "labels.json"
    labels.write_text(json.dumps({
        "taxonomy": {"kit": {"0": {"name": "open_box", "id": 0}}},
        "annotations": {name: {"scenario": "kit", "segments": [{"step_id": 0, "start_time": 0, "end_time": 1}]}
                        for name in (composed, "kept")}}))
    folder = tmp_path / "npy"
    folder.mkdir()
    for name in (unicodedata.normalize("NFD", composed), "kept", "other_recipe"):
        np.save(folder / f"{name}.npy", np.zeros((4, WIDTH), dtype=np.float32))
    annotations = load_annotations(labels, learns_graph=False)
    with pytest.raises(InputError) as refused:
        annotated_feature_files([str(folder)], annotations, str(labels), chosen=True)
    line = str(refused.value)
    assert line.startswith(f"--features: 1 feature file with no annotation in {labels} (")
    assert "differs from an annotated name only in its Unicode form" in line
    assert "other_recipe" not in line and "--videos-list" not in line


def test_a_file_that_is_not_a_float_array_is_refused(trained: Path, capsys: pytest.CaptureFixture[str]) -> None:
    ints = trained / "ints"
    ints.mkdir()
    np.save(ints / "test_ok.npy", np.zeros((40, WIDTH), dtype=np.int32))
    err = cli_error(stream_detect, eval_argv(trained, "--videos-list", "test_ok", "--features", str(ints)), capsys)
    assert "test_ok.npy" in err and "expected floats (float16, float32, float64, ...)" in err


def with_another_scenario(trained: Path) -> tuple[Path, Path]:
    """The annotation file with a second scenario's recording, and a folder holding its features beside test_ok's."""
    labels = json.loads((trained / "labels.json").read_text())
    labels["taxonomy"]["shelf"] = labels["taxonomy"]["kit"]
    shelf = {"scenario": "shelf", "recording_id": "shelf_1"}
    labels["annotations"]["shelf_1"] = labels["annotations"]["test_ok"] | shelf
    (trained / "two_scenarios.json").write_text(json.dumps(labels))
    folder = trained / "two_scenarios"
    folder.mkdir(exist_ok=True)
    for name in ("test_ok", "shelf_1"):
        np.save(folder / f"{name}.npy", np.load(trained / "npy" / "test_ok.npy"))
    return trained / "two_scenarios.json", folder


def test_feature_files_of_another_scenario_are_said_not_to_be_evaluated(trained: Path,
                                                                         capsys: pytest.CaptureFixture[str]) -> None:
    labels, folder = with_another_scenario(trained)
    argv = eval_argv(trained, "--features", str(folder), "--annotations", str(labels),
                                 "--json", str(trained / "two.json"))
    capsys.readouterr()
    assert stream_detect(argv) == 0
    assert "--features: 1 feature file is of recordings of another scenario than 'kit', not evaluated (shelf_1)" \
        in capsys.readouterr().err
    assert [v["video"] for v in json.loads((trained / "two.json").read_text())["videos"]] == ["test_ok"]


def test_feature_files_all_of_another_scenario_are_refused(trained: Path, capsys: pytest.CaptureFixture[str]) -> None:
    labels, folder = with_another_scenario(trained)
    argv = eval_argv(trained, "--features", str(folder / "shelf_1.npy"), "--annotations", str(labels))
    capsys.readouterr()
    err = cli_error(stream_detect, argv, capsys)
    assert "none of the 1 feature files is of a recording of scenario 'kit'" in err  # it scored 0 videos, exit 0


def test_entries_of_a_features_folder_that_are_not_feature_files_are_named_in_a_note(
        trained: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # test_wrong's features as .npz beside test_ok.npy: eval scored test_ok alone without a word of the other file;
    # tgml bench-live named it in a note, which eval now gives alike.
    folder = tmp_path / "npz"
    folder.mkdir()
    shutil.copy(trained / "npy" / "test_ok.npy", folder)
    np.savez(folder / "test_wrong.npz", features=np.load(trained / "npy" / "test_wrong.npy"))
    (folder / "old").mkdir()
    capsys.readouterr()
    assert stream_detect(eval_argv(trained, "--features", str(folder), "--json", str(tmp_path / "x.json"))) == 0
    assert (f"note: --features {folder}: 2 entries are not <video>.npy and not read: old/, test_wrong.npz"
            in capsys.readouterr().err.splitlines())
    assert [v["video"] for v in json.loads((tmp_path / "x.json").read_text())["videos"]] == ["test_ok"]


def test_annotated_recordings_a_features_folder_lacks_are_said_not_to_be_evaluated(
        trained: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # With no --split, eval judges every annotated recording of the scenario; a folder holding two of the ten was
    # judged on those two without a word, its totals read as the whole set's.
    folder = tmp_path / "two"
    folder.mkdir()
    for name in ("test_ok", "test_wrong"):
        shutil.copy(trained / "npy" / f"{name}.npy", folder)
    labels = trained / "labels.json"
    capsys.readouterr()
    assert stream_detect(eval_argv(trained, "--features", str(folder), "--json", str(tmp_path / "x.json"))) == 0
    assert (f"warning: --features: 8 annotated recordings of scenario 'kit' in {labels} have no feature file, not "
            "evaluated (rec0, rec1, rec2, rec3, rec4 and 3 more)" in capsys.readouterr().err.splitlines())
    assert [v["video"] for v in json.loads((tmp_path / "x.json").read_text())["videos"]] == ["test_ok", "test_wrong"]
    # Files named one by one, or a split, choose the recordings: nothing is left out unasked.
    for extra in (["--features", str(folder / "test_ok.npy")], ["--features", str(folder), "--videos-list", "test_ok"]):
        assert stream_detect(eval_argv(trained, *extra)) == 0
        assert "no feature file" not in capsys.readouterr().err


def test_recordings_of_the_split_without_a_feature_file_are_named_at_once_with_the_folder(
        trained: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # "--features: no feature file test_ok.npy for annotated video 'test_ok'": one recording a try, and neither the
    # folder looked in nor that the split had named it.
    folder = tmp_path / "one"
    folder.mkdir()
    shutil.copy(trained / "npy" / "rec0.npy", folder)
    split = trained / "folder" / "split.json"
    err = cli_error(stream_detect, eval_argv(trained, "--features", str(folder), "--split", str(split)), capsys)
    assert err == (f"error: --features {folder}: no <recording>.npy file for 2 of the 2 recordings --split {split} "
                   "names (test_ok, test_wrong)")
    err = cli_error(stream_detect, eval_argv(trained, "--features", str(folder), "--videos-list", "test_ok"), capsys)
    assert err == f"error: --features {folder}: no <recording>.npy file for the recording --videos-list names (test_ok)"


def test_feature_files_of_augmented_copies_only_are_not_said_to_be_named_by_an_option(
        trained: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # A copy (<video>.aug<k>.npy) is no recording's features: with only copies given, every annotated recording
    # lacked a file, and the line blamed "--videos-list names", an option nobody gave.
    copy = tmp_path / "rec0.aug1.npy"
    shutil.copy(trained / "npy" / "rec0.npy", copy)
    err = cli_error(stream_detect, eval_argv(trained, "--features", str(copy)), capsys)
    assert "--videos-list" not in err and "--split" not in err, err
    assert err.startswith(f"error: --features {copy}: no <recording>.npy file for "), err
    assert f" recordings annotated in {trained / 'labels.json'} (" in err, err


def test_features_and_videos_together_are_refused(trained: Path, capsys: pytest.CaptureFixture[str]) -> None:
    err = cli_error(stream_detect, eval_argv(trained, "--videos", str(trained)), capsys)
    assert "--features replays feature files instead of videos" in err


def test_a_feature_file_is_a_live_source_and_its_mistake_alerts(trained: Path,
                                                                  capsys: pytest.CaptureFixture[str]) -> None:
    # The all-in-one run: a checker process on loopback ZeroMQ, the detector fed the file's vectors, JSON lines out.
    assert stream_detect(["--features", str(trained / "npy" / "test_wrong.npy"), "--graph", str(trained / "graph.json"),
                          "--detector", str(trained / "detector.pt"), "--rate", "1", "--fast", "--jsonl",
                          "--checker", "binary", "--alert-on", "end"]) == 0
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines() if line.startswith("{")]
    assert [m["step"] for m in lines if m["kind"] == "step"] == [1, 0, 2]
    assert [m["step"] for m in lines if m["kind"] == "alert"] == [1]  # take_part before open_box
    # Video time is the file's: the alert's step started 3 s in (row 3 at one vector a second).
    assert [m["start"] for m in lines if m["kind"] == "step"][0] == 3.0


def test_one_validation_video_still_lets_the_default_checker_alert(trained: Path, tmp_path: Path) -> None:
    # A handful of recordings leave one validation video. Its evidence curves were then the flattest tried, so a step
    # the detector never saw still read as fairly likely done and the default probabilistic checker stayed silent on
    # take_part before open_box (a user's six imported recordings: P(skipped) 0.37 < 0.5). Leaving one of the video's
    # steps out judges the curve as a second video would: the alert comes, with the defaults.
    detector = tmp_path / "one_val.pt"
    assert train_main(["--features", str(trained / "folder"), "--config", str(trained / "tiny.toml"),
                       "--out", str(detector), "--val-videos", "rec3", "--quiet"]) == 0
    out = tmp_path / "eval.json"
    split = trained / "folder" / "split.json"
    argv = eval_argv(trained, "--detector", str(detector), "--split", str(split), "--json", str(out))
    assert stream_detect(argv) == 0
    videos = {v["video"]: v for v in json.loads(out.read_text())["videos"]}
    assert [a["step"] for a in videos["test_wrong"]["alerts"] if not a["retracted"]] == [1]
    assert not [a for a in videos["test_ok"]["alerts"] if not a["retracted"]]


@pytest.mark.parametrize(("named", "stream"), [([], "test_wrong"), (["--stream-id", "kitchen"], "kitchen")])
def test_a_live_feature_file_is_the_stream_of_its_name_unless_one_is_given(
        trained: Path, capsys: pytest.CaptureFixture[str], named: list[str], stream: str) -> None:
    # Every feature file was stream cam0, as a camera is: the view and the checker's log named no recording.
    assert stream_detect(["--features", str(trained / "npy" / "test_wrong.npy"), "--graph", str(trained / "graph.json"),
                          "--detector", str(trained / "detector.pt"), "--fast", "--jsonl", "--checker", "binary",
                          *named]) == 0
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines() if line.startswith("{")]
    assert {m["stream_id"] for m in lines if m["kind"] in ("step", "alert", "status")} == {stream}


def test_a_detector_names_each_feature_files_stream_after_it_numbering_a_name_given_twice(
        trained: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # Two recordings of one name from two folders (two days' run1.npy): cam0 and cam1 said neither which was which.
    for day in ("monday", "tuesday"):
        (tmp_path / day).mkdir()
        shutil.copy(trained / "npy" / "test_ok.npy", tmp_path / day / "run1.npy")
    log: list[str] = []
    with running_checker(tmp_path, graph=load_graph(str(trained / "graph.json")), log=log) as (_ctx, service, _thr):
        assert stream_detect(["detector", "--features", str(tmp_path / "monday" / "run1.npy"), "--features",
                              str(tmp_path / "tuesday" / "run1.npy"), "--graph", str(trained / "graph.json"),
                              "--detector", str(trained / "detector.pt"), "--fast", "--connect",
                              service.events_endpoint]) == 0
        assert wait_for(lambda: {"run1", "run1-2"} <= {line.split()[1] for line in log
                                                       if line.startswith("checker: ") and " ended (" in line}, 10), log
    err = capsys.readouterr().err
    assert "detector: 2 streams (run1, run1-2) publishing to" in err, err


def test_feature_files_streams_are_their_names_made_stream_ids() -> None:
    assert file_stream_ids(["a/run1.npy", "b/run1.npy", "c/run1-2.npy", "d/run1.npy"]) == (
        "run1", "run1-3", "run1-2", "run1-4")  # a file's own name is never given to another as a numbered copy
    assert file_stream_ids(["day 1/café run.npy"]) == ("caf__run",)  # what a stream id cannot hold becomes _
    long = "r" * 70
    assert file_stream_ids([f"a/{long}.npy", f"b/{long}.npy"]) == ("r" * 64, "r" * 62 + "-2")


@pytest.mark.parametrize("given", [1, 3])
def test_a_stream_id_count_that_is_not_the_feature_files_says_their_names_are_the_default(
        trained: Path, capsys: pytest.CaptureFixture[str], given: int) -> None:
    ok, wrong = str(trained / "npy" / "test_ok.npy"), str(trained / "npy" / "test_wrong.npy")
    ids = [arg for k in range(given) for arg in ("--stream-id", f"s{k}")]
    line = cli_error(stream_detect, ["detector", "--features", ok, "--features", wrong, *ids, "--detector",
                                     str(trained / "detector.pt"), "--graph", str(trained / "graph.json")], capsys)
    assert line.endswith("give one per --features, in the same order (or none: each file's name)"), line


def test_the_status_after_each_step_counts_the_vectors_up_to_it_even_at_the_files_end(
        trained: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # --fast outruns the heartbeat's 0.5 s: the status after a step said the frames of a heartbeat long past, and the
    # step the file's end confirms (fix_part, cut at 40 s of its 33-45 s) came after none at all.
    cut = tmp_path / "cut.npy"
    np.save(cut, np.load(trained / "npy" / "test_ok.npy")[:40])
    assert stream_detect(["--features", str(cut), "--graph", str(trained / "graph.json"), "--detector",
                          str(trained / "detector.pt"), "--fast", "--jsonl", "--checker", "binary"]) == 0
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines() if line.startswith("{")]
    steps = [m for m in lines if m["kind"] == "step"]
    assert [m["step"] for m in steps] == [0, 1, 2] and steps[-1]["end"] == 40.0
    for step in steps:
        after = next(m for m in lines if m["kind"] == "status" and m["seq"] > step["seq"])
        assert after["frames"] >= step["end"], (step, after)


@pytest.mark.parametrize(("extra", "why"), [
    (["--rate", "2"], "--rate 2: the detector"),
    (["--video", "demo"], "--features and --video both name the source"),
    (["--annotate-out", "x.mp4"],
     "--annotate-out: draws over video frames; --features files hold features, not video frames"),
    # as typed, of vectors: it said "1e400" was "inf" frames per second of video
    (["--rate", "1e400"], "--rate: 1e400: must be a number of vectors per second in 1..1000"),
    (["--annotate-out", "x.mp4", "--preview"], "--annotate-out and --preview: draw over video frames"),
])
def test_bad_live_feature_sources_are_refused_before_the_run(trained: Path, capsys: pytest.CaptureFixture[str],
                                                            extra: list[str], why: str) -> None:
    argv = ["--features", str(trained / "npy" / "test_ok.npy"), "--graph", str(trained / "graph.json"),
            "--detector", str(trained / "detector.pt"), "--fast", "--jsonl", *extra]
    assert why in cli_error(stream_detect, argv, capsys)


def test_entries_named_like_feature_files_that_are_none_are_named(trained: Path, tmp_path: Path,
                                                                  capsys: pytest.CaptureFixture[str]) -> None:
    # A folder, a link to nothing or a FIFO named <video>.npy is said to be one, not "no feature file" or "not found".
    folder = tmp_path / "npy"
    shutil.copytree(trained / "npy", folder)
    (folder / "test_ok.npy").unlink()
    (folder / "test_ok.npy").symlink_to(tmp_path / "gone.npy")
    err = cli_error(stream_detect, eval_argv(trained, "--features", str(folder)), capsys)
    assert err.endswith("test_ok.npy is a link to no file, not a feature file")
    (folder / "test_ok.npy").unlink()
    (folder / "test_ok.npy").mkdir()
    assert cli_error(stream_detect, eval_argv(trained, "--features", str(folder)), capsys).endswith(
        "test_ok.npy is a folder, not a feature file")
    fifo = tmp_path / "live.npy"
    os.mkfifo(fifo)
    argv = ["--features", str(fifo), "--graph", str(trained / "graph.json"), "--detector",
            str(trained / "detector.pt"), "--fast", "--jsonl"]
    err = cli_error(stream_detect, argv, capsys)
    assert err == f"error: --features {fifo}: a FIFO (named pipe), expected a .npy feature file"


def test_a_live_feature_file_with_nan_or_another_width_is_refused(trained: Path, tmp_path: Path,
                                                                  capsys: pytest.CaptureFixture[str]) -> None:
    nan = np.load(trained / "npy" / "test_ok.npy")
    nan[2, 3] = np.nan
    np.save(tmp_path / "nan.npy", nan)
    np.save(tmp_path / "wide.npy", np.zeros((10, WIDTH + 1), dtype=np.float32))
    for name, why in (("nan.npy", "NaN or infinite values (first in row 2)"), ("wide.npy", "7 wide")):
        argv = ["detector", "--features", str(tmp_path / name), "--graph", str(trained / "graph.json"),
                "--detector", str(trained / "detector.pt"), "--fast"]
        err = cli_error(stream_detect, argv, capsys)
        assert f"--features {tmp_path / name}" in err and why in err


def test_a_live_feature_file_of_another_width_is_refused_from_its_header(trained: Path, tmp_path: Path,
                                                                        capsys: pytest.CaptureFixture[str]) -> None:
    # The whole file was read (and converted) before its width was looked at: a 200 MB file of another backbone took
    # 14 s and 945 MB to refuse. Its header says the width: here the data after it is cut short, never read.
    wide = tmp_path / "wide.npy"
    np.save(wide, np.zeros((100_000, WIDTH + 1), dtype=np.float32))
    with wide.open("r+b") as handle:
        handle.truncate(4096)
    argv = ["detector", "--features", str(wide), "--graph", str(trained / "graph.json"),
            "--detector", str(trained / "detector.pt"), "--fast"]
    err = cli_error(stream_detect, argv, capsys)
    assert err == (f"error: --features {wide}: the features are {WIDTH + 1} wide, the detector "
                   f"{trained / 'detector.pt'} reads {WIDTH} ('imported' features)")


def test_a_live_feature_file_saved_transposed_is_said_to_be_so(trained: Path, tmp_path: Path,
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    # A (D, T) array read as T wide: the line named the widths only, as if another backbone's, while import asks
    # "saved transposed?" of the same file.
    flipped = tmp_path / "test_ok.npy"
    np.save(flipped, np.load(trained / "npy" / "test_ok.npy").T)
    rows = np.load(flipped).shape[1]
    for argv in (["detector", "--features", str(flipped), "--graph", str(trained / "graph.json"),
                  "--detector", str(trained / "detector.pt"), "--fast"],
                 eval_argv(trained, "--features", str(flipped), "--videos-list", "test_ok")):
        err = cli_error(stream_detect, argv, capsys)
        assert err.endswith(f"the features are {rows} wide, the detector {trained / 'detector.pt'} reads {WIDTH} "
                            f"('imported' features): saved transposed? its {WIDTH} rows are the detector's width; "
                            "save it as (rows, width)")


@pytest.mark.parametrize("entries", ["npz", "feature folder", "other"])
def test_a_features_folder_without_npy_files_says_what_it_holds(trained: Path, tmp_path: Path, entries: str,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    # CaptainCook4D's published features are .npz archives, and the folder import writes holds its .npy files one
    # level down: both were refused as if the folder were empty, the user left to guess what was wrong with it.
    folder = tmp_path / "given"
    folder.mkdir()
    if entries == "npz":
        for name in ("test_ok", "test_wrong"):
            np.savez(folder / f"{name}_360p_224.mp4_1s_1s.npz", features=np.load(trained / "npy" / f"{name}.npy"))
        said = ("; it holds 2 .npz archives (test_ok_360p_224.mp4_1s_1s.npz, test_wrong_360p_224.mp4_1s_1s.npz): "
                "save each one's array with np.save as <video>.npy")
    elif entries == "feature folder":
        folder = trained / "folder"
        said = f"; it is a feature folder (its split.json): give its features, {folder / 'rgb_imported'}"
    else:
        (folder / "notes.txt").write_text("x")
        said = "; it holds notes.txt"
    err = cli_error(stream_detect, eval_argv(trained, "--features", str(folder)), capsys)
    assert err == f"error: --features {folder}: holds no .npy feature file (one <video>.npy per recording){said}"
    # The same line from the import, and from an empty folder nothing more.
    err = cli_error(features_main, ["import", "--features", str(folder), "--annotations", str(trained / "labels.json"),
                                    "--rate", "1", "--out", str(tmp_path / "out")], capsys)
    assert err.endswith(said)
    (tmp_path / "empty").mkdir()
    err = cli_error(stream_detect, eval_argv(trained, "--features", str(tmp_path / "empty")), capsys)
    assert err.endswith("holds no .npy feature file (one <video>.npy per recording)")


def test_one_feature_file_named_twice_is_one_recording(trained: Path, tmp_path: Path,
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    # The folder and a file in it, spelt another way (here through a link): "two feature files of recording
    # 'test_ok'" of what was one file. Two files of one name are still refused.
    link = tmp_path / "npy"
    link.symlink_to(trained / "npy")
    out = tmp_path / "once.json"
    status: str | int | None  # the command's status, or SystemExit's code
    try:
        status = stream_detect(eval_argv(trained, "--features", str(trained / "npy"), str(link / "test_ok.npy"),
                                         "--videos-list", "test_ok", "--json", str(out)))
    except SystemExit as ended:
        status = ended.code
    assert status == 0, capsys.readouterr().err
    assert [v["video"] for v in json.loads(out.read_text())["videos"]] == ["test_ok"]
    capsys.readouterr()
    copy = tmp_path / "copy"
    copy.mkdir()
    shutil.copy(trained / "npy" / "test_ok.npy", copy)
    err = cli_error(stream_detect, eval_argv(trained, "--features", str(trained / "npy"), str(copy / "test_ok.npy")),
                    capsys)
    assert err == (f"error: --features: two feature files of recording 'test_ok' ({trained / 'npy' / 'test_ok.npy'} "
                   f"and {copy / 'test_ok.npy'})")


def test_a_detector_of_imported_features_on_a_video_says_to_feed_it_files(trained: Path,
                                                                          capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["--video", "demo", "--graph", str(trained / "graph.json"), "--detector", str(trained / "detector.pt"),
            "--fast", "--jsonl"]
    err = cli_error(stream_detect, argv, capsys)
    assert err == (f"error: --detector {trained / 'detector.pt'}: asks for feature extractor 'imported', "
                   "which no backbone here computes from video (known: " + ", ".join((*EXTRACTOR_NAMES, "torchscript"))
                   + "): give it its features as .npy files with --features, not videos")
    # eval has --videos and --features DIR: the same line fits it (it named "--features FILE.npy, not --video").
    (trained / "videos").mkdir()
    err = cli_error(stream_detect, ["eval", "--videos", str(trained / "videos"), "--annotations",
                                    str(trained / "labels.json"), "--graph", str(trained / "graph.json"),
                                    "--detector", str(trained / "detector.pt"), "--quiet"], capsys)
    assert err.endswith("give it its features as .npy files with --features, not videos")


def test_a_recognition_features_folder_replays_without_its_augmented_copies(trained: Path) -> None:
    # recognition-features writes <video>.aug1.npy beside a training video's features: a copy, not a recording.
    copies = trained / "copies"
    copies.mkdir()
    for name in ("test_ok.npy", "rec0.npy", "rec0.aug1.npy"):
        (copies / name).write_bytes((trained / "npy" / name.replace(".aug1", "")).read_bytes())
    out = trained / "copies.json"
    assert stream_detect(eval_argv(trained, "--json", str(out), "--features", str(copies))) == 0
    assert sorted(v["video"] for v in json.loads(out.read_text())["videos"]) == ["rec0", "test_ok"]


def test_a_feature_file_is_read_one_vector_at_a_time_at_its_rate(tmp_path: Path) -> None:
    path = tmp_path / "clip.npy"
    np.save(path, np.arange(12, dtype=np.float32).reshape(4, 3))
    assert is_feature_file(path) and not is_feature_file(tmp_path / "clip.mp4")
    reader = FeatureFileReader(path, ReaderConfig(fps=200.0, realtime=True))
    frames = list(reader)
    assert [f.time for f in frames] == [0.0, 0.005, 0.01, 0.015]  # row k at k / rate
    assert frames[2].image.tolist() == [6.0, 7.0, 8.0] and reader.duration == 0.02
    # Paced to the wall clock: row k is due k / rate after the first.
    assert frames[3].arrived - frames[0].arrived == pytest.approx(0.015, abs=1e-6)
    batch = PrecomputedExtractor(3)(np.stack([f.image for f in frames[:2]]))
    assert batch.dtype == np.float32 and batch.tolist() == [[0.0, 1.0, 2.0], [3.0, 4.0, 5.0]]


DATA = Path(os.environ.get("MISTAKE_DATA", Path(__file__).resolve().parents[3] / "shared" / "data"))
PE = DATA / "captaincook4d-pe"


@pytest.mark.skipif(not (PE / "features").is_dir(), reason=f"the CaptainCook4D features are not at {PE}")
def test_real_captaincook4d_features_import_train_and_replay(tmp_path: Path, capsys: pytest.CaptureFixture[str]
                                                             ) -> None:
    with open(PE / "SOURCES.tsv", newline="") as handle:
        rows = [r for r in csv.DictReader(handle, delimiter="\t") if r["recipe"] == "microwaveeggsandwich"]
    source = {e["recording_id"]: e for e in json.loads((DATA / "captaincook4d" / "error_annotations.json").read_text())}
    skipped = {r: {s["description"] for s in source[r]["step_annotations"] if s["start_time"] < 0} for r in source}
    # The recording tested last: one with steps never done (CaptainCook4D's Missing Steps), for the end report's score.
    chosen = sorted((r["recording_id"] for r in rows[:5]), key=lambda r: bool(skipped[r]))
    (tmp_path / "npy").mkdir()
    for name in chosen:
        (tmp_path / "npy" / f"{name}.npy").symlink_to(PE / "features" / f"{name}.npy")
    # The recordings' labels as `tgml bench-live` reads them, in the annotation format (the recipe's own step ids).
    assert tgml_main(["captaincook-labels", "--data", str(DATA), "--features", str(tmp_path / "npy"), "--out",
                      str(tmp_path / "labels.json")]) == 0
    assert features_main(["import", "--features", str(tmp_path / "npy"), "--annotations", str(tmp_path / "labels.json"),
                          "--rate", "1", "--out", str(tmp_path / "folder"), "--test-videos", chosen[-1]]) == 0
    assert train_main(["--features", str(tmp_path / "folder"), "--out", str(tmp_path / "d.pt"), "--epochs", "2",
                       "--quiet"]) == 0
    model, checkpoint = load_detector(tmp_path / "d.pt")
    assert (checkpoint.feature_extractor, checkpoint.fps, model.config.input_dim) == ("imported", 1.0, 768)
    # At one vector a second the default 0.5 s confirmation is one vector, so every blip was a step: the trainer
    # chooses the confirmation on its validation recording (6 s here, by a small margin), stores it with the rules
    # that come with it, and the detections its rates are of are those.
    segmenter = checkpoint.segmenter_config()
    classes = len(checkpoint.class_step_ids)
    assert segmenter.min_duration in (0.5, 3.0, 6.0)  # 2 s: its flicker rule would be one vector
    if segmenter.min_duration > 0.5:
        assert (segmenter.min_run, segmenter.class_min_duration) == (segmenter.min_duration / 2,
                                                                     (segmenter.min_duration,) * classes)
    assert checkpoint.evidence is not None and checkpoint.evidence.detection_window == segmenter.min_duration
    assert tgml_main(["train", "--annotations", str(tmp_path / "labels.json"), "--scenario", "microwaveeggsandwich",
                      "--include-mistakes", "--out", str(tmp_path / "graph.json")]) == 0
    out = tmp_path / "eval.json"
    assert stream_detect(["eval", "--features", str(tmp_path / "npy" / f"{chosen[-1]}.npy"), "--annotations",
                          str(tmp_path / "labels.json"), "--graph", str(tmp_path / "graph.json"), "--detector",
                          str(tmp_path / "d.pt"), "--rate", "1", "--quiet", "--no-cache", "--json", str(out)]) == 0
    (video,) = json.loads(out.read_text())["videos"]
    assert video["video"] == chosen[-1]
    # Every second of the recording went through the detector: its frames are the file's rows.
    assert video["frames"] == len(np.load(PE / "features" / f"{chosen[-1]}.npy"))
    # The end report is scored against the recording's Missing Steps, as tgml bench-live scores it.
    assert video["missing_steps"]["annotated"] == len(skipped[chosen[-1]]) > 0
    assert video["missing_steps"]["named"] == len(video["never_done"])
    assert video["missing_steps"]["right"] == len(skipped[chosen[-1]] & set(video["never_done"]))
    # The recording is of the training recordings' scale: nothing said of it. Multiplied by 1e6 it is, once.
    assert checkpoint.training_scale() == max(float(np.abs(np.load(PE / "features" / f"{name}.npy")).max())
                                              for name in chosen[:-1])
    assert scale_warnings(capsys.readouterr().err) == []
    far = tmp_path / "far" / f"{chosen[-1]}.npy"
    far.parent.mkdir()
    np.save(far, np.load(PE / "features" / f"{chosen[-1]}.npy").astype(np.float32) * np.float32(1e6))
    assert stream_detect(["eval", "--features", str(far), "--annotations", str(tmp_path / "labels.json"), "--graph",
                          str(tmp_path / "graph.json"), "--detector", str(tmp_path / "d.pt"), "--quiet",
                          "--no-cache"]) == 0
    (line,) = scale_warnings(capsys.readouterr().err)
    assert line.startswith(f"warning: --features {far} (annotated video '{chosen[-1]}'): the features reach ")


@pytest.mark.skipif(not (PE / "features").is_dir(), reason=f"the CaptainCook4D features are not at {PE}")
def test_no_captaincook4d_recording_is_far_beyond_the_scale_of_the_others() -> None:
    # The rule must never fire on a data set's own recordings: each against a detector trained on the 89 others (whose
    # recorded scale is their largest absolute value, as recognition-train records it).
    largest = {path: float(largest_by_row(np.load(path)).max()) for path in sorted((PE / "features").glob("*.npy"))}
    assert len(largest) == 90 and max(largest.values()) < 6
    for path in largest:
        others = max(value for other, value in largest.items() if other != path)
        assert scale_mismatch(np.load(path), others, str(path)) is None, path
        assert scale_mismatch(np.load(path).astype(np.float32) * np.float32(1e6), others, str(path)) is not None, path


def with_a_repeat(trained: Path) -> Path:
    """A recording of ``open_box, take_part, open_box, fix_part`` (the box opened again: to the detector, the first
    step twice), annotated beside the others."""
    features, segments = recording((0, 1, 0, 2), np.random.default_rng(11))
    np.save(trained / "repeat.npy", features)
    labels = json.loads((trained / "labels.json").read_text())
    labels["annotations"]["repeat"] = {"scenario": "kit", "recording_id": "repeat", "segments": [
        {"step_id": s, "start_time": a, "end_time": b, "description": "", "step_name": STEPS[s], "has_errors": False}
        for s, a, b in segments]}
    (trained / "repeat.json").write_text(json.dumps(labels))
    return trained / "repeat.npy"


@pytest.mark.parametrize("alert_on", ["end", "onset"])
def test_once_sends_each_step_the_first_time_it_is_confirmed_only(trained: Path, alert_on: str) -> None:
    # Announced at onset (the default) too: the repeat is neither announced nor sent. Scored by eval, whose checker
    # serves every message: a live run under --fast on a loaded machine may have a burst of messages turned away by
    # the checker's per-stream budget, their steps then brought by the next heartbeat's history without a `step` line.
    features = with_a_repeat(trained)
    recognised = {}
    for extra in ([], ["--once"]):
        out = trained / f"repeat{len(extra)}.json"
        assert stream_detect(["eval", "--features", str(features), "--annotations", str(trained / "repeat.json"),
                              "--graph", str(trained / "graph.json"), "--detector", str(trained / "detector.pt"),
                              "--quiet", "--alert-on", alert_on, "--json", str(out), *extra]) == 0
        result = json.loads(out.read_text())
        assert result["settings"]["once"] is bool(extra)
        (video,) = result["videos"]
        recognised[bool(extra)] = [s["step"] for s in video["recognised"]]
    assert recognised == {False: [0, 1, 0, 2], True: [0, 1, 2]}


def with_a_skip(trained: Path, annotated: bool) -> Path:
    """A recording of ``open_box, fix_part``: ``take_part`` never done, and so annotated (a segment with
    ``start_time == end_time == -1``, as CaptainCook4D marks a Missing Step) when ``annotated``."""
    features, segments = recording((0, 2), np.random.default_rng(12))
    np.save(trained / "skip.npy", features)
    labels = json.loads((trained / "labels.json").read_text())
    rows = [(s, a, b) for s, a, b in segments] + ([(1, -1.0, -1.0)] if annotated else [])
    labels["annotations"]["skip"] = {"scenario": "kit", "recording_id": "skip", "segments": [
        {"step_id": s, "start_time": a, "end_time": b, "description": "", "step_name": STEPS[s], "has_errors": False}
        for s, a, b in rows]}
    (trained / "skip.json").write_text(json.dumps(labels))
    return trained / "skip.npy"


@pytest.mark.parametrize("annotated", [True, False])
def test_eval_scores_the_end_report_against_the_steps_annotated_never_done(
        trained: Path, annotated: bool, capsys: pytest.CaptureFixture[str]) -> None:
    features = with_a_skip(trained, annotated)
    out = trained / "skip-eval.json"
    assert stream_detect(["eval", "--features", str(features), "--annotations", str(trained / "skip.json"),
                          "--graph", str(trained / "graph.json"), "--detector", str(trained / "detector.pt"),
                          "--quiet", "--no-cache", "--checker", "binary", "--json", str(out)]) == 0
    printed = capsys.readouterr().out
    (video,) = json.loads(out.read_text())["videos"]
    assert video["never_done"] == ["take_part"]  # the end report
    if annotated:
        assert video["missing_steps"] == {"named": 1, "right": 1, "annotated": 1, "precision": 1.0, "recall": 1.0,
                                          "f1": 1.0, "videos": 1}
        assert "missing steps at the end (1 video scored): 1 named never done, 1 of them right; 1 annotated never " \
               "done (P 100.0, R 100.0, F1 100.0)" in printed
    else:  # a file that marks no step never done leaves nothing to score against: said, not scored as wrong
        assert video["missing_steps"] is None
        assert "the end report named 1 step never done; the annotations of the graph's scenario mark no step" in printed


def test_the_done_evidence_can_be_calibrated_without_the_done_states(trained: Path) -> None:
    # tgml bench-live's folds mostly chose the done evidence from the class probabilities alone: recognition-train
    # fits that calibration too (E3 with e = 0), so stream-detect can replay a fold's choice.
    (trained / "no-states.toml").write_text(TINY.replace("threads = 1", "threads = 1\nevidence_done_states = false"))
    assert train_main(["--features", str(trained / "folder"), "--config", str(trained / "no-states.toml"),
                       "--out", str(trained / "no-states.pt"), "--quiet"]) == 0
    _, with_states = load_detector(trained / "detector.pt")
    _, without = load_detector(trained / "no-states.pt")
    assert with_states.evidence is not None and without.evidence is not None
    assert with_states.evidence.state_slope > 0 and without.evidence.state_slope == 0.0


def test_the_split_of_another_procedure_is_refused(trained: Path, tmp_path: Path,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    # Another procedure's split can name videos this one has too (video_03); it was used without a word.
    split = json.loads((trained / "folder" / "split.json").read_text()) | {"scenario": "shelf"}
    (tmp_path / "split.json").write_text(json.dumps(split))
    err = cli_error(stream_detect, eval_argv(trained, "--split", str(tmp_path / "split.json"), "--rate", "1"), capsys)
    assert err == (f"error: --split {tmp_path / 'split.json'}: is the split of scenario 'shelf'; these videos are "
                   "of 'kit'")
    # A folder given as the split: the line named the path without the option it came through.
    err = cli_error(stream_detect, eval_argv(trained, "--split", str(tmp_path), "--rate", "1"), capsys)
    assert err == f"error: --split {tmp_path}: is a folder, expected a split file (its {tmp_path / 'split.json'}?)"


def test_eval_says_when_the_graph_was_learned_from_a_judged_video(trained: Path,
                                                                  capsys: pytest.CaptureFixture[str]) -> None:
    # The fixture's graph learned from every correct recording, test_ok included (test_wrong, marked has_errors,
    # was left out): as for a detector trained on a judged video, the figures are optimistic and the run says so.
    graph = json.loads((trained / "graph.json").read_text())
    assert "test_ok" in graph["info"]["train_videos"] and "test_wrong" not in graph["info"]["train_videos"]
    assert stream_detect(eval_argv(trained, "--split", str(trained / "folder" / "split.json"), "--rate", "1")) == 0
    [line] = [line for line in capsys.readouterr().err.splitlines() if "task graph was learned" in line]
    assert line.startswith(f"warning: {trained / 'graph.json'}: the task graph was learned from 1 of these videos "
                           "(test_ok)")


def test_eval_of_feature_files_refuses_drawing_naming_only_the_option_given(trained: Path, tmp_path: Path,
                                                                           capsys: pytest.CaptureFixture[str]) -> None:
    err = cli_error(stream_detect, eval_argv(trained, "--annotate-out", str(tmp_path / "drawn")), capsys)
    assert err == "error: --annotate-out: draws over video frames; --features files hold features, not video frames"


def test_eval_on_another_split_says_it_is_not_the_detectors(trained: Path, tmp_path: Path,
                                                            capsys: pytest.CaptureFixture[str]) -> None:
    # The advice was "--split or --videos-list picks held-out videos" to a user who had given a --split.
    split = json.loads((trained / "folder" / "split.json").read_text())
    split["train"], split["test"] = split["test"], split["train"]
    (tmp_path / "split.json").write_text(json.dumps(split))
    assert stream_detect(eval_argv(trained, "--split", str(tmp_path / "split.json"), "--rate", "1")) == 0
    [line] = [line for line in capsys.readouterr().err.splitlines() if "the detector was trained on" in line]
    assert line.endswith(f"(--split {tmp_path / 'split.json'} is not the split it was trained with: give that one, "
                         "whose test videos it never saw)")


def test_a_feature_file_rewritten_in_place_is_not_answered_from_the_cache(
        trained: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    # A script that rewrites a recording's features keeps its size, and may keep its time (cp --preserve): the eval
    # cache knew a feature file by size and time, and answered the old recording's figures.
    monkeypatch.setenv("MISTAKE_CACHE", str(tmp_path / "cache"))
    folder = tmp_path / "npy"
    folder.mkdir()
    features = folder / "test_wrong.npy"
    shutil.copy2(trained / "npy" / "test_wrong.npy", features)
    argv = eval_argv(trained, "--features", str(folder))
    argv.remove("--no-cache")
    assert stream_detect(argv) == 0
    assert "(0 from the cache)" in capsys.readouterr().out
    assert stream_detect(argv) == 0
    assert "(1 from the cache)" in capsys.readouterr().out
    stat = features.stat()
    original = np.load(features)
    np.save(features, original[::-1].copy())  # the same size, another recording
    os.utime(features, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    assert features.stat().st_size == stat.st_size and features.stat().st_mtime_ns == stat.st_mtime_ns
    assert stream_detect(argv) == 0
    assert "(0 from the cache)" in capsys.readouterr().out


def test_eval_names_the_annotated_twin_of_an_unannotated_file(tmp_path: Path) -> None:
    # "rec_1.npy" beside an annotation of "rec1": the line named the file alone, and the annotated name with no file
    # was only counted in a warning, so the typo had to be found by comparing the two lists by eye.
    labels = tmp_path / "labels.json"
    labels.write_text(json.dumps({
        "taxonomy": {"kit": {"0": {"name": "open_box", "id": 0}}},
        "annotations": {name: {"scenario": "kit", "segments": [{"step_id": 0, "start_time": 0, "end_time": 1}]}
                        for name in ("rec1", "kept")}}))
    folder = tmp_path / "npy"
    folder.mkdir()
    for name in ("rec_1", "kept"):
        np.save(folder / f"{name}.npy", np.zeros((4, WIDTH), dtype=np.float32))
    with pytest.raises(InputError) as refused:
        annotated_feature_files([str(folder)], load_annotations(labels, learns_graph=False), str(labels))
    assert str(refused.value).endswith("; 'rec_1' and the annotated 'rec1': one recording named two ways? (the "
                                       "annotated name has no feature file): name them alike")


def test_eval_asks_whether_times_far_past_a_file_are_frames(tmp_path: Path) -> None:
    from streaming.offline.eval_run import EvalVideo, check_annotation_fits
    from streaming.offline.eval_scores import AnnotatedSegment

    framed = EvalVideo("rec1", tmp_path / "rec1.npy", (AnnotatedSegment(0, 30.0, 900.0),))
    with pytest.raises(InputError, match=r"another --rate, or are the annotation's times frame numbers \(they must be "
                                         r"seconds\)\?\)$"):
        check_annotation_fits(framed, 40.0, 1.0, "labels.csv")
    short = EvalVideo("rec1", tmp_path / "rec1.npy", (AnnotatedSegment(0, 3.0, 90.0),))  # read at half its rate
    with pytest.raises(InputError, match=r"another --rate\?\)$"):
        check_annotation_fits(short, 40.0, 1.0, "labels.csv")


def as_table(root: Path) -> Path:
    """``labels.json`` as the table a spreadsheet would hold: its steps numbered in sorted name order (fix_part 0,
    open_box 1, take_part 2), not as the JSON's taxonomy numbers them (open_box 0, take_part 1, fix_part 2)."""
    data = json.loads((root / "labels.json").read_text())
    table = root / "labels.csv"
    table.write_text("video,step,start,end,has_errors,scenario\n" + "".join(
        f"{video},{seg['step_name']},{seg['start_time']},{seg['end_time']},{int(seg['has_errors'])},kit\n"
        for video, record in data["annotations"].items() for seg in record["segments"]))
    return table


def test_eval_scores_a_table_against_a_graph_that_numbers_its_steps_otherwise(trained: Path) -> None:
    # The graph and the detector number the steps as labels.json does; the same labels as a table number them in
    # sorted order, and eval compared one step's detections with another's annotation: F1 0, phantom mistakes.
    table = as_table(trained)
    scores = {}
    for labels in (trained / "labels.json", table):
        out = trained / f"eval-{labels.suffix[1:]}.json"
        assert stream_detect(eval_argv(trained, "--annotations", str(labels), "--split",
                                       str(trained / "folder" / "split.json"), "--json", str(out))) == 0
        scores[labels.suffix] = json.loads(out.read_text())
    assert scores[".csv"]["videos"] == scores[".json"]["videos"]
    assert scores[".csv"]["total"] == scores[".json"]["total"]


@pytest.fixture(scope="module")
def from_table(trained: Path) -> Path:
    """Beside ``trained``'s detector and graph (learned from labels.json), the same learned from its table, which
    numbers the steps otherwise: ``table-detector.pt`` and ``graph-from-table.json``."""
    table = as_table(trained)
    assert features_main(["import", "--features", str(trained / "npy"), "--annotations", str(table), "--rate", "1",
                          "--out", str(trained / "table-folder"), "--test-videos", "test_ok,test_wrong"]) == 0
    assert train_main(["--features", str(trained / "table-folder"), "--config", str(trained / "tiny.toml"),
                       "--out", str(trained / "table-detector.pt"), "--quiet"]) == 0
    assert tgml_main(["train", "--annotations", str(table), "--scenario", "kit",
                      "--out", str(trained / "graph-from-table.json")]) == 0
    return trained


def by_name(video: dict) -> tuple[list[tuple[str, float, float]], list[tuple[str, list[str], bool]]]:
    """One video's eval record without its step ids: each step recognised, and each alert with what it says is
    missing, by name."""
    return ([(r["name"], r["start"], r["end"]) for r in video["recognised"]],
            [(a["name"], a["missing_names"], a["retracted"]) for a in video["alerts"]])


@pytest.mark.parametrize(("detector", "graph", "alike"), [
    ("detector.pt", "graph-from-table.json", "graph.json"),
    ("table-detector.pt", "graph.json", "graph-from-table.json")])
def test_eval_matches_a_detector_to_a_graph_numbering_its_steps_otherwise_by_name(
        from_table: Path, capsys: pytest.CaptureFixture[str], detector: str, graph: str, alike: str) -> None:
    # A detector trained on the JSON beside a graph learned from the table (or the other way round) was refused
    # ("number the same steps two ways"): the names say which class is which step, so eval scores the pair as it
    # scores the detector beside the graph numbered as it is.
    scores, errs = {}, {}
    for chosen in (graph, alike):
        out = from_table / f"eval-{detector}-{chosen}.json"
        assert stream_detect(eval_argv(from_table, "--graph", str(from_table / chosen), "--detector",
                                       str(from_table / detector), "--split", str(from_table / "folder" / "split.json"),
                                       "--json", str(out))) == 0
        scores[chosen], errs[chosen] = json.loads(out.read_text()), capsys.readouterr().err
    assert scores[graph]["total"] == scores[alike]["total"]
    assert [by_name(v) for v in scores[graph]["videos"]] == [by_name(v) for v in scores[alike]["videos"]]
    wrong = next(v for v in scores[graph]["videos"] if v["video"] == "test_wrong")
    steps = dict(zip(load_graph(from_table / graph).step_names, load_graph(from_table / graph).step_ids, strict=True))
    assert [(a["step"], a["name"]) for a in wrong["alerts"]] == [(steps["take_part"], "take_part")]
    assert [r["step"] for r in wrong["recognised"]] == [steps[n] for n in ("take_part", "open_box", "fix_part")]
    said = [line for line in errs[graph].splitlines() if "number the same steps two ways" in line]
    assert len(said) == 1 and said[0].startswith("warning: ") and "matched to the graph's steps by name" in said[0]
    assert "two ways" not in errs[alike]


def test_eval_reruns_the_detector_when_another_graph_numbers_its_steps_otherwise(
        from_table: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    # The cache holds the detector's messages, step ids included, and its key leaves out the graph (a new graph
    # reruns only the checker): a detector matched by name to a graph numbering its steps otherwise sends other ids,
    # so a record cached beside the graph numbered as the detector was scored against the other graph's steps.
    monkeypatch.setenv("MISTAKE_CACHE", str(tmp_path / "cache"))
    scores = {}
    for graph, cache in (("graph.json", "--rate"), ("graph-from-table.json", "--rate"),
                         ("graph-from-table.json", "--no-cache")):
        out = tmp_path / f"{graph}{cache}.json"
        argv = ["eval", "--features", str(from_table / "npy"), "--annotations", str(from_table / "labels.json"),
                "--graph", str(from_table / graph), "--detector", str(from_table / "detector.pt"),
                "--split", str(from_table / "folder" / "split.json"), "--quiet", "--json", str(out)]
        assert stream_detect([*argv, *(["--no-cache"] if cache == "--no-cache" else [])]) == 0
        scores[graph, cache] = json.loads(out.read_text())
    capsys.readouterr()
    cached, fresh = scores["graph-from-table.json", "--rate"], scores["graph-from-table.json", "--no-cache"]
    assert [[r["step"] for r in v["recognised"]] for v in cached["videos"]] == [
        [r["step"] for r in v["recognised"]] for v in fresh["videos"]]
    assert cached["total"] == fresh["total"]


def test_a_live_run_of_a_detector_from_the_table_sends_the_json_graphs_step_ids(
        from_table: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # The one-command run (checker process, detector fed the file, JSON lines out), with the probabilistic checker
    # weighing each step's measured evidence: the table numbers take_part 2, the graph 1.
    assert stream_detect(["--features", str(from_table / "npy" / "test_wrong.npy"), "--graph",
                          str(from_table / "graph.json"), "--detector", str(from_table / "table-detector.pt"),
                          "--rate", "1", "--fast", "--jsonl", "--alert-on", "end"]) == 0
    captured = capsys.readouterr()
    lines = [json.loads(line) for line in captured.out.splitlines() if line.startswith("{")]
    assert [(m["step"], m["step_name"]) for m in lines if m["kind"] == "step"] == [
        (1, "take_part"), (0, "open_box"), (2, "fix_part")]
    assert [(m["step"], m["step_name"]) for m in lines if m["kind"] == "alert"] == [(1, "take_part")]
    assert captured.err.count("number the same steps two ways") == 1


def test_a_detector_matched_by_name_keeps_each_steps_evidence(from_table: Path) -> None:
    # The probabilistic checker weighs each step's measured rates: renumbering the classes and not the evidence would
    # weigh fix_part's miss rate as open_box's.
    _, checkpoint = load_detector(from_table / "table-detector.pt")
    graph = load_graph(from_table / "graph.json")
    fitted, lines = detector_for_graph(checkpoint, graph, "table-detector.pt", "graph.json")
    assert len(lines) == 1
    assert dict(zip(fitted.class_names, fitted.class_step_ids, strict=True)) == {
        "background": None, **dict(zip(graph.step_names, graph.step_ids, strict=True))}

    def rates(described: DetectorCheckpoint) -> dict[str, tuple[float, float]]:
        assert described.evidence is not None
        names = dict(zip(described.class_step_ids, described.class_names, strict=True))
        return {names[s]: (m, f) for s, m, f in zip(described.evidence.step_ids, described.evidence.miss_rates,
                                                     described.evidence.false_rates, strict=True)}

    assert rates(fitted) == rates(checkpoint)
    assert detector_for_graph(fitted, graph, "table-detector.pt", "graph.json") == (fitted, [])


def test_a_detector_naming_two_classes_alike_is_not_matched_by_name(
        from_table: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # Which of two classes named take_part is the graph's take_part, the names cannot say: refused, as before.
    model, checkpoint = load_detector(from_table / "detector.pt")
    twice = tmp_path / "twice.pt"
    save_detector(twice, model, ("take_part", *checkpoint.class_names[1:]), (3, *checkpoint.class_step_ids[1:]),
                  checkpoint.feature_extractor, checkpoint.fps, checkpoint.info, checkpoint.scenario)
    line = cli_error(stream_detect, eval_argv(from_table, "--graph", str(from_table / "graph-from-table.json"),
                                              "--detector", str(twice)), capsys)
    assert line == (f"error: --detector {twice} and --graph {from_table / 'graph-from-table.json'} number the same "
                    "steps two ways, and the detector's steps 3 and 1 are both named 'take_part': its classes cannot "
                    "be matched to the graph's steps by name (learn the graph and train the detector from the same "
                    "annotation file)")


def test_eval_refuses_an_annotation_numbering_a_graph_step_otherwise(trained: Path) -> None:
    from streaming.offline.eval_run import graph_numbering

    graph = load_graph(trained / "graph.json")  # open_box 0, take_part 1, fix_part 2
    assert graph_numbering({0: "open_box", 1: "take_part", 2: "fix_part"}, graph, "a.json", "g.json") == {}
    # A taxonomy naming a step twice, the second time under a number the graph lacks: numbered alike, as before.
    assert graph_numbering({0: "open_box", 1: "take_part", 2: "fix_part", 3: "open_box"}, graph, "a.json",
                           "g.json") == {}
    assert graph_numbering({0: "fix_part", 1: "open_box", 2: "take_part"}, graph, "a.csv", "g.json") == {
        0: 2, 1: 0, 2: 1}
    # A table of fewer steps (recordings that never do one) numbers the rest otherwise: each is one of the graph's.
    assert graph_numbering({0: "fix_part", 1: "open_box"}, graph, "a.csv", "g.json") == {0: 2, 1: 0}
    # A step the graph lacks keeps its number, which may be another step's in the graph: not to be scored.
    with pytest.raises(InputError, match=r"--annotations a\.csv and --graph g\.json number the steps differently: "
                                         r"'fix_part' is step 0 in the annotation, step 2 in the graph"):
        graph_numbering({0: "fix_part", 1: "open_box", 2: "polish"}, graph, "a.csv", "g.json")
