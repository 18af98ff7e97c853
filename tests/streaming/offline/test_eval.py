"""``stream-detect eval``: the live chain over annotated videos, scored against the annotations.

The scores are checked against counts made by hand on a small case; the whole command runs on the demo executions
(the real chain: rendered videos, efficientnet-lite0 features, the bundled detector, the checker) in both alert modes.
"""

from __future__ import annotations

import json
import resource
import shutil
import signal
import subprocess
from dataclasses import replace
from pathlib import Path

import cv2
import numpy as np
import pytest
from rich.console import Console

from graphs.checker_settings import CheckerSettings
from graphs.probabilistic_checker import DEFAULT_ALERT_THRESHOLD, DEFAULT_PRIOR_SKIP
from graphs.task_graph import load_graph
from graphs.training_sources import TrainingSources
from recognition.checkpoint import load_detector
from recognition.segment_metrics import TimedSegment, edit_score, levenshtein
from streaming.demo.paths import default_demo_paths
from streaming.demo.procedure import SCENARIO, STEP_IDS, name_of
from streaming.demo.synthetic_video import cache_dir, demo_video
from streaming.offline.eval_run import EvalConfig, EvalVideo, annotated_videos, evaluate, trained_on
from streaming.offline.eval_scores import (
    AnnotatedSegment,
    MistakeCounts,
    RaisedAlert,
    RuleDisagreement,
    VideoRun,
    disagreement_lines,
    eval_table,
    latency_summary,
    rule_disagreements,
    score_video,
    total,
    unmeasured_notes,
)
from streaming.overlay import ALERT_SHOW_S, band_height
from streaming.stream_detect_cli import main as stream_detect
from tests.cli_errors import cli_error
from tests.streaming.helpers import STREAM_DETECT, tea_graph, write_noise_video

# A made-up run of the tea procedure: get_cup, boil_water (before fill_kettle: a mistake under the graph), fill_kettle,
# add_teabag (marked has_errors by the annotator), pour_water, add_milk.
ANNOTATED = (
    AnnotatedSegment(3, 0.0, 10.0), AnnotatedSegment(2, 10.0, 20.0), AnnotatedSegment(1, 20.0, 30.0),
    AnnotatedSegment(4, 30.0, 40.0, has_errors=True), AnnotatedSegment(5, 40.0, 50.0), AnnotatedSegment(6, 50.0, 60.0),
)  # fmt: skip
RECOGNISED = (
    TimedSegment(3, 0.0, 10.0), TimedSegment(2, 10.0, 20.0), TimedSegment(1, 20.0, 30.0),
    TimedSegment(4, 34.0, 40.0),  # IoU 0.6 with its annotated segment
    TimedSegment(5, 46.0, 50.0),  # IoU 0.4
    TimedSegment(5, 50.5, 51.0),  # a spurious pour_water: IoU 0 (inside add_milk)
)  # fmt: skip
ALERTS = (
    RaisedAlert(2, 10.0, 20.0, raised=23.0),  # boil_water: right under the graph, not under has_errors
    RaisedAlert(4, 34.0, 40.0, raised=42.0),  # add_teabag: right under has_errors only
    RaisedAlert(5, 50.5, 51.0, raised=53.0),  # the spurious pour_water: overlaps no pour_water, a false alarm
)


def test_scores_match_a_hand_count() -> None:
    score = score_video(VideoRun("v", ANNOTATED, RECOGNISED, ALERTS, frames=600), tea_graph())
    graph, errors = score.mistakes["graph"], score.mistakes["has_errors"]
    assert (graph.alerts, graph.correct, graph.mistakes, graph.caught) == (3, 1, 1, 1)
    assert (errors.alerts, errors.correct, errors.mistakes, errors.caught) == (3, 1, 1, 1)
    assert graph.precision == pytest.approx(1 / 3) and graph.recall == 1.0 and graph.f1 == pytest.approx(0.5)
    # F1@10: 5 matched (IoU 1, 1, 1, 0.6, 0.4), 1 spurious, add_milk missed: 2*5 / (2*5 + 1 + 1).
    assert score.segments[0.10].f1 == pytest.approx(10 / 12)
    assert score.segments[0.50].f1 == pytest.approx(8 / 12)  # pour_water at 0.4 no longer matches: tp 4, fp 2, fn 2
    # Labels 3 2 1 4 5 5 against 3 2 1 4 5 6: one substitution in six.
    assert score.edit == [pytest.approx(100 * 5 / 6)]
    assert score.latencies == [13.0]  # boil_water started at 10 s, alerted at 23 s


def test_edit_distance_and_latency_summary() -> None:
    assert levenshtein([1, 2, 3], [1, 3]) == 1 and levenshtein([], [4, 5]) == 2 and levenshtein([1, 2], [2, 1]) == 2
    assert levenshtein([5, 1, 2, 3, 4], [1, 2, 3, 4, 6]) == 2
    assert edit_score([], []) == 100.0
    assert latency_summary([1.0, 2.0, 3.0, 4.0, 10.0]) == (3.0, pytest.approx(7.6))
    assert latency_summary([]) == (None, None)


def test_totals_add_counts_and_pool_latencies() -> None:
    one = score_video(VideoRun("a", ANNOTATED, RECOGNISED, ALERTS), tea_graph())
    clean = score_video(VideoRun("b", ANNOTATED[:1], RECOGNISED[:1], ()), tea_graph())
    both = total([one, clean])
    assert both.mistakes["graph"].alerts == 3 and both.mistakes["graph"].mistakes == 1
    assert both.segments[0.10].tp == 6 and both.latencies == [13.0] and len(both.edit) == 2


def test_a_figure_with_nothing_to_count_is_not_measured() -> None:
    assert MistakeCounts().precision is None and MistakeCounts().recall is None and MistakeCounts().f1 is None
    missed = MistakeCounts(alerts=0, correct=0, mistakes=1, caught=0)  # the mistake raised no alert
    assert missed.precision is None and missed.recall == 0.0 and missed.f1 == 0.0
    false_alarm = MistakeCounts(alerts=2, correct=0, mistakes=0, caught=0)
    assert false_alarm.precision == 0.0 and false_alarm.recall is None and false_alarm.f1 is None
    clean = score_video(VideoRun("b", ANNOTATED[:1], RECOGNISED[:1], ()), tea_graph())
    console = Console(width=200, record=True)
    console.print(eval_table([clean], "t"))
    (row,) = [line for line in console.export_text().splitlines() if line.startswith("│ b ")]
    cells = [c.strip() for c in row.strip("│ ").split("│")]
    assert cells[3:9] == ["-"] * 6  # P R F1, P err R err F1 err: no alert, no mistake
    assert unmeasured_notes([clean]) == [
        "no mistake under the graph in the annotated order of the video: R and F1 not measured",
        "no annotated mistake (has_errors) in the video: R err and F1 err not measured",
        "no alert standing at the end in the video: P and P err not measured",
    ]
    # A detector that confirmed no step at all: said, since a high test mAP does not show it.
    silent = score_video(VideoRun("c", ANNOTATED, (), ()), tea_graph())
    assert unmeasured_notes([silent])[-1].startswith("no key-step confirmed in the video: the detector's probabilities")
    assert not any(note.startswith("no key-step") for note in unmeasured_notes([clean]))


def test_segments_where_has_errors_and_the_graph_disagree_are_named() -> None:
    found = rule_disagreements(tea_graph(), "v", ANNOTATED)
    assert [(d.segment, d.step, d.has_errors) for d in found] == [(1, 2, False), (3, 4, True)]
    assert found[0].message == "v: boil_water is not marked has_errors but the graph needs fill_kettle before it"
    assert found[1].message == ("v: add_teabag is marked has_errors but the graph lets it follow get_cup: "
                                "was the graph trained on this video?")  # fmt: skip
    agreeing = [AnnotatedSegment(s.step, s.start, s.end, s.step == 2) for s in ANNOTATED]
    assert rule_disagreements(tea_graph(), "v", agreeing) == []
    # A graph that lists the videos it was learned from (tgml train's train_videos), "v" not among them: no question.
    listed = tea_graph()
    listed.info["train_videos"] = ["w", "x"]
    assert rule_disagreements(listed, "v", ANNOTATED)[1].message.endswith(
        "the graph was learned without this video, so the pre-condition rule does not see this error")
    listed.info["train_videos"] = ["v", "w"]
    assert rule_disagreements(listed, "v", ANNOTATED)[1].message.endswith(
        "the graph was learned from this video (its train_videos), so it takes this order for a correct one")
    # Eval matched it by content (the graph's train_identities): another execution that shares the name "v".
    assert rule_disagreements(listed, "v", ANNOTATED, learned=False)[1].message.endswith(
        "the graph was learned without this video, so the pre-condition rule does not see this error")


def test_disagreements_are_told_once_each_and_the_many_counted() -> None:
    # CaptainCook4D: 25 warning lines on one recipe's 12 recordings, one of them twice word for word (a step done
    # twice in a recording), buried eval's own output.
    found = rule_disagreements(tea_graph(), "v", ANNOTATED)
    twice = [found[0], found[0], found[1]]
    assert disagreement_lines(twice) == [found[0].message, found[1].message]
    many = [RuleDisagreement(f"v{k}", 0, 2, False, f"v{k}: a message") for k in range(8)]
    lines = disagreement_lines(many)
    assert lines[:5] == [f"v{k}: a message" for k in range(5)]
    assert lines[5:] == ["and 3 more segments on which has_errors and the graph disagree (--json lists every one, as "
                         "each video's rule_disagreements)"]


@pytest.fixture(scope="module")
def demo_eval(demo_cache: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict]:
    """``stream-detect eval --demo --json`` in both alert modes: the JSON each one wrote."""
    out = tmp_path_factory.mktemp("eval")
    results = {}
    for mode in ("end", "onset"):
        path = out / f"{mode}.json"
        drawn = ["--annotate-out", str(out / "annotated")] if mode == "onset" else ["--plots", str(out / "plots")]
        assert stream_detect(["eval", "--demo", "--alert-on", mode, "--json", str(path), "--quiet", *drawn]) == 0
        results[mode] = json.loads(path.read_text()) | {"annotated": str(out / "annotated"),
                                                        "plots": str(out / "plots")}
    return results


def test_the_json_says_what_was_recognised_and_why_each_alert_was_right(demo_eval: dict[str, dict]) -> None:
    by_video = {v["video"]: v for v in demo_eval["end"]["videos"]}
    mistake = by_video["demo:mistake"]
    # get_cup, boil_water (too early), fill_kettle, add_teabag, pour_water, add_milk.
    assert [s["name"] for s in mistake["recognised"]][:3] == ["get_cup", "boil_water", "fill_kettle"]
    assert all(0.0 <= s["confidence"] <= 1.0 and s["start"] < s["end"] for s in mistake["recognised"])
    (alert,) = mistake["alerts"]
    assert alert["name"] == "boil_water" and alert["missing_names"] == ["fill_kettle"]
    assert alert["right"] == {"graph": True, "has_errors": True} and not alert["retracted"]
    assert 0.5 <= alert["probability"] < 1.0  # the probabilistic checker, the default: above its alert threshold
    assert 0 <= alert["video_time"] < alert["raised"]
    assert mistake["missed"] == [] and by_video["demo:correct"]["alerts"] == []
    assert alert["stands"] and alert["retraction_reason"] is None
    # What the live view says at the end, word for word, and the checker's verdict on every step, alert or not.
    assert mistake["verdict"] == "1 mistake (boil_water before fill_kettle), nothing missing"
    assert by_video["demo:correct"]["verdict"] == "correct (no mistake, nothing missing)"
    assert by_video["demo:missing"]["verdict"] == "no mistake; never done: add_milk"
    assert by_video["demo:missing"]["never_done"] == ["add_milk"]
    # The demo knows the step it leaves out: the end report is scored against it.
    assert demo_eval["end"]["total"]["missing_steps"] == {"named": 1, "right": 1, "annotated": 1, "precision": 1.0,
                                                          "recall": 1.0, "f1": 1.0, "videos": 3}
    checks = {s["name"]: s["checker"] for s in mistake["recognised"]}
    assert checks["boil_water"]["alerted"] and checks["boil_water"]["p_skipped"] >= 0.5
    assert [p["name"] for p in checks["boil_water"]["preconditions"]] == ["fill_kettle"]
    assert not any(c["alerted"] for name, c in checks.items() if name != "boil_water")
    assert all(c["p_skipped"] < 0.5 for name, c in checks.items() if name != "boil_water")


def test_plots_draw_one_timeline_per_video(demo_eval: dict[str, dict]) -> None:
    plots = sorted(p.name for p in Path(demo_eval["end"]["plots"]).iterdir())
    assert plots == ["demo-correct.png", "demo-missing.png", "demo-mistake.png"]
    assert all((Path(demo_eval["end"]["plots"]) / p).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" for p in plots)


def test_eval_on_the_demo_catches_the_one_mistake_and_recognises_every_step(demo_eval: dict[str, dict]) -> None:
    result = demo_eval["end"]
    by_video = {v["video"]: v for v in result["videos"]}
    assert list(by_video) == ["demo:mistake", "demo:correct", "demo:missing"]
    # By hand: the mistake execution boils water before filling the kettle, the other two make no mistake.
    mistake = by_video["demo:mistake"]["mistakes"]
    assert {rule: (c["alerts"], c["correct"], c["mistakes"]) for rule, c in mistake.items()} == {
        "graph": (1, 1, 1), "has_errors": (1, 1, 1)}
    for video in ("demo:correct", "demo:missing"):
        assert by_video[video]["mistakes"]["graph"]["alerts"] == 0
        assert by_video[video]["mistakes"]["graph"]["mistakes"] == 0
    totals = result["total"]
    assert totals["mistakes"]["graph"]["precision"] == 1.0 and totals["mistakes"]["graph"]["recall"] == 1.0
    assert totals["segment_f1"]["0.5"] == 1.0 and totals["edit"] == 100.0  # 6 + 6 + 5 steps, all recognised
    # The alert of a confirmed step comes once it has ended: after the step's length (2.5-3.5 s in the demo).
    (latency,) = totals["latency_s"]["values"]
    assert 2.0 < latency < 6.0


def test_onset_alerts_come_earlier_than_end_alerts_on_the_demo_mistake(demo_eval: dict[str, dict]) -> None:
    end, onset = (demo_eval[m]["total"] for m in ("end", "onset"))
    assert onset["mistakes"]["graph"]["correct"] == 1 and onset["retracted"] == 0
    assert onset["latency_s"]["median"] < 1.5 < end["latency_s"]["median"]
    assert demo_eval["onset"]["settings"]["segmenter"]["onset_frames"] > 0


def test_a_second_run_reuses_each_videos_cached_result(demo_eval: dict[str, dict]) -> None:
    graph, detector = default_demo_paths()
    result = evaluate(EvalConfig(str(graph), str(detector), demo=True), progress=False)
    assert result.cached == 3
    assert [s.mistakes["graph"].alerts for s in result.scores] == [1, 0, 0]


def test_checker_settings_replay_the_cached_detector_output(
    demo_eval: dict[str, dict], capsys: pytest.CaptureFixture[str]
) -> None:
    # Changing only --checker, --alert-threshold, --prior-skip or --order-rule ran every video again (0 from the
    # cache): the cache held the checker's answers. It holds what the detector published; the checker replays it.
    graph, detector = default_demo_paths()
    probabilities = {}
    for kind in ("probabilistic", "binary"):
        result = evaluate(EvalConfig(str(graph), str(detector), demo=True, checking=CheckerSettings(kind)),
                          progress=False)
        assert result.cached == 3
        (alert,) = result.runs[0].alerts
        probabilities[kind] = alert.probability
    assert probabilities["binary"] == 1.0 > probabilities["probabilistic"]  # each checker's own answer
    # The late-step rule also flags fill_kettle, done after the step that needed it: not a mistake under the graph.
    # A person taken to skip almost never (--prior-skip 0.0001) needs more evidence of the skip than the demo shows.
    for extra, false_alarms in ((["--alert-threshold", "0.99"],
                                 "false alarms: 0 of 1 alert standing at the end (0.00 per video"),
                                (["--prior-skip", "0.0001"],
                                 "false alarms: 0 of 0 alerts standing at the end (0.00 per video"),
                                (["--checker", "binary", "--order-rule", "late-step"],
                                 "false alarms: 1 of 2 alerts standing at the end (0.33 per video")):
        assert stream_detect(["eval", "--demo", "--quiet", *extra]) == 0
        out = capsys.readouterr().out
        assert "(3 from the cache)" in out and false_alarms in out


def test_the_results_say_only_the_checker_settings_that_were_in_effect(demo_eval: dict[str, dict]) -> None:
    # The binary checker's results showed a threshold, a prior and one_alert_per_omission: true, none of which it
    # reads: it alerts each recognition of a step done before its pre-conditions.
    graph, detector = default_demo_paths()
    shown = {kind: evaluate(EvalConfig(str(graph), str(detector), demo=True, checking=CheckerSettings(kind)),
                            progress=False).settings["checker"] for kind in ("probabilistic", "binary")}
    assert shown["binary"] == {"kind": "binary", "order_rule": "precondition"}
    assert shown["probabilistic"] == {"kind": "probabilistic", "alert_threshold": DEFAULT_ALERT_THRESHOLD,
                                      "prior_skip": DEFAULT_PRIOR_SKIP, "one_alert_per_omission": True}


def test_the_table_says_under_it_what_its_columns_mean(demo_eval: dict[str, dict],
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    # P R F1 and P err R err F1 err stood side by side and nothing on screen told them apart: only
    # docs/evaluation.md said which mistakes each set scores against.
    assert stream_detect(["eval", "--demo", "--quiet"]) == 0
    lines = capsys.readouterr().out.splitlines()
    bottom = next(k for k, line in enumerate(lines) if line.startswith("└"))
    end = next(k for k, line in enumerate(lines) if line.startswith("false alarms"))
    legend = lines[bottom + 1 : end]
    assert legend and max(len(line) for line in legend) <= len(lines[bottom])  # no wider than the table above it
    text = " ".join(line.strip() for line in legend)
    assert text.startswith("P, R, F1: precision, recall, F1 (%) of the alerts against the mistakes under the graph")
    assert "; P err, R err, F1 err: the same against the annotation's own mistake labels (has_errors);" in text
    assert "F1@10/25/50, edit: key-step recognition" in text and "; latency: seconds from" in text
    assert not any(line.endswith((" P", " R", " F1")) for line in legend)  # never "P" / "err" on two lines


def test_a_cached_record_with_a_bad_message_is_run_again(demo_eval: dict[str, dict], demo_cache: Path) -> None:
    entries = {entry: entry.read_text() for entry in (demo_cache / "eval").glob("demo_correct-*.json")}
    assert entries  # the fixture's runs stored them
    try:
        for entry, text in entries.items():
            record = json.loads(text)
            keystep = next(m for m in record["messages"] if m["payload"]["kind"] == "keystep")
            keystep["payload"]["confidence"] = 1.5  # a probability out of range, as the wire would refuse it
            entry.write_text(json.dumps(record))
        graph, detector = default_demo_paths()
        warnings: list[str] = []
        result = evaluate(EvalConfig(str(graph), str(detector), demo=True), progress=False, warn=warnings.append)
        assert result.cached == 2
        (warning,) = warnings
        assert "demo_correct-" in warning and "keystep.confidence" in warning
        assert warning.endswith("; running demo:correct again")
        assert evaluate(EvalConfig(str(graph), str(detector), demo=True), progress=False).cached == 3  # stored again
    finally:
        for entry, text in entries.items():
            entry.write_text(text)


def test_videos_list_picks_demo_executions(demo_eval: dict[str, dict]) -> None:
    graph, detector = default_demo_paths()
    config = EvalConfig(str(graph), str(detector), demo=True, names=("demo:missing", "demo:mistake"))
    result = evaluate(config, progress=False)
    assert [run.video for run in result.runs] == ["demo:missing", "demo:mistake"]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--threshold", "1.5"], "--threshold: '1.5' must be a probability"),
        (["--min-frames", "0"], "--min-frames: '0' must be >= 1"),
        (["--alert-on", "later"], "--alert-on: invalid choice"),
        (["--videos-list", "a", "--split", "s.json"], "not allowed with argument"),
        # Ignored without a word with --demo: the demo evaluated all three executions.
        (["--videos-list", "demo:foo"], "--videos-list: demo execution 'demo:foo': not one of the 3 known "
                                        "(demo:mistake, demo:correct, demo:missing)"),
        (["--split", "s.json"], "--split s.json: --demo evaluates the bundled demo executions"),
        (["--videos", "v"], "--videos v: --demo evaluates the bundled demo executions"),
        (["--preview"], "--preview: "),  # no display here, and the headless OpenCV has no window anyway
    ],
)
def test_bad_eval_options_are_one_line_errors(
    args: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert message in cli_error(stream_detect, ["eval", "--demo", *args], capsys)


def test_eval_names_every_missing_option_at_once(capsys: pytest.CaptureFixture[str]) -> None:
    # A bare `stream-detect eval` said "--graph is required"; given --graph, "--detector is required"; then the
    # videos and annotations: four tries to learn what the command needs.
    line = cli_error(stream_detect, ["eval"], capsys)
    assert line == ("error: stream-detect eval: --videos (or --features), --annotations, --graph and --detector are "
                    "required (or --demo)")
    graph, _ = default_demo_paths()
    line = cli_error(stream_detect, ["eval", "--features", "f.npy", "--graph", str(graph)], capsys)
    assert line == "error: stream-detect eval: --annotations and --detector are required (or --demo)"


def test_eval_without_annotations_or_with_a_renamed_graph_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    graph, detector = default_demo_paths()
    line = cli_error(stream_detect, ["eval", "--graph", str(graph), "--detector", str(detector)], capsys)
    assert "--videos (or --features) and --annotations are required" in line
    raw = json.loads(graph.read_text())
    for step in raw["steps"]:
        step["name"] = "cut_bread" if step["name"] == "boil_water" else step["name"]
    other = tmp_path / "renamed.json"
    other.write_text(json.dumps(raw))
    out = tmp_path / "eval.json"
    line = cli_error(stream_detect, ["eval", "--demo", "--graph", str(other), "--json", str(out)], capsys)
    assert "'boil_water' in the detector, 'cut_bread' in the graph" in line
    assert not out.exists()


def test_eval_with_a_graph_that_allows_the_annotated_mistake_warns_and_measures_no_graph_figure(
    demo_cache: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # What a graph learned from the mistaken execution itself looks like: boil_water may follow START.
    graph, _ = default_demo_paths()
    raw = json.loads(graph.read_text())
    raw["edges"] = [e | {"requires": "START"} if e["step"] == 2 else e for e in raw["edges"]]
    allowing = tmp_path / "allowing.json"
    allowing.write_text(json.dumps(raw))
    out = tmp_path / "eval.json"
    assert stream_detect(["eval", "--demo", "--graph", str(allowing), "--json", str(out), "--quiet"]) == 0
    captured = capsys.readouterr()
    assert captured.err.splitlines() == [
        "warning: demo:mistake: boil_water is marked has_errors but the graph lets it follow START: "
        "was the graph trained on this video?"
    ]
    assert "stream-detect eval: 3 videos" in captured.out
    assert "no mistake under the graph in the annotated order of these 3 videos: R and F1 not measured" in captured.out
    # A graph that says it was learned without the video: the question of leakage has its answer.
    raw["info"] = {**raw.get("info", {}), "left_out": {"mistakes": [], "excluded": ["demo:mistake"]}}
    allowing.write_text(json.dumps(raw))
    assert stream_detect(["eval", "--demo", "--graph", str(allowing), "--quiet"]) == 0
    assert capsys.readouterr().err.splitlines() == [
        "warning: demo:mistake: boil_water is marked has_errors but the graph lets it follow START: the graph was "
        "learned without this video, so the pre-condition rule does not see this error"
    ]
    (row,) = [line for line in captured.out.splitlines() if line.startswith("│ total")]
    cells = [c.strip() for c in row.strip("│ ").split("│")]
    assert cells[1] == "0" and cells[3:9] == ["-", "-", "-", "-", "0.0", "0.0"]  # not 100: the mistake was missed
    result = json.loads(out.read_text())
    assert result["total"]["mistakes"]["graph"]["f1"] is None and result["total"]["mistakes"]["has_errors"]["f1"] == 0
    mistake = next(v for v in result["videos"] if v["video"] == "demo:mistake")
    assert [(d["step"], d["has_errors"]) for d in mistake["rule_disagreements"]] == [(2, True)]


def _frames(path: Path) -> list[np.ndarray]:
    capture = cv2.VideoCapture(str(path))
    frames: list[np.ndarray] = []
    while len(frames) < 10_000:
        ok, frame = capture.read()
        if not ok:
            break
        frames.append(frame)
    capture.release()
    return frames


def _red(frame: np.ndarray) -> bool:
    """Whether the bottom band of a BGR frame is the alert's red."""
    b, g, r = frame[-band_height(frame.shape[0]) // 2 :].reshape(-1, 3).mean(axis=0)
    return r > 150 and g < 60 and b < 60


def test_the_annotated_video_shows_the_alert_in_red_from_the_moment_it_was_raised(
    demo_eval: dict[str, dict], demo_cache: Path
) -> None:
    frames = _frames(Path(demo_eval["onset"]["annotated"]) / "demo-mistake.mp4")
    fps = 5.0  # the demo detector's rate: the annotated video has one frame per frame the detector read
    (boil,) = [start for step, start, _ in demo_video("mistake")[1] if step == 2]
    (latency,) = demo_eval["onset"]["total"]["latency_s"]["values"]
    first = round((boil + latency) * fps) - 1  # the frame whose end raised the alert
    assert [_red(f) for f in frames[first - 2 : first + 2]] == [False, False, True, True]
    assert _red(frames[first + int(ALERT_SHOW_S * fps) - 1]) and not _red(frames[first + int(ALERT_SHOW_S * fps) + 1])
    assert not any(_red(f) for f in _frames(Path(demo_eval["onset"]["annotated"]) / "demo-correct.mp4"))
    # The top band is drawn on every frame: dark, over a scene that is not.
    assert all(f[: band_height(f.shape[0]) // 3].mean() < 60 for f in frames)


def demo_folder(folder: Path, videos: dict[str, str]) -> tuple[Path, Path]:
    """A videos folder and annotation file of demo executions under names of one's own: ``{name: execution}``."""
    (folder / "videos").mkdir()
    annotations = {}
    for name, execution in videos.items():
        path, segments = demo_video(execution)
        shutil.copy(path, folder / "videos" / f"{name}.mp4")
        annotations[name] = {"scenario": SCENARIO, "recording_id": name, "segments": [
            {"step_id": s, "start_time": a, "end_time": b, "has_errors": False, "step_name": name_of(s)}
            for s, a, b in segments]}
    taxonomy = {SCENARIO: {str(s): {"id": s, "name": name_of(s)} for s in STEP_IDS}}
    labels = folder / "labels.json"
    labels.write_text(json.dumps({"taxonomy": taxonomy, "annotations": annotations}))
    return folder / "videos", labels


@pytest.mark.usefixtures("demo_cache")
def test_a_video_too_short_for_any_step_is_said_so_not_blamed_on_the_detector(tmp_path: Path) -> None:
    # A fifth of a second, one frame at the demo detector's 5 fps, read "no key-step recognised in 1 frame, so no
    # verdict (is the detector trained for this procedure and this view?)": its segmenter confirms no step under
    # 2 frames (min_run 0.3 s), so no detector could have recognised one in it.
    (tmp_path / "videos").mkdir()
    write_noise_video(tmp_path / "videos" / "short.mp4", frames=6)  # 30 fps
    first = STEP_IDS[0]
    labels = tmp_path / "labels.json"
    labels.write_text(json.dumps({
        "taxonomy": {SCENARIO: {str(s): {"id": s, "name": name_of(s)} for s in STEP_IDS}},
        "annotations": {"short": {"scenario": SCENARIO, "recording_id": "short", "segments": [
            {"step_id": first, "start_time": 0.0, "end_time": 0.2, "has_errors": False, "step_name": name_of(first)}]}},
    }))
    graph, detector = default_demo_paths()
    out = tmp_path / "eval.json"
    assert stream_detect(["eval", "--videos", str(tmp_path / "videos"), "--annotations", str(labels), "--graph",
                          str(graph), "--detector", str(detector), "--json", str(out), "--quiet"]) == 0
    (video,) = json.loads(out.read_text())["videos"]
    assert video["verdict"] == ("no key-step recognised in 1 frame, so no verdict (the recording is shorter than the "
                                "shortest step the segmenter can confirm, 2 frames)")


def test_an_unreadable_video_is_refused_before_any_video_runs(
    demo_cache: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Each video was opened when its turn came: a damaged last video failed after the others had run, and the error
    # named --video, an option eval does not have.
    videos, labels = demo_folder(tmp_path, {"unreadable_a": "correct", "unreadable_b": "missing"})
    (videos / "unreadable_b.mp4").write_bytes(b"not a video, " * 200)
    graph, detector = default_demo_paths()
    line = cli_error(stream_detect, ["eval", "--videos", str(videos), "--annotations", str(labels), "--graph",
                                     str(graph), "--detector", str(detector), "--quiet"], capsys)
    assert line.startswith(f"error: --videos {videos}: unreadable_b.mp4 (annotated video 'unreadable_b'): ")
    assert "--video " not in line
    assert not list((cache_dir() / "eval").glob("unreadable_a-*"))  # refused before the first video ran


def _clip(path: Path, fps: float, frames: int) -> None:
    """A short video of plain frames, growing lighter, at ``fps`` frames a second."""
    writer = cv2.VideoWriter(str(path), cv2.VideoWriter.fourcc(*"mp4v"), fps, (64, 48))
    assert writer.isOpened()
    for k in range(frames):
        writer.write(np.full((48, 64, 3), 15 * k, np.uint8))
    writer.release()


def test_a_video_slower_than_the_detectors_rate_is_warned_of_before_the_runs(
    demo_cache: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # The live run warns of a 2 fps file given to a 5 fps detector (its frames read up to three times over); eval
    # read such videos without a word, and their figures came from frames the detector saw two or three times.
    videos = tmp_path / "videos"
    videos.mkdir()
    _clip(videos / "slow.mp4", 2.0, 6)  # 3 s at 2 fps: below the demo detector's 5
    _clip(videos / "even.mp4", 5.0, 15)  # 3 s at exactly its rate: each frame read once
    segments = [{"step_id": 3, "start_time": 0.0, "end_time": 2.5, "has_errors": False, "step_name": name_of(3)}]
    annotations = {name: {"scenario": SCENARIO, "recording_id": name, "segments": segments}
                   for name in ("slow", "even")}
    labels = tmp_path / "labels.json"
    labels.write_text(json.dumps({"taxonomy": {SCENARIO: {str(s): {"id": s, "name": name_of(s)} for s in STEP_IDS}},
                                  "annotations": annotations}))
    graph, detector = default_demo_paths()
    # Said before the first video runs: no video's result is cached yet when the line comes.
    runs_done: list[int] = []
    evaluate(EvalConfig(str(graph), str(detector), videos=str(videos), annotations=str(labels)), progress=False,
             warn=lambda _: runs_done.append(len([*(cache_dir() / "eval").glob("slow-*"),
                                                  *(cache_dir() / "eval").glob("even-*")])))
    assert runs_done == [0]
    assert stream_detect(["eval", "--videos", str(videos), "--annotations", str(labels), "--graph", str(graph),
                          "--detector", str(detector), "--quiet"]) == 0
    warnings = [line for line in capsys.readouterr().err.splitlines() if line.startswith("warning: ")]
    assert warnings == [
        f"warning: --videos {videos}: slow.mp4 (annotated video 'slow'): 2 frames a second, below the detector's 5: "
        "each frame is read up to 3 times over (the detector learned from frames 1/5 s apart); a detector trained at "
        "2 fps or less reads each frame once"
    ]


def test_a_json_output_naming_one_of_the_videos_is_refused_before_any_video_runs(
    demo_cache: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # The videos are known only once the annotations are read: the output is checked against them then.
    videos, labels = demo_folder(tmp_path, {"kettle": "correct"})
    video = videos / "kettle.mp4"
    before = video.read_bytes()
    graph, detector = default_demo_paths()
    line = cli_error(stream_detect, ["eval", "--videos", str(videos), "--annotations", str(labels), "--graph",
                                     str(graph), "--detector", str(detector), "--json", str(video), "--quiet"],
                     capsys)  # fmt: skip
    assert line == f"error: --json {video}: the results file would overwrite this input file of the run; choose " \
                   "another name"
    assert video.read_bytes() == before


def test_a_video_file_the_annotations_do_not_name_is_said_not_evaluated(demo_cache: Path, tmp_path: Path) -> None:
    # recognition-features warned of it, eval --features refused it, eval --videos left it out without a word.
    videos, labels = demo_folder(tmp_path, {"kettle": "correct"})
    shutil.copy(videos / "kettle.mp4", videos / "video_99.mp4")
    graph, detector = default_demo_paths()
    config = EvalConfig(str(graph), str(detector), videos=str(videos), annotations=str(labels))
    warned: list[str] = []
    assert [v.name for v in annotated_videos(config, load_graph(graph), warned.append)] == ["kettle"]
    assert warned == [f"--videos {videos}: 1 video file that {labels} does not annotate (video_99.mp4): not evaluated"]
    warned.clear()
    annotated_videos(replace(config, names=("kettle",)), load_graph(graph), warned.append)
    assert warned == []  # the videos were named: the others are left out on purpose


def test_a_video_saved_under_another_name_than_its_key_is_named_in_the_error(
    demo_cache: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # With the videos named (--split, --videos-list), the error named only the key: the file that was the video under
    # another name went unmentioned, as no warning on unannotated files is given then.
    videos, labels = demo_folder(tmp_path, {"kettle": "correct"})
    (videos / "kettle.mp4").rename(videos / "Kettle-take1.mp4")
    graph, detector = default_demo_paths()
    line = cli_error(stream_detect, ["eval", "--videos", str(videos), "--annotations", str(labels), "--graph",
                                     str(graph), "--detector", str(detector), "--videos-list", "kettle", "--quiet"],
                     capsys)
    assert line.startswith(f"error: --videos {videos}: no video file for annotated video 'kettle' (looked for ")
    assert line.endswith("; 1 video file of the folder no annotated video names (Kettle-take1.mp4): name each file "
                         "after its annotation key")


@pytest.mark.parametrize("chosen", [True, False], ids=["videos-list", "every-annotated"])
def test_videos_saved_under_other_names_than_their_keys_are_named_in_the_error_of_several(
    chosen: bool, demo_cache: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # The line naming every video without a file dropped what the line of one had said: the folder's files that no
    # annotated video names (with every video named, no warning says them either), the videos under other names.
    videos, labels = demo_folder(tmp_path, {"kettle": "correct", "mug": "missing"})
    (videos / "kettle.mp4").rename(videos / "Kettle-take1.mp4")
    (videos / "mug.mp4").rename(videos / "Mug-take1.mp4")
    graph, detector = default_demo_paths()
    argv = ["eval", "--videos", str(videos), "--annotations", str(labels), "--graph", str(graph), "--detector",
            str(detector), "--quiet", *(["--videos-list", "kettle,mug"] if chosen else [])]
    line = cli_error(stream_detect, argv, capsys)
    assert line.startswith(f"error: --videos {videos}: no video file (.mp4/.avi/.mkv/.mov/.webm) for 2 of the 2 "
                           "recordings "), line
    assert line.endswith("(kettle, mug); 2 video files of the folder no annotated video names (Kettle-take1.mp4, "
                         "Mug-take1.mp4): name each file after its annotation key"), line


def test_videos_the_run_names_without_a_file_are_named_at_once(
    demo_cache: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # One missing video was named a try (the folder copied without three of them: three runs to learn it).
    videos, labels = demo_folder(tmp_path, {"kettle": "correct", "mug": "correct", "pot": "missing"})
    (videos / "mug.mp4").unlink()
    (videos / "pot.mp4").unlink()
    graph, detector = default_demo_paths()
    argv = ["eval", "--videos", str(videos), "--annotations", str(labels), "--graph", str(graph), "--detector",
            str(detector), "--quiet"]
    line = cli_error(stream_detect, [*argv, "--videos-list", "kettle,mug,pot"], capsys)
    assert line == (f"error: --videos {videos}: no video file (.mp4/.avi/.mkv/.mov/.webm) for 2 of the 3 recordings "
                    "--videos-list names (mug, pot)")
    line = cli_error(stream_detect, argv, capsys)
    assert line == (f"error: --videos {videos}: no video file (.mp4/.avi/.mkv/.mov/.webm) for 2 of the 3 recordings "
                    f"annotated in {labels} (mug, pot)")


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--annotate-out", "x.avi"], "--annotate-out x.avi: must end in .mp4"),
        (["--preview"], "--preview: "),
        (["--threshold", "-0.1"], "--threshold: '-0.1' must be a probability"),
        (["--onset-frames", "two"], "--onset-frames: 'two' is not a whole number"),
        # 0 ran with the default 2 in silence: an onset alert needs an announcement
        (["--onset-frames", "0"], "--onset-frames: '0' must be >= 1"),
    ],
)
def test_bad_live_run_options_are_refused_before_the_stream_starts(
    args: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert message in cli_error(stream_detect, ["--video", "demo", "--fast", *args], capsys)


def test_the_live_run_writes_the_annotated_video_too(
    demo_cache: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "live.mp4"
    assert stream_detect(["--video", "demo", "--fast", "--jsonl", "--annotate-out", str(out)]) == 0
    alerts = [json.loads(line) for line in capsys.readouterr().out.splitlines() if '"kind":"alert"' in line]
    frames = _frames(out)
    red = [k for k, f in enumerate(frames) if _red(f)]
    # One alert, printed again when its confirmation changes its probability (the copy received last wins).
    assert {(a["alert_id"], a["step_name"]) for a in alerts} == {(alerts[0]["alert_id"], "boil_water")}
    # One red stretch of ALERT_SHOW_S seconds at the demo detector's 5 frames per second, while boil_water is seen.
    assert len(red) == int(ALERT_SHOW_S * 5) and red == list(range(red[0], red[0] + len(red)))
    (boil,) = [(start, end) for step, start, end in demo_video("mistake")[1] if step == 2]
    assert boil[0] < red[0] / 5 < boil[1]


def test_an_annotated_video_that_could_not_be_written_whole_is_refused_and_the_old_one_kept(
    demo_cache: Path, tmp_path: Path
) -> None:
    # On a full disk OpenCV's writer wrote a file cut short without a word (exit 0, "moov atom not found" when
    # opened), and it took the place of the good video already there. A file-size limit stands for the full disk.
    out = tmp_path / "live.mp4"
    out.write_bytes(b"an earlier video")
    demo_video("mistake")  # rendered into the cache here, not under the limit

    def small_files() -> None:
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit fails (EFBIG) instead of killing
        resource.setrlimit(resource.RLIMIT_FSIZE, (60_000, 60_000))

    run = subprocess.run([*STREAM_DETECT, "--video", "demo", "--fast", "--jsonl", "--annotate-out", str(out)],
                         capture_output=True, text=True, timeout=300, preexec_fn=small_files)
    assert run.returncode == 2, run.stderr
    last = run.stderr.strip().splitlines()[-1]
    assert last == (f"error: --annotate-out {out}: the video was not written whole (0 of 118 frames readable: a full "
                    "disk?); nothing was written there")
    assert out.read_bytes() == b"an earlier video"


def test_eval_names_the_videos_the_detector_was_trained_on() -> None:
    # recognition-train records its training videos in the checkpoint; scores on them say how well it learned them.
    _, checkpoint = load_detector(default_demo_paths()[1])

    def judged(*names: str) -> list[EvalVideo]:
        return [EvalVideo(name, Path(f"{name}.mp4"), ()) for name in names]

    # The bundled detector records names alone (trained before identities were recorded): matched by name.
    assert trained_on(TrainingSources.read(checkpoint.info, "d.pt"), "video",
                      judged("test_00", "train_03", "demo:correct", "train_11"),
                      lambda _: None) == {"train_03": "train_03", "train_11": "train_11"}
    older = TrainingSources.read({}, "d.pt")  # an older checkpoint records none
    assert trained_on(older, "video", judged("train_03"), lambda _: None) == {}
