"""Writes never destroy and never go elsewhere: every command that writes refuses a device node, FIFO, socket,
folder or symbolic link at its output (a link is never written through, given directly or planted inside an output
folder), and a secret key is created with O_EXCL | O_NOFOLLOW and mode 0600.

`tgml train --out /dev/full`, run as root, replaced the device with a regular file; a link planted in an output
folder sent features, eval cache entries and annotated videos to where it pointed, and ``stream-detect keys --force``
wrote a secret key into whatever file ``checker.key_secret`` pointed to. CI runs as root, so these tests never aim a
writer at a real device: the device node is made with ``mknod`` in a temporary folder (root only; skipped otherwise),
and the real ``/dev/null`` is only ever examined (`output_target`), never handed to a writer.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import stat
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np
import pytest

from graphs.common.errors import InputError
from graphs.common.files import SECRET_MODE, atomic_path, check_output, output_target, write_bytes, write_text
from graphs.task_graph import load_graph, save_graph
from recognition.checkpoint import load_detector, save_detector
from recognition.recognition_train_cli import main as recognition_train
from streaming.demo.paths import DEMO_DIR, default_demo_paths
from streaming.offline.features_cli import main as recognition_features
from streaming.stream_detect_cli import main as stream_detect
from tests.cli_errors import cli_error
from tgml.bench.prego_bench_cli import main as prego_bench
from tgml.tgml_cli import main as tgml

ROOT = Path(__file__).resolve().parents[1]
GRAPH, DETECTOR = default_demo_paths()
ANNOTATIONS = DEMO_DIR / "demo_annotations.json"
KINDS = ("fifo", "socket", "folder", "device", "link-to-fifo", "link-to-device")
IS_KIND = {"fifo": stat.S_ISFIFO, "socket": stat.S_ISSOCK, "folder": stat.S_ISDIR, "device": stat.S_ISCHR}


@pytest.fixture
def special(tmp_path: Path) -> Iterator[Callable[[str, str], Path]]:
    """Make a non-regular file of a kind at ``tmp_path/<name>``; sockets stay bound for the test."""
    sockets: list[socket.socket] = []

    def make(kind: str, name: str) -> Path:
        path = tmp_path / name
        base = kind.removeprefix("link-to-")
        target = tmp_path / f"real-{name}" if kind != base else path
        if base == "fifo":
            os.mkfifo(target)
        elif base == "socket":
            sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            sock.bind(str(target))
            sockets.append(sock)
        elif base == "folder":
            target.mkdir()
        elif base == "device":
            if os.geteuid() != 0:
                pytest.skip("a device node can only be made as root (CI runs as root)")
            try:  # the null device's numbers, in a temporary folder: nothing real is at stake
                os.mknod(target, stat.S_IFCHR | 0o600, os.makedev(1, 3))
            except PermissionError:
                pytest.skip("this container forbids mknod")
        if target != path:
            path.symlink_to(target)
        return path

    yield make
    for sock in sockets:
        sock.close()


def unchanged(path: Path, kind: str) -> bool:
    """The node (and its link, for a link) is still what the test made."""
    base = kind.removeprefix("link-to-")
    return (path.is_symlink() == (kind != base)) and IS_KIND[base](os.stat(path).st_mode)


def commands(tmp_path: Path) -> dict[str, tuple[Callable[[list[str]], object], Callable[[Path], list[str]], str]]:
    """Every command that writes a file: its main, its argv for an output path, and the output's file name."""
    frames = tmp_path / "frames.json"
    frames.write_text(json.dumps({"v1": {"pred": [1, 1, 2], "gt": [1, 1, 2]}}))
    config = ROOT / "configs" / "miniroad-tiny.toml"
    return {
        "tgml train --out": (tgml, lambda out: ["train", "--annotations", str(ANNOTATIONS), "--scenario",
                                                "demo-tea", "--out", str(out), "--epochs", "5", "--quiet"], "g.json"),
        "tgml show --dot": (tgml, lambda out: ["show", str(GRAPH), "--dot", str(out)], "g.dot"),
        "tgml bench-captaincook --json": (tgml, lambda out: ["bench-captaincook", "--data", str(tmp_path),
                                                             "--json", str(out)], "r.json"),
        "prego-bench --json": (prego_bench, lambda out: ["--data", str(tmp_path), "--json", str(out)], "r.json"),
        "prego-bench --plot": (prego_bench, lambda out: ["--data", str(tmp_path), "--perturb", "0,0.5", "--plot",
                                                         str(out)], "p.png"),
        "prego-bench replay --json": (prego_bench, lambda out: ["replay", "--frames", str(frames), "--graph",
                                                                str(GRAPH), "--json", str(out)], "r.json"),
        "recognition-train --out": (recognition_train, lambda out: ["--features", str(tmp_path), "--config",
                                                                    str(config), "--out", str(out)], "d.pt"),
    }


COMMANDS = ("tgml train --out", "tgml show --dot", "tgml bench-captaincook --json", "prego-bench --json",
            "prego-bench --plot", "prego-bench replay --json", "recognition-train --out")


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("command", COMMANDS)
def test_every_command_refuses_a_special_file_at_its_output(
    command: str, kind: str, tmp_path: Path, special: Callable[[str, str], Path], capsys: pytest.CaptureFixture[str]
) -> None:
    main, argv, name = commands(tmp_path)[command]
    out = special(kind, name)
    line = cli_error(main, argv(out), capsys)
    assert str(out) in line
    assert ("is a folder" in line) if kind == "folder" else ("not a regular file" in line)
    assert unchanged(out, kind)


@pytest.mark.parametrize("kind", ("fifo", "socket", "device", "link-to-device"))
def test_the_demo_cache_refuses_a_special_file(
    kind: str, special: Callable[[str, str], Path], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # What stream-detect writes is the rendered demo video, in $MISTAKE_CACHE.
    node = special(kind, "cache")
    monkeypatch.setenv("MISTAKE_CACHE", str(node))
    line = cli_error(stream_detect, ["--video", "demo", "--jsonl", "--fast"], capsys)
    assert "$MISTAKE_CACHE" in line and unchanged(node, kind)


def test_a_symlink_given_as_the_output_is_refused_not_written_through(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    real = tmp_path / "graphs" / "tea.json"
    real.parent.mkdir()
    real.write_text("old")
    link = tmp_path / "tea-link.json"
    link.symlink_to(real)
    line = cli_error(tgml, ["train", "--annotations", str(ANNOTATIONS), "--scenario", "demo-tea", "--out", str(link),
                            "--epochs", "5", "--quiet"], capsys)
    assert line == (f"error: --out {link}: is a symbolic link (to {real}), not a regular file; refusing to write the "
                    "graph file through it (name the file itself)")
    dot = tmp_path / "tea.dot"
    dot.symlink_to(tmp_path / "graphs" / "drawn.dot")  # dangling: it would have been made
    assert "is a symbolic link" in cli_error(tgml, ["show", str(GRAPH), "--dot", str(dot)], capsys)
    assert link.is_symlink() and dot.is_symlink() and real.read_text() == "old"
    assert sorted(p.name for p in real.parent.iterdir()) == ["tea.json"]  # nothing made, no temporary left


def test_every_writer_goes_through_the_same_helper(tmp_path: Path, special: Callable[[str, str], Path]) -> None:
    # The helpers the commands use (graph, checkpoint, text, atomic_path) all refuse, and none leaves a temporary.
    model, checkpoint = load_detector(DETECTOR)
    writers: list[Callable[[Path], object]] = [
        lambda p: save_graph(load_graph(GRAPH), p),
        lambda p: save_detector(p, model, checkpoint.class_names, checkpoint.class_step_ids,
                                checkpoint.feature_extractor, checkpoint.fps),
        lambda p: write_text(p, "x"),
        lambda p: check_output(p),
    ]
    for k, kind in enumerate(("fifo", "socket", "link-to-fifo")):
        node = special(kind, f"node{k}")
        for write in writers:
            with pytest.raises(InputError, match="not a regular file; refusing to"):
                write(node)
            assert unchanged(node, kind)
    assert not [p for p in tmp_path.iterdir() if ".tmp" in p.name]


def test_atomic_path_keeps_the_permissions_of_the_file_it_replaces(tmp_path: Path) -> None:
    real = tmp_path / "shared.json"
    real.write_text("old")
    real.chmod(0o640)
    with atomic_path(real) as tmp:
        tmp.write_text("new")
    assert real.read_text() == "new" and stat.S_IMODE(real.stat().st_mode) == 0o640


def test_the_real_null_device_is_only_examined(tmp_path: Path) -> None:
    # The one check that touches /dev/null asks what is there; nothing is ever written to or renamed over it.
    (tmp_path / "null-link").symlink_to("/dev/null")
    with pytest.raises(InputError, match="is a character device"):
        output_target("/dev/null")
    with pytest.raises(InputError, match="is a symbolic link"):
        output_target(tmp_path / "null-link")
    assert stat.S_ISCHR(os.stat("/dev/null").st_mode)


@pytest.mark.parametrize("command", COMMANDS)
def test_every_command_refuses_a_missing_folder_instead_of_making_it(
    command: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # A mistyped folder used to become a new folder holding the result, where nobody would look for it.
    main, argv, name = commands(tmp_path)[command]
    option = command.split()[-1]
    line = cli_error(main, argv(tmp_path / "mistyped" / name), capsys)
    assert line.startswith(f"error: {option} ") and f"folder {tmp_path / 'mistyped'} does not exist" in line
    assert not (tmp_path / "mistyped").exists()


def folder_outputs(tmp_path: Path) -> dict[str, tuple[Callable[[list[str]], object], Callable[[Path], list[str]]]]:
    """The other outputs: the folder outputs (the folder itself may be new, its parent may not), and the videos."""
    return {
        "stream-detect --annotate-out": (stream_detect, lambda out: ["--video", "demo", "--fast", "--jsonl",
                                                                     "--annotate-out", str(out / "a.mp4")]),
        "stream-detect eval --annotate-out": (stream_detect, lambda out: ["eval", "--demo", "--annotate-out",
                                                                          str(out / "videos")]),
        "stream-detect eval --json": (stream_detect, lambda out: ["eval", "--demo", "--json", str(out / "r.json")]),
        "stream-detect keys --out": (stream_detect, lambda out: ["keys", "--out", str(out / "keys")]),
        "stream-detect --alert-frames": (stream_detect, lambda out: ["--video", "demo", "--fast", "--jsonl",
                                                                     "--alert-frames", str(out / "frames")]),
        "prego-bench --save-graphs": (prego_bench, lambda out: ["--data", str(tmp_path), "--save-graphs",
                                                                str(out / "graphs")]),
        "recognition-features --out": (recognition_features, lambda out: [
            "--videos", str(tmp_path), "--annotations", str(ANNOTATIONS), "--out", str(out / "features")]),
    }


@pytest.mark.parametrize("command", ["stream-detect --annotate-out", "stream-detect eval --annotate-out",
                                     "stream-detect eval --json", "stream-detect keys --out",
                                     "prego-bench --save-graphs", "recognition-features --out"])
def test_folder_outputs_and_videos_refuse_a_missing_parent_before_any_work(
    command: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    main, argv = folder_outputs(tmp_path)[command]
    line = cli_error(main, argv(tmp_path / "mistyped"), capsys)
    assert line.startswith(f"error: {command.split()[-1]} ") and f"{tmp_path / 'mistyped'} does not exist" in line
    assert not (tmp_path / "mistyped").exists()


def test_a_new_folder_output_is_made_when_its_parent_exists(tmp_path: Path) -> None:
    assert stream_detect(["keys", "--out", str(tmp_path / "keys")]) == 0
    assert (tmp_path / "keys" / "checker.key").is_file()


# -- links planted inside output folders -------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def procedure(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Two short executions of the shelf procedure: ``videos/`` and ``labels.json``."""
    from tests.procedure_videos import VALID_ORDERS, write_procedure

    folder = tmp_path_factory.mktemp("shelf")
    write_procedure(folder, {f"run{k}": VALID_ORDERS[k] for k in range(2)})
    return folder


@pytest.mark.parametrize("planted", ["file", "sub-folder"])
def test_recognition_features_never_writes_through_a_link_in_its_folder(
    planted: str, procedure: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    features, elsewhere = tmp_path / "features", tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "precious.npy").write_bytes(b"precious")
    if planted == "file":
        (features / "target_perframe").mkdir(parents=True)
        link = features / "target_perframe" / "run0.npy"
        link.symlink_to(elsewhere / "precious.npy")
    else:
        features.mkdir()
        link = features / "rgb_light-v1"
        link.symlink_to(elsewhere, target_is_directory=True)
    line = cli_error(recognition_features, ["--videos", str(procedure / "videos"), "--annotations",
                                            str(procedure / "labels.json"), "--out", str(features), "--extractor",
                                            "light-v1", "--fps", "2", "--test-videos", "run1", "--quiet"], capsys)
    assert line.startswith(f"error: {link}: is a symbolic link")
    assert sorted(p.name for p in elsewhere.iterdir()) == ["precious.npy"]
    assert (elsewhere / "precious.npy").read_bytes() == b"precious" and link.is_symlink()


@pytest.fixture
def own_cache(demo_cache: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """``$MISTAKE_CACHE`` of this test: the session's rendered demo videos, no eval entry."""
    from streaming.demo.procedure import DEMO_EXECUTIONS
    from streaming.demo.synthetic_video import demo_video

    for name in DEMO_EXECUTIONS:
        demo_video(name)
    cache = tmp_path / "cache"
    shutil.copytree(demo_cache, cache, ignore=shutil.ignore_patterns("eval"))
    monkeypatch.setenv("MISTAKE_CACHE", str(cache))
    return cache


@pytest.mark.slow
def test_the_eval_cache_never_writes_through_a_planted_link_even_with_no_cache(
    own_cache: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (own_cache / "eval").symlink_to(elsewhere, target_is_directory=True)
    assert stream_detect(["eval", "--demo", "--no-cache", "--quiet"]) == 0
    err = capsys.readouterr().err
    assert "is a symbolic link, not a folder; refusing to write the eval cache entry through it" in err
    assert "the detector's output on demo:mistake is not cached" in err  # said, not silent
    assert not any(elsewhere.iterdir())


def test_an_annotated_video_never_goes_through_a_planted_link(
    own_cache: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out, precious = tmp_path / "annotated", tmp_path / "precious.mp4"
    out.mkdir()
    precious.write_bytes(b"precious")
    (out / "demo-mistake.mp4").symlink_to(precious)
    line = cli_error(stream_detect, ["eval", "--demo", "--quiet", "--annotate-out", str(out)], capsys)
    assert line.startswith(f"error: --annotate-out {out / 'demo-mistake.mp4'}: is a symbolic link")
    assert precious.read_bytes() == b"precious"


def test_no_output_replaces_the_video_it_is_drawn_from(
    own_cache: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # --annotate-out at the videos' own folder (eval) or at the video itself (live), or --json at a video, would
    # replace the footage with what was drawn over it, or with the results.
    from streaming.demo.synthetic_video import demo_video

    videos = tmp_path / "videos"
    videos.mkdir()
    video = videos / "demo_000.mp4"
    shutil.copy(demo_video("mistake")[0], video)
    before = video.read_bytes()
    evaluate = ["eval", "--videos", str(videos), "--annotations", str(ANNOTATIONS), "--graph", str(GRAPH),
                "--detector", str(DETECTOR), "--videos-list", "demo_000", "--quiet", "--no-cache"]
    line = cli_error(stream_detect, [*evaluate, "--annotate-out", str(videos)], capsys)
    assert line == (f"error: --annotate-out {videos}: its demo_000.mp4 would replace {video}, which the run reads; "
                    "choose another folder")
    line = cli_error(stream_detect, [*evaluate, "--json", str(video)], capsys)
    assert line.startswith(f"error: --json {video}: the results file would overwrite this input file of the run")
    line = cli_error(stream_detect, ["--video", str(video), "--graph", str(GRAPH), "--detector", str(DETECTOR),
                                     "--fast", "--jsonl", "--annotate-out", str(videos / "." / video.name)], capsys)
    assert "the annotated video would overwrite this input file of the run" in line
    assert video.read_bytes() == before


def project_file(kind: str, path: Path) -> None:
    """Write at ``path`` a file of one of the kinds no output replaces unless it is one (the demo's own)."""
    if kind == "array":
        with path.open("wb") as handle:  # np.save(path) would add .npy to a name without it
            np.save(handle, np.zeros((3, 4), np.float32))
        return
    shutil.copy({"graph": GRAPH, "annotations": ANNOTATIONS, "checkpoint": DETECTOR}[kind], path)


OWN_KIND = {"tgml train --out": "graph", "recognition-train --out": "checkpoint"}
REPLACED = [(command, kind) for command in (*COMMANDS, "stream-detect eval --json")
            for kind in ("graph", "annotations", "checkpoint", "array") if OWN_KIND.get(command) != kind]


@pytest.mark.parametrize(("command", "kind"), REPLACED)
def test_no_output_replaces_a_file_of_another_kind_that_runs_read(
    command: str, kind: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # eval --json detector.pt, bench-live --json graph.json and tgml show --dot labels.json replaced the file with
    # their output, exit status 0; only tgml train and recognition-train looked at what their --out held.
    (tmp_path / "data").mkdir()  # what a command reads, apart from where its output goes
    main, argv, name = {**commands(tmp_path / "data"), "stream-detect eval --json": (
        stream_detect, lambda out: ["eval", "--demo", "--quiet", "--json", str(out)], "r.json")}[command]
    out = tmp_path / name
    project_file(kind, out)
    before = out.read_bytes()
    line = cli_error(main, argv(out), capsys)
    assert line.startswith(f"error: {command.split()[-1]} {out}: exists and is ")
    assert out.read_bytes() == before


def test_a_results_file_replaces_results_and_files_of_no_project_kind(tmp_path: Path) -> None:
    # What a run makes again by running again is replaced as before: its own earlier output, another program's file.
    for content in ('{"settings": {}, "videos": [], "total": {}}', "notes\n", ""):
        out = tmp_path / "g.dot"
        out.write_text(content)
        assert tgml(["show", str(GRAPH), "--dot", str(out)]) == 0
        assert out.read_text().startswith("digraph")


@pytest.fixture
def data_copy(data_dir: Path, tmp_path: Path) -> Path:
    """A writable copy of the data sets the benchmarks below read (CaptainCook4D, EPIC-Tent-O, PREGO's MiniROAD)."""
    copy = tmp_path / "data"
    for name in ("captaincook4d", "epic-tent-o", "prego-miniroad"):
        shutil.copytree(data_dir / name, copy / name)
    return copy


BENCHMARK_OUTPUTS = {  # command, its arguments before the output, the output option, the data file it names
    "bench-mistakes": (tgml, ["bench-mistakes"], "--json", "captaincook4d/error_annotations.json"),
    "bench-captaincook": (tgml, ["bench-captaincook"], "--json", "captaincook4d/ground_truth_task_graphs/"
                          "microwaveeggsandwich.json"),
    "bench-queries": (tgml, ["bench-queries", "--dataset", "epic-tent-o"], "--json", "epic-tent-o/train.json"),
    "prego-bench": (prego_bench, ["--dataset", "epic-tent-o"], "--json", "epic-tent-o/test.json"),
    "prego-bench replay": (prego_bench, ["replay", "--dataset", "epic-tent-o"], "--json", "epic-tent-o/train.json"),
    "prego-bench select-checker": (prego_bench, ["select-checker", "--dataset", "epic-tent-o"], "--out",
                                   "epic-tent-o/test.json"),
}


@pytest.mark.parametrize("command", list(BENCHMARK_OUTPUTS))
def test_a_benchmarks_output_never_replaces_a_file_of_the_data_set_it_reads(
    command: str, data_copy: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    main, words, option, name = BENCHMARK_OUTPUTS[command]
    victim = data_copy / name
    before = victim.read_bytes()
    line = cli_error(main, [*words, "--data", str(data_copy), option, str(victim)], capsys)
    assert line.startswith(f"error: {option} {victim}: the ") and "which the run reads" in line
    assert victim.read_bytes() == before


# -- secret keys ------------------------------------------------------------------------------------------------------
def test_keys_force_never_writes_a_secret_through_a_link(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    keys, precious = tmp_path / "keys", tmp_path / "precious"
    assert stream_detect(["keys", "--out", str(keys)]) == 0
    precious.write_text("precious")
    (keys / "checker.key_secret").unlink()
    (keys / "checker.key_secret").symlink_to(precious)
    before = {p.name: p.read_bytes() for p in keys.rglob("*") if p.is_file() and not p.is_symlink()}
    capsys.readouterr()
    line = cli_error(stream_detect, ["keys", "--out", str(keys), "--force"], capsys)
    assert line.startswith(f"error: {keys / 'checker.key_secret'}: is a symbolic link")
    assert precious.read_text() == "precious" and (keys / "checker.key_secret").is_symlink()
    assert {p.name: p.read_bytes() for p in keys.rglob("*") if p.is_file() and not p.is_symlink()} == before


def test_secret_keys_are_private_from_their_creation_and_after_force(tmp_path: Path) -> None:
    keys = tmp_path / "keys"
    assert stream_detect(["keys", "--out", str(keys)]) == 0
    (keys / "checker.key_secret").chmod(0o644)  # someone loosened it: --force writes a private file again
    assert stream_detect(["keys", "--out", str(keys), "--force"]) == 0
    for secret in keys.rglob("*.key_secret"):
        assert stat.S_IMODE(secret.stat().st_mode) == 0o600, secret
    assert stat.S_IMODE((keys / "checker.key").stat().st_mode) == 0o644
    assert not [p for p in keys.rglob("*") if ".tmp" in p.name]


def test_write_bytes_never_replaces_what_appeared_meanwhile_without_replace(tmp_path: Path) -> None:
    path = tmp_path / "secret"
    path.write_text("made by another process")
    with pytest.raises(InputError, match="exists; refusing to replace it"):
        write_bytes(path, b"new", "secret key file", mode=SECRET_MODE, replace=False)
    assert path.read_text() == "made by another process"


# -- a full disk -------------------------------------------------------------------------------------------------------
def _small_file_limit() -> None:
    """In the child: files may not grow past 1 KiB (a full disk, as the writer sees it: EFBIG), no SIGXFSZ death."""
    import resource
    import signal

    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    resource.setrlimit(resource.RLIMIT_FSIZE, (1024, 1024))


@pytest.mark.parametrize("command", ["recognition-train", "tgml train"])
@pytest.mark.slow
def test_a_full_disk_while_saving_is_one_line_and_the_old_file_stays(command: str, tmp_path: Path) -> None:
    # recognition-train ended in torch's RuntimeError; every other writer printed one line.
    import subprocess
    import sys

    from tests.recognition.conftest import SMALL_CONFIG, write_feature_folder

    out = tmp_path / ("detector.pt" if command == "recognition-train" else "graph.json")
    # Its start as each command writes it (a zip archive, the graph format's mark): only such a file is replaced.
    earlier = (b"PK\x03\x04 the earlier result" if command == "recognition-train"
               else b'{"format": "task-graph", "the earlier result": 1}')
    out.write_bytes(earlier)
    if command == "recognition-train":
        folder = write_feature_folder(tmp_path / "features", n_train=2, n_test=1, frames=40)
        (tmp_path / "small.toml").write_text(SMALL_CONFIG.replace("epochs = 6", "epochs = 1"))
        argv = ["-m", "recognition.recognition_train_cli", "--features", str(folder), "--config",
                str(tmp_path / "small.toml"), "--out", str(out), "--quiet",
                "--val-fraction", "0"]  # one validation video of two would add its warning line
    else:
        argv = ["-m", "tgml.tgml_cli", "train", "--annotations", str(ANNOTATIONS), "--scenario", "demo-tea", "--out",
                str(out), "--epochs", "5", "--quiet"]
    result = subprocess.run([sys.executable, *argv], capture_output=True, text=True, timeout=120,
                            preexec_fn=_small_file_limit)
    assert result.returncode == 2, result.stderr[-2000:]
    [line] = result.stderr.splitlines()
    assert line.startswith(f"error: {out}: cannot write the ")
    assert "File too large" in line or "detector checkpoint (" in line  # torch says it its own way
    assert out.read_bytes() == earlier and not [p for p in tmp_path.iterdir() if ".tmp" in p.name]


# -- names no file system holds ----------------------------------------------------------------------------------------
EVERY_OUTPUT = (*COMMANDS, "stream-detect --annotate-out", "stream-detect eval --annotate-out",
                "stream-detect eval --json", "stream-detect keys --out", "prego-bench --save-graphs",
                "recognition-features --out", "stream-detect --alert-frames")


def _argv_with_output(command: str, tmp_path: Path, value: str) -> tuple[Callable[[list[str]], object], list[str]]:
    """The command's argv with its output option's value replaced by ``value`` (given as is, even '')."""
    placeholder = tmp_path / "OUTPUT-PLACEHOLDER"
    if command in COMMANDS:
        main, argv, _ = commands(tmp_path)[command]
        args = argv(placeholder)
    else:
        main, folder_argv = folder_outputs(tmp_path)[command]
        args = folder_argv(placeholder)
    option = command.split()[-1]
    at = args.index(option) + 1
    assert args[at].startswith(str(placeholder))
    return main, [*args[:at], value, *args[at + 1:]]


@pytest.mark.parametrize("command", EVERY_OUTPUT)
def test_an_output_name_no_file_system_holds_is_one_line_naming_the_option(
    command: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # 300 characters ended in "File name too long" tracebacks; '' was silently ignored (--json '', --dot '') or
    # wrote secret keys into the current folder (keys --out ''); a newline broke every line naming the file.
    option = command.split()[-1]
    for value, culprit in ((str(tmp_path / ("x" * 300)), "a name of 300 bytes in this path; the file system holds at "
                                                         "most 255"),
                           ("", "'': an empty name"),
                           (str(tmp_path / "a\nb.json"), "holds the control character '\\n'")):
        main, argv = _argv_with_output(command, tmp_path, value)
        line = cli_error(main, argv, capsys)
        assert f"argument {option}: " in line and culprit in line
    assert sorted(p.name for p in tmp_path.iterdir()) <= ["frames.json"]


def test_recognition_features_never_writes_over_the_annotation_file_it_reads(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "features"
    out.mkdir()
    kept = out / "extraction.json"  # the annotations kept in the folder, under the name of the run's manifest
    kept.write_bytes(ANNOTATIONS.read_bytes())
    line = cli_error(recognition_features, ["--videos", str(tmp_path), "--annotations", str(kept), "--out", str(out)],
                     capsys)
    assert line.startswith(f"error: --annotations {kept}: is the extraction.json that --out {out} gets written")
    assert kept.read_bytes() == ANNOTATIONS.read_bytes()


def test_folder_outputs_never_replace_a_file_the_run_reads(
    own_cache: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # A file the run reads kept in an output folder under a name the run writes there: eval's annotated video and
    # timeline plot, prego-bench's saved graph.
    from streaming.demo.synthetic_video import demo_video
    from streaming.offline.eval_plots import plot_path

    videos = tmp_path / "videos"
    videos.mkdir()
    shutil.copy(demo_video("mistake")[0], videos / "demo_000.mp4")
    kept = tmp_path / "kept"
    kept.mkdir()
    graph = kept / "demo_000.mp4"  # the graph, under the name the annotated video gets
    graph.write_bytes(GRAPH.read_bytes())
    evaluate = ["eval", "--videos", str(videos), "--annotations", str(ANNOTATIONS), "--graph", str(graph),
                "--detector", str(DETECTOR), "--videos-list", "demo_000", "--quiet", "--no-cache"]
    line = cli_error(stream_detect, [*evaluate, "--annotate-out", str(kept)], capsys)
    assert line == f"error: --annotate-out {kept}: its demo_000.mp4 would replace {graph}, which the run reads; " \
        "choose another folder"
    plotted = plot_path(kept, "demo_000")
    graph.rename(plotted)
    evaluate[evaluate.index(str(graph))] = str(plotted)
    line = cli_error(stream_detect, [*evaluate, "--plots", str(kept)], capsys)
    assert line.startswith(f"error: --plots {kept}: its {plotted.name} would replace {plotted}")
    assert plotted.read_bytes() == GRAPH.read_bytes()
    labels = kept / "demo-tea-count-based.json"  # the annotations, under the name of the graph prego-bench saves
    labels.write_bytes(ANNOTATIONS.read_bytes())
    line = cli_error(prego_bench, ["--annotations", str(labels), "--scenario", "demo-tea", "--test-videos", "demo_000",
                                   "--method", "count-based", "--save-graphs", str(kept), "--quiet"], capsys)
    assert line.startswith(f"error: --save-graphs {kept}: its demo-tea-count-based.json would replace {labels}")
    assert labels.read_bytes() == ANNOTATIONS.read_bytes()


@pytest.fixture
def immutable() -> Iterator[Callable[[Path], None]]:
    """Make a file or folder immutable (``chattr +i``: root cannot write it either); skips where attributes are not
    supported. Made mutable again after the test, so it can be cleaned up."""
    locked: list[Path] = []

    def lock(path: Path) -> None:
        if shutil.which("chattr") is None or os.geteuid() != 0:
            pytest.skip("needs chattr and root, to make a file immutable")
        done = subprocess.run(["chattr", "+i", str(path)], capture_output=True)
        if done.returncode != 0:
            pytest.skip(f"this file system keeps no immutable attribute ({done.stderr.decode().strip()})")
        locked.append(path)

    yield lock
    for path in locked:
        subprocess.run(["chattr", "-i", str(path)], check=False)


def test_an_output_that_cannot_be_replaced_is_refused_before_the_run(
    tmp_path: Path, immutable: Callable[[Path], None], capsys: pytest.CaptureFixture[str]
) -> None:
    # Found only when the result is saved, it cost the whole run (a benchmark's minutes).
    results = tmp_path / "results.json"
    results.write_text("{}")
    immutable(results)
    with pytest.raises(InputError, match=r"cannot replace the results file: .*results.json is immutable or append"):
        check_output(results, "results file", option="--json")
    # keys: the client keys' folder unwritable was found after the checker's pair was written: half a key set.
    out = tmp_path / "keys"
    (out / "clients").mkdir(parents=True)
    immutable(out / "clients")
    line = cli_error(stream_detect, ["keys", "--out", str(out), "--clients", "cam0"], capsys)
    assert line == f"error: --out {out}: cannot write the client keys: folder {out / 'clients'} is not writable"
    assert sorted(p.name for p in out.iterdir()) == ["clients"]


# -- standard output on a full device ----------------------------------------------------------------------------------
@pytest.mark.skipif(not Path("/dev/full").exists(), reason="no /dev/full on this system")
@pytest.mark.parametrize("argv", [["-m", "tgml.tgml_cli", "show", str(default_demo_paths()[0])],
                                  ["-m", "streaming.stream_detect_cli", "--video", "demo", "--fast", "--jsonl"],
                                  ["-m", "streaming.stream_detect_cli", "--video", "demo", "--fast"],
                                  ["-m", "tgml.tgml_cli", "train", "--help"]],
                         ids=["tgml-show", "stream-detect-jsonl", "stream-detect-view", "help"])
def test_output_to_a_full_device_is_one_error_line(argv: list[str], demo_cache: Path) -> None:
    # '> /dev/full' (a full disk behind '> FILE') ended in a traceback from print or from rich's console; '--help'
    # printed nothing and exited 0 (argparse drops its write errors).
    with open("/dev/full", "w") as full:
        result = subprocess.run([sys.executable, *argv], stdout=full, stderr=subprocess.PIPE, text=True, timeout=120)
    assert result.returncode == 1, result.stderr[-2000:]
    assert result.stderr.splitlines() == ["error: cannot write the output: No space left on device"]


def test_a_large_results_file_given_as_the_output_is_not_parsed_to_tell_its_kind(tmp_path: Path) -> None:
    from graphs.common.files import existing_kind

    # An earlier run's results of 40 MB: telling its kind parsed it whole (143 MB: 13.6 s and 2 GB) before the run.
    big = tmp_path / "results.json"
    with big.open("w") as handle:
        handle.write('{"annotations": {}, "taxonomy": {}, "padding": "')
        handle.write("x" * 40 * 2**20)
        handle.write('"}')
    assert existing_kind(big) is None
    small = tmp_path / "labels.json"
    small.write_text('{"annotations": {}, "taxonomy": {}}')
    assert existing_kind(small) == "annotations"
