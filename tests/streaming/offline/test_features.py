"""``recognition-features``: labelled video files in, the MiniROAD folder ``recognition-train`` reads out.

Real video files written with OpenCV (`tests.procedure_videos`); most runs use the fast built-in ``light-v1``
extractor, the backbone itself where its features are what is checked.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import cv2
import numpy as np
import pytest
import torch

from graphs.common.errors import InputError
from recognition.checkpoint import save_detector
from recognition.feature_folders import FeatureConfig, load_feature_dataset, segment_targets
from recognition.model import MiniROAD, MiniROADConfig
from streaming.detector import DetectorConfig, PipelineConfig, build_pipeline, load_detector_for_stream
from streaming.detector.loading import LoadedParts
from streaming.offline.features import MANIFEST
from streaming.offline.features_cli import main
from streaming.readers import ReaderConfig, open_reader
from tests.cli_errors import cli_error
from tests.command_lines import with_options
from tests.procedure_videos import STEPS, VALID_ORDERS, write_execution, write_procedure
from tests.streaming.helpers import KeptMessages

FPS = 2.0


@pytest.fixture(scope="module")
def procedure(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Three executions of the shelf procedure: ``videos/run0..2.mp4`` and ``labels.json``, never modified."""
    folder = tmp_path_factory.mktemp("shelf")
    write_procedure(folder, {f"run{k}": VALID_ORDERS[k] for k in range(3)})
    return folder


@pytest.fixture
def work(procedure: Path, tmp_path: Path) -> Path:
    """A copy of `procedure` a test may change."""
    shutil.copytree(procedure, tmp_path, dirs_exist_ok=True)
    return tmp_path


def args(folder: Path, *extra: str, extractor: str = "light-v1") -> list[str]:
    """A recognition-features command line over ``folder``'s videos and labels, into ``folder/features``; an option
    in ``extra`` replaces the one set here (an option given twice is refused)."""
    return with_options({"--videos": str(folder / "videos"), "--annotations": str(folder / "labels.json"),
                         "--out": str(folder / "features"), "--extractor": extractor, "--fps": str(FPS)},
                        "--quiet", *extra)


def edit_labels(folder: Path, change: object) -> None:
    """Rewrite ``folder/labels.json`` after ``change(data)`` edits it in place."""
    path = folder / "labels.json"
    data = json.loads(path.read_text())
    change(data)  # type: ignore[operator]
    path.write_text(json.dumps(data))


def test_in_an_overlap_the_segment_that_started_last_owns_the_frame() -> None:
    times = np.arange(12) / 2.0  # 0, 0.5, ..., 5.5 s
    # 1 for [0, 5), 2 nested in it for [1, 2), 3 starting inside 1 and ending after it, [4, 5.5)
    targets = segment_targets(times, np.array([0.0, 1.0, 4.0]), np.array([5.0, 2.0, 5.5]), np.array([1, 2, 3]), 4)
    assert targets.argmax(axis=1).tolist() == [1, 1, 2, 2, 1, 1, 1, 1, 3, 3, 3, 0]


def test_an_fps_above_the_videos_own_rate_is_said_in_one_note(work: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # --fps 50 on 10 fps videos ran with every frame extracted five times over, at five times the cost, and no word.
    edit_labels(work, lambda data: data["annotations"].pop("run2"))  # two videos: fast
    (work / "videos" / "run2.mp4").unlink()
    assert main(args(work, "--fps", "25", "--test-fraction", "0.5")) == 0
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["note: --fps 25 is above the frame rate of 2 videos (10 fps: run0, run1): each of their frames is "
                   "extracted up to 3 times over (copies of the same features, at as many times the cost); --fps 10 "
                   "or less reads each frame once"], err
    # At the videos' own rate or below, nothing is said.
    assert main(args(work, "--out", str(work / "at10"), "--fps", "10", "--test-fraction", "0.5")) == 0
    assert capsys.readouterr().err == ""


def test_overlapping_segments_are_extracted_with_one_warning_line(
    work: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _overlap(work)  # run1's second segment starts 0.5 s before its first ends
    assert main(args(work)) == 0
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("warning: ")
    assert "1 segment in 1 video overlaps an earlier one (run1; accepted;" in err[0]  # which video, to look at
    first, second = json.loads((work / "labels.json").read_text())["annotations"]["run1"]["segments"][:2]
    labels = np.load(work / "features" / "target_perframe" / "run1.npy").argmax(axis=1)
    frame = int(np.ceil(second["start_time"] * FPS))  # the first frame of the overlap
    assert frame / FPS < first["end_time"] and labels[frame] == 1 + second["step_id"]


def test_video_files_no_annotation_names_are_named_not_silently_skipped(
    work: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # A key misspelt in the annotation file looks exactly like a video left out on purpose: the run says which.
    shutil.copy(work / "videos" / "run0.mp4", work / "videos" / "run9.MP4")
    (work / "videos" / "notes.txt").write_text("not a video")
    assert main(args(work)) == 0
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f"warning: --videos {work / 'videos'}: 1 video file that {work / 'labels.json'} does not annotate "
                   "(run9.MP4): not used"]


def test_segment_targets_give_each_frame_the_segment_it_shows() -> None:
    times = np.arange(10) / 2.0  # 0, 0.5, ..., 4.5 s
    targets = segment_targets(times, np.array([1.0, 2.5]), np.array([2.0, 4.0]), np.array([2, 1]), 3)
    # start inclusive, end exclusive; background (0) before, between and after
    assert targets.argmax(axis=1).tolist() == [0, 0, 2, 2, 0, 1, 1, 1, 0, 0]
    assert targets.dtype == np.float32 and (targets.sum(axis=1) == 1).all()
    assert (segment_targets(times, np.array([]), np.array([]), np.array([]), 3).argmax(axis=1) == 0).all()


def test_the_folder_is_what_recognition_train_reads(work: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(args(work, "--test-videos", "run2")) == 0
    assert "3 videos in" in capsys.readouterr().out
    data = load_feature_dataset(work / "features", FeatureConfig(rgb="rgb_light-v1"))
    assert [v.name for v in data.train] == ["run0", "run1"] and [v.name for v in data.test] == ["run2"]
    assert data.class_names == ("background", *STEPS.values())
    assert data.class_step_ids == (None, *STEPS)
    assert data.fps == FPS and data.feature_extractor == "light-v1"
    labels = json.loads((work / "labels.json").read_text())["annotations"]
    for video in (*data.train, *data.test):
        with open_reader(str(work / "videos" / f"{video.name}.mp4"), ReaderConfig(fps=FPS)) as reader:
            frames = list(reader)
        assert len(video.features) == len(frames)  # one row per frame the live reader delivers at this rate
        for frame, row in zip(frames, video.targets, strict=True):
            inside = [s for s in labels[video.name]["segments"] if s["start_time"] <= frame.time < s["end_time"]]
            expected = 1 + inside[0]["step_id"] if inside else 0
            assert int(row.argmax()) == expected, (video.name, frame.time)


def test_a_second_run_skips_what_is_done_and_redoes_what_changed(
    work: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(args(work)) == 0
    features = work / "features" / "rgb_light-v1"
    before = {p.name: p.stat().st_mtime_ns for p in features.iterdir()}
    capsys.readouterr()
    assert main(args(work)) == 0
    assert "(0 extracted, 3 already there)" in capsys.readouterr().out
    assert {p.name: p.stat().st_mtime_ns for p in features.iterdir()} == before
    write_execution(work / "videos" / "run1.mp4", VALID_ORDERS[4], seed=7)  # the user re-recorded one video
    edit_labels(work, lambda d: d["annotations"]["run1"].update(segments=d["annotations"]["run1"]["segments"][:1]))
    assert main(args(work)) == 0
    assert "(1 extracted, 2 already there)" in capsys.readouterr().out
    first = json.loads((work / "labels.json").read_text())["annotations"]["run1"]["segments"][0]
    labels = np.load(work / "features" / "target_perframe" / "run1.npy").argmax(axis=1)
    assert (labels[int(first["end_time"] * FPS) + 1:] == 0).all() and labels.any()  # only the one segment left


@pytest.mark.parametrize(("damage", "why"), [
    (lambda a: a.__setitem__((3, 3), np.nan), "non-finite values"),
    (lambda a: a.__setitem__((3, 3), np.inf), "non-finite values"),
    # One column too many: recognition-train refuses a folder of two widths.
    (lambda a: np.concatenate([a, a[:, :1]], axis=1), "{wide} wide, not the folder's {width}")],
    ids=["nan", "inf", "wider"])
def test_a_second_run_extracts_again_a_feature_file_it_cannot_keep(
    work: Path, damage: Callable[[np.ndarray], np.ndarray | None], why: str, capsys: pytest.CaptureFixture[str]
) -> None:
    # It was kept as "already there" (exit 0), and recognition-train refused the folder: the rerun that should repair
    # it left it broken.
    assert main(args(work, "--augment-copies", "1", "--test-videos", "run2")) == 0
    copy = work / "features" / "rgb_light-v1" / "run0.aug1.npy"
    good = np.load(copy)
    damaged = good.copy()
    changed = damage(damaged)
    damaged = damaged if changed is None else changed
    np.save(copy, damaged)
    capsys.readouterr()
    assert main(args(work, "--augment-copies", "1", "--test-videos", "run2")) == 0
    said = why.format(wide=damaged.shape[1], width=good.shape[1])
    assert capsys.readouterr().out.splitlines()[0].endswith(f"; 1 re-extracted: {said} (run0)")
    np.testing.assert_array_equal(np.load(copy), good)
    load_feature_dataset(work / "features", FeatureConfig(rgb="rgb_light-v1"))


def test_another_rate_into_a_folder_is_refused_and_a_resume_keeps_its_rate(
    work: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # --fps 2, then --fps 3 into the same folder replaced every feature file with one warning line (exit 0): a
    # mistyped or forgotten --fps wiped the extraction, and left a detector trained on it expecting the old rate.
    assert main(args(work)) == 0
    capsys.readouterr()
    before = {p: p.read_bytes() for p in (work / "features").rglob("*") if p.is_file()}
    err = cli_error(main, args(work, "--fps", "3"), capsys)
    assert err == (f"error: --fps 3: {work / 'features'} was extracted at 2 frames per second; leave --fps out (or "
                   "give 2) to go on with it, or extract into another --out (remove the folder to extract it again "
                   "at 3)")
    assert {p: p.read_bytes() for p in (work / "features").rglob("*") if p.is_file()} == before
    # Without --fps a run goes on at the folder's rate (the default, 5, is for a new folder).
    assert main([a for a in args(work) if a not in ("--fps", str(FPS))]) == 0
    assert "(0 extracted, 3 already there)" in capsys.readouterr().out
    assert json.loads((work / "features" / "split.json").read_text())["fps"] == FPS


def test_a_split_that_records_no_rate_goes_on_at_the_rate_the_manifest_records(
    work: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # A split.json written by hand or edited may record no "fps": a run without --fps re-extracted every video at 5.
    assert main(args(work)) == 0
    split = work / "features" / "split.json"
    split.write_text(json.dumps({k: v for k, v in json.loads(split.read_text()).items() if k != "fps"}))
    capsys.readouterr()
    assert main([a for a in args(work) if a not in ("--fps", str(FPS))]) == 0
    assert "(0 extracted, 3 already there)" in capsys.readouterr().out
    err = cli_error(main, args(work, "--fps", "3"), capsys)
    assert err.startswith(f"error: --fps 3: {work / 'features'} was extracted at 2 frames per second")


def test_a_folder_below_one_vector_a_second_is_named_not_the_fps_the_user_did_not_give(
    work: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Imported features may run at 0.5 a second; a run into such a folder without --fps said "--fps 0.5: must be ...",
    # an option the user never typed.
    assert main(args(work)) == 0
    split = work / "features" / "split.json"
    split.write_text(json.dumps({**json.loads(split.read_text()), "fps": 0.5}))
    before = {p: p.read_bytes() for p in (work / "features").rglob("*") if p.is_file()}
    capsys.readouterr()
    err = cli_error(main, [a for a in args(work) if a not in ("--fps", str(FPS))], capsys)
    assert err == (f"error: {work / 'features'}: its features run at 0.5 per second, and video is extracted at 1 to "
                   "1000 frames a second; extract into another --out")
    assert {p: p.read_bytes() for p in (work / "features").rglob("*") if p.is_file()} == before


def test_another_rate_beside_another_extractors_features_is_refused(
    work: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # split.json and the targets hold one rate for every rgb_* of the folder: rewritten at a second backbone's rate,
    # the first one's features no longer matched their targets.
    assert main(args(work)) == 0
    before = sorted(p.name for p in (work / "features").rglob("*"))
    err = cli_error(main, args(work, "--fps", "3", extractor="efficientnet-lite0"), capsys)
    assert err == (f"error: --fps 3: {work / 'features' / 'split.json'} records 2 per second, the rate of "
                   "rgb_light-v1/ too; extract at --fps 2 or into another --out")
    assert sorted(p.name for p in (work / "features").rglob("*")) == before


@pytest.mark.parametrize(("manifest", "damage"), [
    ('{"version": 1, "vid', "invalid JSON at line 1"),
    ("[]", "not an extraction manifest of version 1 (an object with 'version' and 'videos'); the videos it records "
           "are extracted again"),
    ('{"version": 1, "videos": {"run0": 3}}', "1 video whose entry is not an object (run0); extracted again"),
])
def test_a_damaged_manifest_is_named_before_its_videos_are_extracted_again(
    manifest: str, damage: str, work: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # The run re-extracted every video (hours on real footage) and said nothing of why.
    assert main(args(work)) == 0
    path = work / "features" / MANIFEST
    path.write_text(manifest)
    capsys.readouterr()
    assert main(args(work)) == 0
    printed = capsys.readouterr()
    lines = printed.err.splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"warning: {path}: ") and damage in lines[0]
    assert "(3 extracted, 0 already there)" in printed.out
    assert main(args(work)) == 0  # the manifest is whole again
    assert capsys.readouterr().err == ""


def test_an_out_folder_of_other_files_is_refused_before_anything_is_written_into_it(
    work: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # `--out ~` or `--out /` scattered rgb_*/, target_perframe/ and split.json among the files already there.
    home = work / "features"
    home.mkdir()
    (home / "notes.txt").write_text("mine")
    (home / "photos").mkdir()
    err = cli_error(main, args(work), capsys)
    assert err == (f"error: --out {home}: holds other files than a feature folder's (notes.txt, photos/) and "
                   "no split.json, so it is no feature folder to resume; give a new or empty folder")
    assert sorted(p.name for p in home.iterdir()) == ["notes.txt", "photos"]
    (home / "notes.txt").unlink()
    (home / "photos").rmdir()
    assert main(args(work)) == 0  # an empty folder is a new feature folder
    (home / "notes.txt").write_text("mine")
    assert main(args(work)) == 0  # and one with a split.json is resumed, whatever else it holds


def test_a_resumed_folder_keeps_its_split(work: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # Run again without --test-videos, the folder's held-out videos were silently redrawn by --test-fraction: a
    # detector trained on the new split had trained on the old test videos.
    split = work / "features" / "split.json"
    assert main(args(work, "--test-videos", "run1")) == 0
    assert main(args(work)) == 0  # a fresh draw of this folder would hold out run2 (seed 0)
    assert json.loads(split.read_text())["test"] == ["run1"]
    assert "(0 extracted, 3 already there)" in capsys.readouterr().out
    line = cli_error(main, args(work, "--test-videos", "run2"), capsys)
    assert "--test-videos run2 holds out run2, but " in line and "split.json (an earlier run's split" in line
    assert "holds out run1: leave --test-videos and --test-fraction out to keep it" in line
    line = cli_error(main, args(work, "--test-fraction", "0.2"), capsys)
    assert line.startswith("error: --test-fraction 0.2 (--seed 0) holds out run2, but ")
    assert main(args(work, "--test-fraction", "0.2", "--seed", "1")) == 0  # the same split: accepted
    # A video no longer annotated changes the split: refused, unless the test videos are named.
    edit_labels(work, lambda d: d["annotations"].pop("run0"))
    line = cli_error(main, args(work), capsys)
    assert "the videos differ from those" in line and "(no longer annotated: run0)" in line
    assert "--test-videos run1 to keep its test videos" in line
    assert main(args(work, "--test-videos", "run1")) == 0
    assert json.loads(split.read_text())["train"] == ["run2"]
    assert json.loads(split.read_text())["test"] == ["run1"]


def test_a_test_video_of_another_scenario_is_named_as_such_not_as_a_typo(work: Path,
                                                                        capsys: pytest.CaptureFixture[str]) -> None:
    # A video of another recipe of the same data set was answered "is not an annotated video of this scenario; did
    # you mean 'run1'?": another video, and no word of why (the import said why; extraction now says it the same way).
    scenario = json.loads((work / "labels.json").read_text())["annotations"]["run0"]["scenario"]

    def move_run0(data: dict[str, Any]) -> None:
        data["taxonomy"]["tent"] = data["taxonomy"][scenario]
        data["annotations"]["run0"]["scenario"] = "tent"

    edit_labels(work, move_run0)
    err = cli_error(main, args(work, "--scenario", scenario, "--test-videos", "run1,run0"), capsys)
    assert err == (f"error: --test-videos: 'run0' is a video of scenario 'tent' in {work / 'labels.json'}, not of "
                   f"{scenario!r}: name test videos of the scenario extracted")
    assert not (work / "features").exists()
    err = cli_error(main, args(work, "--scenario", scenario, "--test-videos", "run9"), capsys)
    assert err.startswith("error: --test-videos: 'run9' is not an annotated video of this scenario")


def test_a_log_gets_a_line_per_video_and_the_summary_counts_the_augmented_copies(
    work: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    command = [a for a in args(work, "--test-videos", "run2", "--augment-copies", "2") if a != "--quiet"]
    assert main(command) == 0  # stderr is captured: not a terminal, so no progress bar
    captured = capsys.readouterr()
    lines = [line for line in captured.err.splitlines() if line.startswith("video ")]
    assert [line.split(":")[0] for line in lines] == ["video 1/3 run0", "video 2/3 run1", "video 3/3 run2"]
    frames = [int(line.split(": ")[1].split()[0]) for line in lines]
    assert "frames + 2 augmented copies in" in lines[0] and "augmented" not in lines[2]  # test videos: no copies
    summary, split = captured.out.strip().splitlines()[-2:]
    # The test videos are named: tgml train --exclude-videos needs them, and a drawn split is said nowhere else.
    assert split == (f"test videos: run2 (in {work / 'features' / 'split.json'}; leave them out of the graph too: "
                     "tgml train --exclude-videos run2)")
    originals, copies = sum(frames), 2 * (frames[0] + frames[1])
    assert (f": {originals} frames of the videos + {copies} of their augmented copies = {originals + copies} frames "
            "at ") in summary
    assert main(command) == 0
    assert [line.split(": ")[1] for line in capsys.readouterr().err.splitlines() if line.startswith("video ")] == [
        f"{n} frames, already there" for n in frames]


def _truncated_avi(path: Path, seconds: float = 20.0, keep: float = 0.6) -> None:
    """An MJPEG AVI whose header announces ``seconds`` of video, cut after ``keep`` of its bytes."""
    writer = cv2.VideoWriter(str(path), cv2.VideoWriter.fourcc(*"MJPG"), 10.0, (160, 120))
    for k in range(int(seconds * 10)):
        writer.write(np.full((120, 160, 3), k % 256, np.uint8))
    writer.release()
    path.write_bytes(path.read_bytes()[: int(path.stat().st_size * keep)])


def test_a_damaged_video_stops_the_run_without_losing_the_videos_before_it(
    work: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (work / "videos" / "run2.mp4").unlink()
    _truncated_avi(work / "videos" / "run2.avi")
    edit_labels(work, lambda d: d["annotations"]["run2"].update(segments=d["annotations"]["run2"]["segments"][:1]))
    line = cli_error(main, args(work, "--reader", "opencv"), capsys)
    assert line.startswith(f"error: {work / 'videos' / 'run2.avi'}: cannot decode source frame")
    assert "the videos extracted before it are kept" in line
    done = json.loads((work / "features" / MANIFEST).read_text())["videos"]
    assert set(done) == {"run0", "run1"}
    assert json.loads((work / "features" / "split.json").read_text())["test"] == ["run2"]  # kept for the next run
    written = {p.name.split(".")[0] for p in (work / "features" / "rgb_light-v1").iterdir()}  # augmented copies too
    assert written == {"run0", "run1"}
    # Trained on before it is finished, the folder is said to be unfinished (it was "RGB features file ... is
    # missing", for the first video only).
    with pytest.raises(InputError) as unfinished:
        load_feature_dataset(work / "features", FeatureConfig(rgb="rgb_light-v1"))
    said = (f"{work / 'features'}: 1 of the 3 videos split.json lists are not all written yet (run2): the extraction "
            "into it did not finish; run recognition-features again with the same options to extract the rest")
    assert str(unfinished.value) == said
    # Stopped within a video: its features written, its targets not yet (the manifest comes last).
    shutil.copy(work / "features" / "rgb_light-v1" / "run1.npy", work / "features" / "rgb_light-v1" / "run2.npy")
    with pytest.raises(InputError) as unfinished:
        load_feature_dataset(work / "features", FeatureConfig(rgb="rgb_light-v1"))
    assert str(unfinished.value) == said
    (work / "features" / "rgb_light-v1" / "run2.npy").unlink()
    (work / "videos" / "run2.avi").unlink()
    write_execution(work / "videos" / "run2.mkv", VALID_ORDERS[2], seed=5)  # the user replaces the broken file
    assert main(args(work, "--reader", "opencv")) == 0
    assert "(1 extracted, 2 already there)" in capsys.readouterr().out


def _delete_video(folder: Path) -> None:
    (folder / "videos" / "run1.mp4").unlink()


def _replace_video(folder: Path, make: Callable[[Path], object]) -> None:
    """``run1.mp4`` replaced by what ``make`` puts at its path (a folder, a link)."""
    video = folder / "videos" / "run1.mp4"
    video.unlink()
    make(video)


def _garbage_video(folder: Path) -> None:
    (folder / "videos" / "run1.mp4").write_bytes(b"\x00not a video" * 100)


def _truncated_video(folder: Path, suffix: str = ".avi") -> None:
    (folder / "videos" / "run1.mp4").unlink()
    _truncated_avi(folder / "videos" / f"run1{suffix}", seconds=30.0, keep=0.5)  # decord reads the 15 s that are there


def test_a_matroska_copy_cut_short_is_named_beside_the_segment_past_its_end(
    work: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Matroska stores no frame count, so an early end is no proof of damage (an audio track may run longer), and the
    # labels were blamed alone: "labels.json: a segment of video 'run1' ends at 16.2 s, after the video".
    _truncated_video(work, ".mkv")
    err = cli_error(main, args(work), capsys)
    assert err.startswith(f"error: {work}/videos/run1.mkv: its video ends at ")
    assert "before the 30.0 s its container gives, and a segment of video 'run1' ends at" in err
    assert err.endswith(": a copy cut short?")


def _segment(folder: Path, index: int = 2, **fields: object) -> None:
    edit_labels(folder, lambda d: d["annotations"]["run1"]["segments"][index].update(fields))


def _overlap(folder: Path) -> None:
    def change(data: dict) -> None:
        first, second = data["annotations"]["run1"]["segments"][:2]
        second["start_time"] = first["end_time"] - 0.5

    edit_labels(folder, change)


def _empty_file(folder: Path) -> None:
    (folder / "labels.json").write_text("")


def _no_videos(folder: Path) -> None:
    edit_labels(folder, lambda d: d.update(annotations={}))


def _out_under_a_file(folder: Path) -> None:
    (folder / "features").write_text("a file where the folder should go")


BAD_INPUT = {
    "missing-video": (_delete_video, [], "--videos {f}/videos: no video file for annotated video 'run1' (looked for"),
    # It named only the key, not the file beside it that no key names: the video saved under another name.
    "video-under-another-name": (lambda f: (f / "videos" / "run1.mp4").rename(f / "videos" / "run_1.mp4"), [],
                                 "'run1' (looked for run1.mp4, run1.avi, run1.mkv, run1.mov, run1.webm); 1 video file "
                                 "of the folder no annotated video names (run_1.mp4): name each file after its "
                                 "annotation key"),
    # The three below said "no video file for annotated video 'run1' (looked for run1.mp4, ...)", beside run1.mp4.
    "video-is-a-folder": (lambda f: _replace_video(f, Path.mkdir), [],
                          "--videos {f}/videos: run1.mp4 (annotated video 'run1'): a folder, expected a video file"),
    "video-links-to-a-device": (lambda f: _replace_video(f, lambda p: p.symlink_to("/dev/zero")), [],
                                "run1.mp4 (annotated video 'run1'): a character device, expected a video file"),
    "video-links-to-nothing": (lambda f: _replace_video(f, lambda p: p.symlink_to(f / "gone.mp4")), [],
                               "run1.mp4 (annotated video 'run1'): a link to no file, expected a video file"),
    "unreadable-video": (_garbage_video, [], "{f}/videos/run1.mp4: OpenCV cannot open it"),
    # It blamed the labels ("labels.json: a segment of video 'run1' ends at 16.2 s, after the video"), while
    # stream-detect and eval call the same file truncated.
    "truncated-video": (_truncated_video, [], "{f}/videos/run1.avi: cannot decode source frame"),
    "ends-after-video": (lambda f: _segment(f, -1, end_time=99.0), [], "video 'run1' ends at 99 s, after the video"),
    "ends-before-start": (lambda f: _segment(f, end_time=1.0), [], "segments[2] ends at 1 s, before it starts"),
    "unknown-step": (lambda f: _segment(f, step_id=42), [], "segments[2].step_id = 42 is not in the 'shelf' taxonomy"),
    "empty-file": (_empty_file, [], "labels.json"),
    "no-videos": (_no_videos, [], "no annotated video (field 'annotations' is empty)"),
    "empty-test-split": (lambda f: None, ["--test-fraction", "0.1"], "--test-fraction 0.1 of 3 videos: the test split"),
    "all-test": (lambda f: None, ["--test-videos", "run0,run1,run2"], "no video would be left for training"),
    "unknown-test-video": (lambda f: None, ["--test-videos", "run9"], "'run9' is not an annotated video"),
    "out-is-a-file": (_out_under_a_file, [], "{f}/features: is a file, expected the feature folder"),
    "bad-fps": (lambda f: None, ["--fps", "0"], "--fps: 0: must be a number of frames per second in 1..1000"),
    "unknown-extractor": (lambda f: None, ["--extractor", "resnet"], "--extractor 'resnet': not one of the"),
}


@pytest.mark.parametrize("case", list(BAD_INPUT))
def test_bad_input_is_one_error_line_before_any_frame_is_decoded(
    case: str, work: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    damage, extra, message = BAD_INPUT[case]
    damage(work)
    line = cli_error(main, args(work, *extra), capsys)
    assert message.format(f=work) in line
    features = work / "features"
    assert not features.is_dir() or not any(features.iterdir())


def test_a_refused_run_leaves_an_earlier_extraction_as_it_was(work: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(args(work)) == 0
    files = {p: p.read_bytes() for p in (work / "features").rglob("*") if p.is_file()}
    _segment(work, -1, end_time=99.0)
    assert "after the video" in cli_error(main, args(work), capsys)
    assert {p: p.read_bytes() for p in (work / "features").rglob("*") if p.is_file()} == files


def test_several_scenarios_need_a_choice(work: Path, capsys: pytest.CaptureFixture[str]) -> None:
    def add_scenario(data: dict) -> None:
        data["taxonomy"]["tent"] = {"0": {"id": 0, "name": "unfold"}}
        data["annotations"]["tent_01"] = {"scenario": "tent", "recording_id": "tent_01",
                                          "segments": [{"step_id": 0, "start_time": 0.0, "end_time": 1.0}]}

    edit_labels(work, add_scenario)
    assert "holds several scenarios (shelf, tent); choose one with --scenario" in cli_error(main, args(work), capsys)
    # A misspelt one is named with the file's scenarios (it was "no annotated video of scenario 'shelv'").
    line = cli_error(main, args(work, "--scenario", "shelv"), capsys)
    assert "scenario 'shelv': not one of the 2 known (shelf, tent)" in line
    assert main(args(work, "--scenario", "shelf")) == 0


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has CUDA")
def test_cuda_without_cuda_is_one_error_line(work: Path, capsys: pytest.CaptureFixture[str]) -> None:
    line = cli_error(main, args(work, "--device", "cuda", extractor="efficientnet-lite0"), capsys)
    assert line.startswith("error: --device cuda: torch") and "sees no CUDA device" in line


def test_offline_features_are_the_features_the_live_detector_computes(
    work: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The same file gives the same frames and the same features in recognition-features and stream-detect."""
    assert main(args(work, "--threads", "2", extractor="efficientnet-lite0")) == 0
    offline = np.load(work / "features" / "rgb_efficientnet-lite0" / "run0.npy")  # computed 4 frames at a time
    split = json.loads((work / "features" / "split.json").read_text())
    detector = work / "detector.pt"  # untrained weights: only the features are compared
    model = MiniROAD(MiniROADConfig(offline.shape[1], 16, 16, len(split["class_names"]), 0.0))
    save_detector(detector, model, split["class_names"], split["class_step_ids"], split["feature_extractor"], FPS)
    parts = LoadedParts(None, *load_detector_for_stream(detector, None, threads=2))
    live: list[np.ndarray] = []
    reader = open_reader(str(work / "videos" / "run0.mp4"), ReaderConfig(fps=parts.checkpoint.fps))
    config = PipelineConfig(detector=DetectorConfig(heartbeat_s=60.0), publish=False)
    with build_pipeline(config, parts=parts, readers=[reader], sinks=[lambda _: KeptMessages()],
                        observers=[lambda _: lambda frame, features, probs: live.append(features.copy())]) as run:
        run.run()  # one frame at a time
    assert len(live) == len(offline) > 10
    np.testing.assert_allclose(np.stack(live), offline, rtol=1e-4, atol=1e-4)


def test_augmented_copies_are_written_for_training_videos_and_resumed(
    work: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(args(work, "--test-videos", "run2", "--augment-copies", "2")) == 0
    folder = work / "features"
    data = load_feature_dataset(folder, FeatureConfig(rgb="rgb_light-v1"))
    assert [len(v.copies) for v in data.train] == [2, 2] and not data.test[0].copies
    assert not (folder / "rgb_light-v1" / "run2.aug1.npy").exists()  # the test video is never augmented
    first, copies = data.train[0].features, data.train[0].copies
    assert copies[0].shape == first.shape and not np.allclose(copies[0], first)
    assert not np.allclose(copies[0], copies[1])
    capsys.readouterr()
    assert main(args(work, "--test-videos", "run2", "--augment-copies", "2")) == 0  # the same copies: resumed
    assert "(0 extracted, 3 already there)" in capsys.readouterr().out
    (folder / "rgb_light-v1" / "run0.aug2.npy").unlink()  # a lost copy is extracted again, identically
    assert main(args(work, "--test-videos", "run2", "--augment-copies", "2")) == 0
    assert "(1 extracted, 2 already there)" in capsys.readouterr().out
    again = load_feature_dataset(folder, FeatureConfig(rgb="rgb_light-v1")).train[0].copies
    np.testing.assert_array_equal(again[1], copies[1])
    err = cli_error(main, args(work, "--augment-copies", "-1"), capsys)
    assert err.startswith("error: --augment-copies -1")


def test_the_help_states_the_default_number_of_copies_and_test_share(capsys: pytest.CaptureFixture[str]) -> None:
    from recognition.feature_folders import DEFAULT_TEST_FRACTION
    from streaming.offline.features import DEFAULT_COPIES

    with pytest.raises(SystemExit):
        main(["--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert f"default {DEFAULT_COPIES}, 0: none" in text
    assert f"held out (default {DEFAULT_TEST_FRACTION:g}); an existing --out folder keeps its split" in text


def test_one_video_file_under_two_names_is_found_once_and_two_files_are_refused(tmp_path: Path) -> None:
    # A case-insensitive file system (macOS's) finds run1.mp4 as run1.MP4 too: one file, which used to be refused as
    # "several files". A hard link is the same one file under two names on any file system.
    from graphs.common.errors import InputError
    from streaming.offline.features import find_video

    video = tmp_path / "run1.mp4"
    video.write_bytes(b"video")
    (tmp_path / "run1.MP4").hardlink_to(video)
    assert find_video(tmp_path, "run1").stat().st_ino == video.stat().st_ino
    (tmp_path / "run1.mkv").write_bytes(b"another video")
    with pytest.raises(InputError, match=r"several files for video 'run1' \(run1.mkv, run1.mp4\)"):
        find_video(tmp_path, "run1")


def test_a_video_ending_in_mixed_case_is_found(tmp_path: Path) -> None:
    # run1.Mp4 (a camera's or a renaming tool's spelling) was found on macOS, whose file system ignores case, and not
    # on Linux, where the error said "no video file for annotated video 'run1' (looked for run1.mp4, ...)" beside it,
    # and no warning named it either (its name without the ending is an annotated one).
    from streaming.offline.features import find_video

    video = tmp_path / "run1.Mp4"
    video.write_bytes(b"video")
    assert find_video(tmp_path, "run1") == video
    (tmp_path / "run1.mkv").write_bytes(b"another video")
    with pytest.raises(InputError, match=r"several files for video 'run1' \(run1.Mp4, run1.mkv\)"):
        find_video(tmp_path, "run1")


def test_extracting_into_a_folder_of_imported_features_says_that_training_now_reads_the_extracted_ones(
    work: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # One folder may hold several extractors' features; split.json names the latest, which recognition-train reads
    # without --config. An extraction over an import (or the reverse) changed that without a word.
    assert main(args(work)) == 0
    npy = work / "npy"
    npy.mkdir()
    for path in (work / "features" / "rgb_light-v1").glob("run?.npy"):
        shutil.copy(path, npy / path.name)
    assert main(["import", "--features", str(npy), "--annotations", str(work / "labels.json"), "--rate", str(FPS),
                 "--name", "mine", "--out", str(work / "features")]) == 0
    assert capsys.readouterr().err.strip() == (
        f"note: {work / 'features'} held light-v1 features (rgb_light-v1/, kept); its split.json now names mine: "
        "recognition-train without --config trains on rgb_mine/")
    assert main(args(work)) == 0
    assert capsys.readouterr().err.strip() == (
        f"note: {work / 'features'} held mine features (rgb_mine/, kept); its split.json now names light-v1: "
        "recognition-train without --config trains on rgb_light-v1/")


@pytest.mark.parametrize(("option", "typo", "meant"), [("--scenario", "shelv", "shelf"),
                                                       ("--extractor", "light-v2", "light-v1")])
def test_a_misspelt_scenario_or_extractor_is_refused_with_the_name_meant(
    option: str, typo: str, meant: str, work: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Refused with the list alone (and the scenario without the option that named it): the name meant was to be
    # found in it.
    line = cli_error(main, args(work, option, typo), capsys)
    assert line.startswith(f"error: {option}") and typo in line
    assert line.endswith(f"; did you mean {meant!r}?")
    assert not (work / "features" / "split.json").exists()
