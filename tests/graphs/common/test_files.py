"""The JSON and TOML readers every loader uses: each user mistake is one line naming the file."""

from __future__ import annotations

import contextlib
import importlib.util
import os
import shutil
import tempfile
import tracemalloc
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from graphs.common.errors import InputError
from graphs.common.files import atomic_path, check_output, read_bytes, read_json, read_toml, read_yaml, write_text
from graphs.common.interrupts import Interrupted, handling_signals
from tests.signal_calls import signal_when_called

Reader = Callable[..., Any]
NEEDS_YAML = pytest.mark.skipif(
    importlib.util.find_spec("yaml") is None,
    reason="YAML needs the optional 'yaml' extra (PyYAML), which is not installed",
)


@pytest.mark.parametrize(
    ("read", "good"),
    [(read_json, '{"a": 1}'), (read_toml, "a = 1\n"), pytest.param(read_yaml, "a: 1\n", marks=NEEDS_YAML)],
)
def test_reads_a_good_file(tmp_path: Path, read: Reader, good: str) -> None:
    path = tmp_path / "f"
    path.write_text(good)
    assert read(path) == {"a": 1}
    path.write_text(good, encoding="utf-8-sig")  # as Windows editors save it, a byte-order mark first
    assert read(path) == {"a": 1}


@pytest.mark.parametrize("read", [read_json, read_toml, read_yaml])
def test_missing_folder_and_binary_files_are_one_line_errors(tmp_path: Path, read: Reader) -> None:
    with pytest.raises(InputError, match=r"absent: settings not found$"):
        read(tmp_path / "absent", "settings")
    with pytest.raises(InputError, match="is a folder, expected a settings"):
        read(tmp_path, "settings")
    binary = tmp_path / "binary"
    binary.write_bytes(b'a = "\xff"\n')
    with pytest.raises(InputError, match="binary: not UTF-8 text, expected a settings"):
        read(binary, "settings")


WIDE_TEXT = {"utf-16-bom": ("utf-16", "UTF-16"), "utf-16-le": ("utf-16-le", "UTF-16"),
             "utf-16-be": ("utf-16-be", "UTF-16"), "utf-32-bom": ("utf-32", "UTF-32")}


@pytest.mark.parametrize("encoding", WIDE_TEXT)
def test_text_saved_as_utf16_is_named_as_such_by_the_commands(
    encoding: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Windows' "Unicode" (Notepad, PowerShell 5's `>` and Out-File): with a byte-order mark it was "not UTF-8 text";
    # without one it decodes as UTF-8 (NUL is a character) and JSON said "Expecting value" at line 1 column 2.
    from recognition.recognition_train_cli import main as recognition_train
    from streaming.demo.paths import DEMO_DIR, default_demo_paths
    from tests.cli_errors import cli_error
    from tgml.tgml_cli import main as tgml

    codec, name = WIDE_TEXT[encoding]
    graph, annotations, config = tmp_path / "graph.json", tmp_path / "labels.json", tmp_path / "small.toml"
    graph.write_bytes(default_demo_paths()[0].read_text().encode(codec))
    annotations.write_bytes((DEMO_DIR / "demo_annotations.json").read_text().encode(codec))
    config.write_bytes("[train]\nepochs = 1\n".encode(codec))
    for main, argv, path, what in (
        (tgml, ["show", str(graph)], graph, "a graph file"),
        (tgml, ["train", "--annotations", str(annotations), "--scenario", "demo-tea", "--out", str(tmp_path / "g")],
         annotations, "an annotation file"),
        (recognition_train, ["--features", str(tmp_path), "--config", str(config), "--out", str(tmp_path / "d.pt")],
         config, "a config file"),
    ):
        assert cli_error(main, argv, capsys) == (f"error: {path}: is {name} text (Windows' \"Unicode\"), expected "
                                                 f"{what} in UTF-8: save it as UTF-8")


def test_the_article_of_a_file_kind_read_letter_by_letter_is_that_of_its_first_letter(tmp_path: Path) -> None:
    # "is a folder, expected a RGB features file", "expected a LLM task graph": initialisms are read letter by letter.
    for what, article in (("RGB features file", "an"), ("LLM task graph", "an"), ("CURVE key file", "a"),
                          ("annotation file", "an"), ("graph file", "a"), ("UTF-8 file", "a")):
        with pytest.raises(InputError, match=f"is a folder, expected {article} {what}$"):
            read_bytes(tmp_path, what, 1000)


def test_a_file_of_zeros_is_no_utf16_text(tmp_path: Path) -> None:
    zeros = tmp_path / "zeros.json"
    zeros.write_bytes(bytes(4096))  # a damaged disk block: not text in any encoding
    with pytest.raises(InputError, match=r"zeros.json: invalid JSON at line 1 column 1"):
        read_json(zeros)


@pytest.mark.parametrize(
    ("read", "name", "text", "message"),
    [
        (read_json, "bad.json", '{"a": ', r"bad.json: invalid JSON at line 1 column 7"),
        (read_toml, "bad.toml", "a = \n", r"bad.toml: invalid TOML: .*line 1"),
        pytest.param(read_yaml, "bad.yaml", "a: [1,\n", r"bad.yaml: invalid YAML \(", marks=NEEDS_YAML),
    ],
)
def test_bad_syntax_names_the_format_and_place(
    tmp_path: Path, read: Reader, name: str, text: str, message: str
) -> None:
    bad = tmp_path / name
    bad.write_text(text)
    with pytest.raises(InputError, match=message):
        read(bad)


def test_a_key_written_twice_in_one_object_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "twice.json"
    path.write_text('{"videos": {"v1": [1, 2], "v2": [3], "v1": [4]}}')  # json.loads would keep [4] silently
    with pytest.raises(InputError, match=r"twice.json: key 'v1' appears twice in one JSON object"):
        read_json(path)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('{"annotations": {"v1": {"segments": [{"start_time": 1.0}, {"start_time": NaN}]}}}',
         r"NaN is not a number JSON allows \(at annotations\.v1\.segments\[1\]\.start_time\)$"),
        ('{"fps": -Infinity}', r"-Infinity is not a number JSON allows \(at fps\)$"),
        ('[1, 2, 1e400]', r"number 1e400 is out of the float range \(at \[2\]\)$"),
        ("NaN", r"NaN is not a number JSON allows \(at the top level\)$"),
    ],
)
def test_a_number_json_cannot_hold_names_the_field(tmp_path: Path, text: str, message: str) -> None:
    # Python's json reads NaN and Infinity happily; a NaN start time would then slip into every comparison.
    path = tmp_path / "labels.json"
    path.write_text(text)
    with pytest.raises(InputError, match=r"labels.json: invalid JSON: " + message):
        read_json(path)


def test_missing_toml_says_where_such_a_file_comes_from(tmp_path: Path) -> None:
    with pytest.raises(InputError, match=r"absent.toml: settings not found \(ships with the checkout\)"):
        read_toml(tmp_path / "absent.toml", "settings", " (ships with the checkout)")


def test_outputs_are_checked_before_a_run(tmp_path: Path) -> None:
    a_file = tmp_path / "a_file"
    a_file.write_text("x")
    assert check_output(tmp_path / "out.json") == tmp_path / "out.json"
    assert check_output(tmp_path / "graphs", folder=True) == tmp_path / "graphs"  # a new folder output: created
    with pytest.raises(InputError, match=r"is a folder, expected a file name for the results file$"):
        check_output(tmp_path, "results file")
    with pytest.raises(InputError, match=r"out.json: cannot write the results file: .*a_file is a file, not a folder"):
        check_output(a_file / "sub" / "out.json", "results file")
    with pytest.raises(InputError, match=r"a_file: is a file, expected the graphs folder$"):
        check_output(a_file, "graphs folder", folder=True)


def test_a_missing_folder_is_refused_not_created(tmp_path: Path) -> None:
    # A mistyped folder would silently become a new one, holding the results where nobody looks.
    with pytest.raises(InputError, match=r"^--json .*out.json: cannot write the results file: folder .*new does not"):
        check_output(tmp_path / "new" / "out.json", "results file", option="--json")
    with pytest.raises(InputError, match=r"^--save-graphs .*graphs: cannot write the graphs folder: folder .*new does"):
        check_output(tmp_path / "new" / "graphs", "graphs folder", folder=True, option="--save-graphs")
    assert not (tmp_path / "new").exists()


def test_an_output_that_is_an_input_of_the_run_is_refused(tmp_path: Path) -> None:
    source = tmp_path / "annotations.json"
    source.write_text("{}")
    with pytest.raises(InputError, match=r"annotations.json: the graph file would overwrite this input file"):
        check_output(tmp_path / "." / "annotations.json", "graph file", inputs=[None, source])
    assert check_output(tmp_path / "graph.json", "graph file", inputs=[source]) == tmp_path / "graph.json"
    # A data set's folder stands for every file in it: an existing one anywhere inside is refused, a new one is not.
    data = tmp_path / "data"
    (data / "split").mkdir(parents=True)
    (data / "split" / "train.json").write_text("{}")
    with pytest.raises(InputError, match=r"train.json: the results file would overwrite a file of .*data, which the"):
        check_output(data / "split" / ".." / "split" / "train.json", "results file", inputs=[data])
    assert check_output(data / "results.json", "results file", inputs=[data]) == data / "results.json"


@pytest.mark.skipif(not hasattr(os, "fork") or os.geteuid() != 0,
                    reason="needs root, to make a file another user may not replace")
def test_an_output_another_user_owns_in_a_sticky_folder_is_refused_before_the_run() -> None:
    # In /tmp a file of someone else's cannot be replaced; found only at the end, the run's work would be lost.
    folder = Path(tempfile.mkdtemp(dir="/tmp"))
    try:
        folder.chmod(0o1777)
        theirs = folder / "results.json"
        theirs.write_text("{}")  # root's
        pid = os.fork()
        if pid == 0:  # the child becomes another user (no exec: the package is already imported)
            code = 4
            try:
                os.setuid(65534)
                check_output(theirs, "results file", option="--json")
                code = 0
            except InputError as err:
                code = 3 if "cannot replace the results file" in str(err) and "another user" in str(err) else 5
            finally:
                os._exit(code)
        _, status = os.waitpid(pid, 0)
        assert os.waitstatus_to_exitcode(status) == 3
        assert check_output(theirs, "results file", option="--json") == theirs  # its owner (root) may
        assert theirs.read_text() == "{}"
    finally:
        shutil.rmtree(folder)


def test_write_text_is_atomic_and_failures_are_one_line(tmp_path: Path) -> None:
    path = write_text(tmp_path / "sub" / "out.txt", "hello\n")
    assert path.read_text() == "hello\n" and sorted(p.name for p in path.parent.iterdir()) == ["out.txt"]
    with pytest.raises(InputError, match=r"sub: is a folder, not a regular file; refusing"):
        write_text(tmp_path / "sub", "x", "results file")
    blocker = tmp_path / "sub" / "out.txt"
    with pytest.raises(InputError, match=r"sub/out.txt: is a file, not a folder; cannot write the results file in it"):
        write_text(blocker / "deeper.txt", "x", "results file")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["sub"]  # no temporary left behind


@pytest.fixture
def full_disk(tmp_path: Path) -> Any:
    """A folder on a 64 KiB file system filled to the last byte (a real tmpfs: mounting needs root)."""
    import subprocess

    folder = tmp_path / "small"
    folder.mkdir()
    if os.geteuid() != 0 or shutil.which("mount") is None:
        pytest.skip("mounting a small tmpfs needs root")
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(folder)], capture_output=True,
                      timeout=30).returncode != 0:
        pytest.skip("this machine does not let a tmpfs be mounted")
    try:
        fd = os.open(folder / "filler", os.O_WRONLY | os.O_CREAT)
        with contextlib.suppress(OSError):  # unbuffered: the write that finds the disk full raises here
            for _ in range(1024):  # bounded: 64 KiB fills in 16 of these
                os.write(fd, bytes(4096))
        os.close(fd)
        yield folder
    finally:
        subprocess.run(["umount", "-l", str(folder)], capture_output=True, timeout=30)  # -l: even while busy


def test_a_full_disk_is_said_as_such_whatever_the_writer_reports(full_disk: Path) -> None:
    # numpy reports a full disk as a short write ("52480 requested and 39904 written") and torch as an internal
    # error ("enforce fail at inline_container.cc"), neither with an error number: the line never said "full disk".
    import numpy as np

    from graphs.common.files import atomic_path
    from recognition.checkpoint import save_detector
    from recognition.model import MiniROAD, MiniROADConfig

    full = r"x\.npy: cannot write the feature array \(No space left on device\)"
    with pytest.raises(InputError, match=full), atomic_path(full_disk / "x.npy", what="feature array") as tmp, \
            open(tmp, "xb") as handle:
        np.save(handle, np.zeros((64, 1024), np.float32), allow_pickle=False)
    model = MiniROAD(MiniROADConfig(input_dim=256, embed_dim=128, hidden_dim=128, num_classes=4))
    with pytest.raises(InputError, match=r"cannot write the detector checkpoint \(No space left on device\)"):
        save_detector(full_disk / "d.pt", model, ("background", "a", "b", "c"), (None, 1, 2, 3), "x", 1.0, {})
    assert sorted(p.name for p in full_disk.iterdir()) == ["filler"]  # no temporary left behind


def test_a_file_where_an_output_folder_goes_is_named(tmp_path: Path) -> None:
    # mkdir said only "File exists" or "Not a directory": MISTAKE_CACHE=/dev/full ended in "(File exists)".
    from graphs.common.files import atomic_path

    (tmp_path / "afile").write_text("")
    with pytest.raises(InputError, match=rf"^{tmp_path / 'afile'}: is a file, not a folder; cannot write the demo "
                                         "video in it$"), atomic_path(tmp_path / "afile" / "sub" / "v.mp4",
                                                                      what="demo video"):
        pass
    if Path("/dev/full").exists():
        with pytest.raises(InputError, match="^/dev/full: is a character device, not a folder"), \
                atomic_path(Path("/dev/full") / "v.mp4", what="demo video"):
            pass


def test_a_file_where_the_named_output_folder_goes_is_named(tmp_path: Path) -> None:
    # The folder a user names (``inside``: $MISTAKE_CACHE/eval for eval's cache) under a file: "(File exists)".
    (tmp_path / "afile").write_text("")
    with pytest.raises(InputError, match=rf"^{tmp_path / 'afile'}: is a file, not a folder; cannot write the eval "
                                         "cache entry in it$"):
        write_text(tmp_path / "afile" / "eval" / "v.json", "{}", "eval cache entry", inside=tmp_path / "afile" / "eval")


def test_a_link_where_the_named_output_folder_goes_is_said_where_it_leads(tmp_path: Path) -> None:
    # A named folder may be a link (to a folder): one to a file or to nothing was "is a symbolic link, not a folder",
    # as if links were refused, and the user replaced a link that was allowed.
    (tmp_path / "afile").write_text("")
    (tmp_path / "to-file").symlink_to("afile")
    (tmp_path / "to-nothing").symlink_to("nowhere")
    for link, leads in (("to-file", "a link to a file"), ("to-nothing", "a link to nothing")):
        named = tmp_path / link
        with pytest.raises(InputError, match=rf"^{named}: is {leads}, not a folder; cannot write the eval cache entry "
                                             "in it$"):
            write_text(named / "eval" / "v.json", "{}", "eval cache entry", inside=named / "eval")
        with pytest.raises(InputError, match=rf"^{named}: is {leads}, not a folder; cannot write the eval cache entry "
                                             "in it$"):
            write_text(named / "v.json", "{}", "eval cache entry", inside=named)
    (tmp_path / "folder").mkdir()
    (tmp_path / "to-folder").symlink_to("folder")
    write_text(tmp_path / "to-folder" / "eval" / "v.json", "{}", "eval cache entry", inside=tmp_path / "to-folder")
    assert (tmp_path / "folder" / "eval" / "v.json").read_text() == "{}"


def test_a_write_failure_without_an_error_number_on_a_full_disk_is_said_as_one(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # The same rule without a small file system to fill (the test above needs root): the folder's free room decides.
    from graphs.common import files

    torch_error = RuntimeError("[enforce fail at inline_container.cc:672] . unexpected pos 3648 vs 3606\nmore")
    assert files.write_failure(torch_error, tmp_path) == "[enforce fail at inline_container.cc:672] . unexpected pos "\
                                                         "3648 vs 3606"  # room left: what the writer said
    assert files.write_failure(OSError(28, "No space left on device"), tmp_path) == "No space left on device"
    monkeypatch.setattr(files.shutil, "disk_usage", lambda _: shutil._ntuple_diskusage(10**9, 10**9, 4096))
    assert files.write_failure(torch_error, tmp_path) == "No space left on device"
    assert files.write_failure(OSError("52480 requested and 39904 written"), tmp_path) == "No space left on device"


def test_a_small_file_is_read_without_reserving_the_size_limit(tmp_path: Path) -> None:
    # A few bytes of JSON reserved their 256 MiB limit (read(limit + 1)): refused where memory is not overcommitted.
    path = tmp_path / "graph.json"
    path.write_text('{"steps": []}')
    tracemalloc.start()
    try:
        data = read_bytes(path, "task graph", 256 * 2**20)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert data == b'{"steps": []}' and peak < 2**20



def test_a_stop_as_the_temporary_folder_is_made_leaves_no_stray_folder(tmp_path: Path) -> None:
    # The signal held while the folder was made was raised before the cleanup that removes it was set up: a
    # `.out.txt.*.tmp` folder stayed beside the output.
    out = tmp_path / "out.txt"
    with (handling_signals(), pytest.raises(Interrupted), signal_when_called("mkdtemp") as signalled,
          atomic_path(out) as tmp):
        tmp.write_text("never reached")
    assert signalled == ["mkdtemp"] and list(tmp_path.iterdir()) == []


@pytest.mark.skipif(not Path("/proc/self/status").is_file(), reason="no procfs here: its files report size 0")
def test_a_file_whose_size_says_nothing_is_read_whole_in_bounded_chunks() -> None:
    # procfs reports size 0 for files with content: the rest was read in one read(limit), which reserved 256 MiB.
    tracemalloc.start()
    try:
        data = read_bytes("/proc/self/status", "status", 256 * 2**20)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert data.startswith(b"Name:") and b"VmRSS" in data and peak < 8 * 2**20


@pytest.mark.parametrize(("codec", "name"), [("utf-32-le", "UTF-32"), ("utf-32-be", "UTF-32"),
                                             ("utf-16-le", "UTF-16"), ("utf-16-be", "UTF-16")])
def test_wide_text_without_a_mark_is_named_by_its_own_width(codec: str, name: str, tmp_path: Path) -> None:
    # UTF-32 without a byte-order mark (Python's encoding="utf-32-le") has a NUL in every odd byte too, and was named
    # UTF-16 text.
    path = tmp_path / "graph.json"
    path.write_bytes('{"steps": [1, 2]}\n'.encode(codec))
    with pytest.raises(InputError, match=rf"graph.json: is {name} text "):
        read_json(path, "graph file")
