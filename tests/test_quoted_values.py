"""A long value an error line quotes is cut where the line says so.

Python's ``{value!r:.80}`` cut a name after 80 characters with no mark and its quote left open: the line read as if
the name were whole (``'camera xxxxxxxx`` then the rest of the sentence). Every such line now quotes a value one way
(`graphs.common.safe_text.quoted`): in double quotes as JSON writes it, ``...`` where it was cut, shown as plain text.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from graphs.common.errors import InputError
from recognition.feature_folders import load_split
from streaming.messages import STREAM_ID_RULE, MessageError, decode, encode
from streaming.stream_detect_cli import main as stream_detect
from tests.cli_errors import cli_error
from tests.streaming.helpers import keystep


def test_a_long_value_is_cut_with_a_mark_on_the_command_line_in_a_file_and_on_the_wire(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # A command-line value: a stream id with a space, pasted long.
    given = "camera " + "x" * 200
    line = cli_error(stream_detect, ["detector", "--video", "demo", "--stream-id", given], capsys)
    assert line == (f'error: stream-detect detector: argument --stream-id: "{given[:76]}...: use {STREAM_ID_RULE} '
                    "(see stream-detect detector --help)")

    # A name in a file: a video listed in both lists of a split file.
    name = "video_" + "long_name_" * 15
    split = tmp_path / "split.json"
    split.write_text(json.dumps({"train": [name], "test": [name]}))
    with pytest.raises(InputError) as refused:
        load_split(split)
    assert str(refused.value) == f"{split}: video \"{name[:76]}... is listed in both 'train' and 'test'"

    # A peer's message: its stream id holds a terminal escape sequence and a newline; the refusal, counted and
    # shown as the last error, stays one short line of plain text.
    body = json.loads(encode(keystep())[1])
    body["stream_id"] = "cam\x1b[2J\n" + "z" * 300
    with pytest.raises(MessageError) as dropped:
        decode([b"keystep/cam0", json.dumps(body).encode()])
    assert str(dropped.value) == f'stream_id "cam\\u001b[2J\\n{"z" * 62}... must be {STREAM_ID_RULE}'


def test_a_peers_json_value_is_quoted_as_json_writes_it() -> None:
    # A message with no version read "unsupported version None": Python's word for what the peer sent as null, or
    # left out.
    body = json.loads(encode(keystep())[1])
    for version, shown in ((None, "null"), (False, "false"), ("2", '"2"'), (1.5, "1.5")):
        body["version"] = version
        with pytest.raises(MessageError) as dropped:
            decode([b"keystep/cam0", json.dumps(body).encode()])
        assert str(dropped.value).startswith(f"unsupported version {shown} (this program speaks ")
