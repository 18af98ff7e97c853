"""``stream-detect eval`` knows the videos a detector was trained on, and a graph learned from, by their content.

Real files throughout: shelf videos written with OpenCV, their features extracted (``recognition-features``, the fast
``light-v1`` extractor), a tiny detector trained on them (``recognition-train``), a graph learned from their
annotations (``tgml train``), and eval run as a user runs it.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import torch

from recognition.recognition_train_cli import main as train_main
from streaming.offline.features_cli import main as features_main
from streaming.stream_detect_cli import main as stream_detect
from tests.cli_errors import cli_error
from tests.procedure_videos import VALID_ORDERS, annotation_file, write_execution, write_procedure

TINY = """
[features]
rgb = "rgb_light-v1"
extractor = "light-v1"
[model]
embed_dim = 16
hidden_dim = 16
motion_lag_s = 0.0
[train]
window_s = 10.0
batch_size = 2
epochs = 2
seed = 1
threads = 1
val_fraction = 0.0
"""


@pytest.fixture(scope="module")
def learned(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Three shelf executions (``run0`` .. ``run2``), a detector trained on ``run0`` and ``run1`` and a graph learned
    from all three; never modified (a test that edits a file writes its own copy)."""
    root = tmp_path_factory.mktemp("learned")
    write_procedure(root, {f"run{k}": VALID_ORDERS[k] for k in range(3)})
    assert features_main(["--videos", str(root / "videos"), "--annotations", str(root / "labels.json"), "--out",
                          str(root / "features"), "--extractor", "light-v1", "--fps", "2", "--test-videos", "run2",
                          "--quiet"]) == 0
    (root / "tiny.toml").write_text(TINY)
    assert train_main(["--features", str(root / "features"), "--config", str(root / "tiny.toml"), "--out",
                       str(root / "detector.pt"), "--quiet"]) == 0
    assert json.loads((root / "features" / "split.json").read_text())["train"] == ["run0", "run1"]
    # tgml's own command line, as the user runs it
    from tgml.tgml_cli import main as tgml_main

    assert tgml_main(["train", "--annotations", str(root / "labels.json"), "--scenario", "shelf", "--out",
                      str(root / "graph.json")]) == 0
    return root


def judged(folder: Path, videos: dict[str, tuple[Path, list[tuple[int, float, float]]]]) -> tuple[Path, Path]:
    """A videos folder and annotation file for eval: ``{name: (video file, its segments)}``, each file copied in."""
    (folder / "videos").mkdir(parents=True)
    for name, (path, _) in videos.items():
        shutil.copy(path, folder / "videos" / f"{name}.mp4")
    labels = folder / "labels.json"
    labels.write_text(json.dumps(annotation_file({name: segments for name, (_, segments) in videos.items()})))
    return folder / "videos", labels


def segments_of(labels: Path, name: str) -> list[tuple[int, float, float]]:
    """A video's segments as `annotation_file` takes them, read from an annotation file."""
    return [(s["step_id"], s["start_time"], s["end_time"])
            for s in json.loads(labels.read_text())["annotations"][name]["segments"]]


def warnings_of(learned: Path, videos: Path, labels: Path, capsys: pytest.CaptureFixture[str],
                detector: Path | None = None, graph: Path | None = None) -> list[str]:
    """The lines of ``stream-detect eval`` that say a detector was trained on, or a graph learned from, a video."""
    assert stream_detect(["eval", "--videos", str(videos), "--annotations", str(labels), "--graph",
                          str(graph or learned / "graph.json"), "--detector", str(detector or learned / "detector.pt"),
                          "--no-cache", "--quiet", "--checker", "binary"]) == 0
    return [line for line in capsys.readouterr().err.splitlines()
            if "the detector was trained on" in line or "the task graph was learned from" in line]


def test_a_renamed_copy_of_a_training_video_is_said_to_be_one(
    learned: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Known by name only, run0 copied as take7 (its annotation with it) was judged as a video the detector and the
    # graph had never seen, and its figures were taken for held-out ones.
    videos, labels = judged(tmp_path, {"take7": (learned / "videos" / "run0.mp4",
                                                 segments_of(learned / "labels.json", "run0"))})
    assert warnings_of(learned, videos, labels, capsys) == [
        f"warning: {learned / 'detector.pt'}: the detector was trained on 1 of these videos (take7 (a copy of run0)): "
        "their figures say how well it learned them, not how well it recognises new ones (--split or --videos-list "
        "picks held-out videos)",
        f"warning: {learned / 'graph.json'}: the task graph was learned from 1 of these videos (take7 (annotated "
        "exactly as run0)): an order it learned from them is never a mistake under it, so their figures are "
        "optimistic (tgml train --exclude-videos leaves the judged videos out)",
    ]


def test_new_footage_under_a_training_videos_name_is_not_taken_for_it_unless_the_files_record_names_alone(
    learned: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # New footage named run0 (another execution, other frames, its own annotation) was said to be the training video
    # of that name, by the detector's and the graph's warnings alike.
    fresh = tmp_path / "fresh.mp4"
    segments = write_execution(fresh, VALID_ORDERS[4], seed=99)
    videos, labels = judged(tmp_path / "new", {"run0": (fresh, segments)})
    assert warnings_of(learned, videos, labels, capsys) == []
    # A detector and a graph written before identities were recorded know their videos by name alone: as before.
    raw = torch.load(learned / "detector.pt", weights_only=False)
    assert set(raw["info"]["train_identities"]) == {"run0", "run1"}
    del raw["info"]["train_identities"]
    older_detector = tmp_path / "older.pt"
    torch.save(raw, older_detector)
    graph = json.loads((learned / "graph.json").read_text())
    del graph["info"]["train_identities"]
    older_graph = tmp_path / "older.json"
    older_graph.write_text(json.dumps(graph))
    lines = warnings_of(learned, videos, labels, capsys, older_detector, older_graph)
    assert [line.split(": ")[1] for line in lines] == [str(older_detector), str(older_graph)]
    assert all("of these videos (run0): " in line for line in lines)


@pytest.mark.parametrize(
    ("what", "damage", "field"),
    [
        ("detector", {"run0": {"video": "not a digest"}}, 'info.train_identities["run0"].video = "not a digest"'),
        ("graph", ["run0"], "info.train_identities = [\"run0\"]"),
    ],
)
def test_a_damaged_record_of_identities_is_one_error_naming_the_file_and_field(
    what: str, damage: object, field: str, learned: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    videos, labels = judged(tmp_path, {"run2": (learned / "videos" / "run2.mp4",
                                                segments_of(learned / "labels.json", "run2"))})
    detector, graph = learned / "detector.pt", learned / "graph.json"
    if what == "detector":
        raw = torch.load(detector, weights_only=False)
        raw["info"]["train_identities"] = damage
        detector = tmp_path / "damaged.pt"
        torch.save(raw, detector)
    else:
        data = json.loads(graph.read_text())
        data["info"]["train_identities"] = damage
        graph = tmp_path / "damaged.json"
        graph.write_text(json.dumps(data))
    line = cli_error(stream_detect, ["eval", "--videos", str(videos), "--annotations", str(labels), "--graph",
                                     str(graph), "--detector", str(detector), "--no-cache", "--quiet", "--checker",
                                     "binary"], capsys)
    damaged = detector if what == "detector" else graph
    assert line.startswith(f"error: {damaged}: {field} must map each training video to {{kind: identity}}"), line
