"""`stream-detect` refuses bad input with one line on stderr and exit status 2, never a traceback."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import zmq

from graphs.task_graph import save_graph
from streaming.cli import main
from streaming.pipeline import default_demo_paths
from tests.streaming.helpers import tea_graph

GRAPH, DETECTOR = default_demo_paths()


@pytest.fixture(autouse=True)
def _demo_videos_in_a_temporary_cache(demo_cache: Path) -> None:
    """Never render demo videos into the user's cache from tests."""


def refused(capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    """Run the command, assert exit 2 and a single stderr line; return that line."""
    with pytest.raises(SystemExit) as exit_info:
        main(list(argv))
    assert exit_info.value.code == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: ") and "\n" not in err and "Traceback" not in err
    return err


def test_unopenable_video_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "clip.mp4"
    bad.write_text("not a video at all")
    line = refused(capsys, "--video", str(bad), "--graph", str(GRAPH), "--detector", str(DETECTOR), "--jsonl")
    assert "clip.mp4" in line


def test_missing_camera(capsys: pytest.CaptureFixture[str]) -> None:
    line = refused(capsys, "--video", "cam57", "--graph", str(GRAPH), "--detector", str(DETECTOR), "--jsonl")
    assert "cam57" in line and "camera" in line


def test_graph_that_is_not_a_dag(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    data = tea_graph().to_dict()
    data["edges"] += [{"step": 1, "requires": 6}]  # 6 -> 5 -> 2 -> 1 -> 6
    path = tmp_path / "cyclic.json"
    path.write_text(json.dumps(data))
    line = refused(capsys, "--video", "demo", "--graph", str(path), "--jsonl")
    assert "cyclic.json" in line and "cycle" in line


def test_detector_classes_that_do_not_match_the_graph(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    graph = tea_graph()
    data = graph.to_dict()
    data["steps"][0]["id"] = 99  # the detector knows step 1, this graph calls it 99
    data["edges"] = [e for e in data["edges"] if 1 not in (e["step"], e["requires"])]
    path = tmp_path / "other.json"
    path.write_text(json.dumps(data))
    line = refused(capsys, "--video", "demo", "--graph", str(path), "--jsonl")
    assert "classes [1]" in line and "[99]" in line


@pytest.mark.parametrize("command", ["checker", "run"])
def test_busy_port(command: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    ctx = zmq.Context()
    try:
        sock = ctx.socket(zmq.SUB)
        sock.setsockopt(zmq.LINGER, 0)
        port = sock.bind_to_random_port("tcp://127.0.0.1")
        graph = tmp_path / "tea.json"
        save_graph(tea_graph(), graph)
        args = ["--bind", f"tcp://127.0.0.1:{port}", "--publish", "tcp://127.0.0.1:0"]
        if command == "run":
            args += ["--video", "demo", "--jsonl"]
        else:
            args += ["--graph", str(graph)]
        line = refused(capsys, command, *args)
        assert str(port) in line and "already in use" in line
    finally:
        ctx.destroy(linger=0)


def test_real_video_needs_a_detector(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    line = refused(capsys, "--video", "cam0", "--graph", str(GRAPH))
    assert "--detector" in line


def test_bad_stream_id(capsys: pytest.CaptureFixture[str]) -> None:
    line = refused(capsys, "--video", "demo", "--stream-id", "no spaces allowed", "--jsonl")
    assert "stream" in line
