"""The wire format: what a sender can put on the wire and what a receiver refuses."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from streaming.messages import (
    MAX_HISTORY,
    MAX_MESSAGE_BYTES,
    WIRE_VERSION,
    Alert,
    CheckerHealth,
    Heartbeat,
    Message,
    MessageError,
    MissingSteps,
    Status,
    StepEvent,
    decode,
    encode,
    run_of,
)
from tests.streaming.helpers import keystep


def all_kinds() -> list[Message]:
    return [
        keystep(),
        Heartbeat("cam0", 4, 2.0, "s1", (1, 3), None, 120, 2, 29.5, False),
        StepEvent("cam0", 3, 2.05, 5, "pour_water", 4.0, 7.5, 0.93, 2, run=run_of("s1")),
        Alert("cam0", 0, 2.1, "cam0#2", run_of("s1"), 5, "pour_water", 2, (2,), ("boil_water",), False, 1.5, False,
              2, "boil_water", 0.75, "weighted"),
        missing_steps(),
        Status("cam0", 1, 2.2, run_of("s1"), (1, 3), (2, 4), 4, 1, 120, 0, 30.0, 0, True, False, (0.625, 0.0),
               "binary"),
    ]


def missing_steps(**fields: object) -> MissingSteps:
    """The end report of a session of stream ``cam0`` that never did steps 4 and 6; any field can be set."""
    values: dict[str, object] = {
        "stream_id": "cam0", "seq": 5, "timestamp": 2.3, "missing_id": "cam0#end", "run": run_of("s1"),
        "missing": (4, 6), "missing_names": ("add_teabag", "add_milk"), "replayed": False,
        "probabilities": (0.9, 1.0),
    }
    return MissingSteps(**(values | fields))  # type: ignore[arg-type]


@pytest.mark.parametrize("message", all_kinds(), ids=lambda m: type(m).__name__)
def test_every_kind_round_trips_with_topic_and_version(message: object) -> None:
    frames = encode(message)  # type: ignore[arg-type]
    assert frames[0] == f"{message.KIND}/cam0".encode()  # type: ignore[attr-defined]
    body = json.loads(frames[1])
    assert body["version"] == WIRE_VERSION and body["kind"] == message.KIND  # type: ignore[attr-defined]
    assert decode(frames) == message


def payload(message: object) -> dict:
    return json.loads(encode(message)[1])  # type: ignore[arg-type]


def frames_of(body: dict, topic: bytes = b"keystep/cam0") -> list[bytes]:
    return [topic, json.dumps(body).encode()]


@pytest.mark.parametrize(
    ("mutate", "reason"),
    [
        (lambda b: b.update(version=4), "version"),
        (lambda b: b.update(version=1), "version"),  # the first wire version handed session tokens to viewers
        (lambda b: b.update(kind="pickle"), "kind"),
        (lambda b: b.pop("seq"), "missing"),
        (lambda b: b.update(extra=1), "unexpected"),
        (lambda b: b.update(seq="3"), "integer"),
        (lambda b: b.update(seq=True), "integer"),
        (lambda b: b.update(seq=-1), r"seq = -1 must be in 0\.\."),
        (lambda b: b.update(seq=2**53), "seq"),
        (lambda b: b.update(history=[-1], index=0, step=-1), "step = -1 must be in 0..2147483647"),
        (lambda b: b.update(history=[1, 3, 10**300]), r"history\[\] must be step ids in 0\.\.2147483647"),
        (lambda b: b.update(history=[1, 3, 2**31]), r"history\[\] must be step ids"),
        (lambda b: b.update(session="a b"), "session"),
        (lambda b: b.update(step_name="x" * 513), "longer than 512"),
        (lambda b: b.update(start=-1.0, end=-0.5), "start = -1.0 must not be negative"),
        (lambda b: b.update(history=[1, "x", 5]), "integer"),
        (lambda b: b.update(confidence=1.5), "confidence"),
        (lambda b: b.update(stream_id="bad id!"), "stream_id"),
        (lambda b: b.update(index=0), "index"),
        (lambda b: b.update(end=0.5), "before start"),
        (lambda b: b.update(evidence_steps=[1, 2], evidence=[0.5]), "evidence has 1 items for 2"),
        (lambda b: b.update(evidence_steps=[1, 1], evidence=[0.5, 0.5]), "names a step twice"),
        (lambda b: b.update(evidence_steps=[1], evidence=[1.5]), r"evidence\[\] must be numbers in \[0, 1\]"),
        (lambda b: b.update(evidence_steps=[-1], evidence=[0.5]), r"evidence_steps\[\] must be step ids"),
        (lambda b: b.update(real=-0.1), r"keystep.real = -0.1 is not in \[0, 1\]"),
        (lambda b: b.update(real=None), "must be a number"),
    ],
)
def test_malformed_payloads_are_refused(mutate: object, reason: str) -> None:
    body = payload(keystep())
    mutate(body)  # type: ignore[operator]
    with pytest.raises(MessageError, match=reason):
        decode(frames_of(body))


def test_a_field_written_twice_is_refused() -> None:
    # json keeps the last of two equal keys: a filter reading the first and the checker the second could disagree.
    text = encode(keystep())[1].decode()
    twice = text.replace('"seq":0', '"seq":0,"seq":1')
    with pytest.raises(MessageError, match="twice"):
        decode([b"keystep/cam0", twice.encode()])


def test_garbage_wrong_framing_nan_and_oversize_are_refused() -> None:
    good = encode(keystep())
    with pytest.raises(MessageError, match="frames"):
        decode(good[:1])
    with pytest.raises(MessageError, match="JSON"):
        decode([good[0], b"\x80\x04\x95 not json"])  # a pickle header is just bad bytes here
    with pytest.raises(MessageError, match="JSON"):
        decode([good[0], good[1].replace(b'"confidence":0.8', b'"confidence":NaN')])
    with pytest.raises(MessageError, match="exceeds"):
        decode([good[0], b" " * (MAX_MESSAGE_BYTES + 1)])
    with pytest.raises(MessageError, match="topic"):
        decode([b"alert/cam0", good[1]])
    with pytest.raises(MessageError, match="^topic of 129 bytes exceeds 128$"):  # said as what it is, not the payload
        decode([b"k" * 129, good[1]])


def test_sender_cannot_build_an_invalid_message() -> None:
    with pytest.raises(MessageError):
        keystep(stream_id="")
    with pytest.raises(MessageError):
        keystep(timestamp=float("inf"))


def test_hostile_json_is_a_message_error_not_a_crash() -> None:
    # A receiver must survive anything a peer can fit in 64 KiB: deep nesting used to raise RecursionError
    # and an integer too large for a float field OverflowError, either of which killed the checker's loop.
    body = payload(keystep())
    with pytest.raises(MessageError, match="JSON"):
        decode([b"keystep/cam0", b"[" * 60_000])
    huge = json.dumps(body).replace('"timestamp": 1.5', '"timestamp": 1' + "0" * 400).encode()
    with pytest.raises(MessageError, match="timestamp"):
        decode([b"keystep/cam0", huge])
    body["version"] = 1.0  # the version is the integer 1, not a number equal to it
    with pytest.raises(MessageError, match="version"):
        decode(frames_of(body))


def test_a_full_history_encodes_and_decodes_in_one_pass() -> None:
    # How long a full history takes each way is printed by benchmarks/wire_speed.py (a timed unit test flaked on
    # a busy machine); here, that it round-trips whole and that no item slips through unchecked.
    history = tuple(range(1, 7)) * (MAX_HISTORY // 6)
    beat = Heartbeat("cam0", 4, 2.0, "s1", history, None, 120, 2, 29.5, False)
    frames = encode(beat)
    assert decode(frames) == beat and json.loads(frames[1])["history"] == list(history)
    body = payload(beat)
    body["history"] = [1, True, 3]  # a bool is not a step id, in a history as anywhere
    with pytest.raises(MessageError, match="history"):
        decode(frames_of(body, b"heartbeat/cam0"))


@pytest.mark.parametrize(
    ("mutate", "reason"),
    [
        (lambda b: b.update(missing=[], missing_names=[]), "missing.missing is empty"),
        (lambda b: b.update(missing=[4, -1]), r"missing\[\] must be step ids"),
        (lambda b: b.update(missing=[4]), "more names than"),
        (lambda b: b.update(probabilities=[0.5]), "probabilities has 1 items for 2"),
        (lambda b: b.update(probabilities=[0.5, 1.5]), r"probabilities\[\] must be numbers in \[0, 1\]"),
        (lambda b: b.update(missing_names=["add_teabag", 6]), "string"),
        (lambda b: b.update(missing_id="cam0#1"), "'<stream_id>#end'"),
        (lambda b: b.update(run="a token?"), "run"),
        (lambda b: b.update(replayed="no"), "true or false"),
        (lambda b: b.pop("run"), "missing fields"),
        (lambda b: b.update(session="s1"), "unexpected fields"),  # viewers never get the detector's session token
        (lambda b: b.update(version=1), "version"),
    ],
)
def test_malformed_missing_steps_reports_are_refused(mutate: object, reason: str) -> None:
    body = payload(missing_steps())
    mutate(body)  # type: ignore[operator]
    with pytest.raises(MessageError, match=reason):
        decode(frames_of(body, b"missing/cam0"))


def test_missing_steps_report_keeps_every_id_and_the_names_that_fit() -> None:
    # 2048 steps of 512-character names would be 1 MiB: the ids all go, with the names of the first ones.
    ids = tuple(range(2048))
    names = tuple("n" * 512 for _ in ids)
    report = missing_steps(missing=ids, missing_names=names, probabilities=(1.0,) * 2048).fitted()
    frames = encode(report)
    assert len(frames[1]) <= MAX_MESSAGE_BYTES and decode(frames) == report
    assert report.missing == ids and 50 < len(report.missing_names) < 2048
    assert missing_steps().fitted() == missing_steps()


@pytest.mark.parametrize(
    ("mutate", "reason"),
    [
        (lambda b: b.update(forgotten=7), "not one of alert.missing"),
        (lambda b: b.update(forgotten=None), "go together"),
        (lambda b: b.update(forgotten_score=1.5), r"not in \[0, 1\]"),
        (lambda b: b.update(forgotten_score="high"), "number"),
        (lambda b: b.update(rule="guess"), "rule"),
        (lambda b: b.pop("rule"), "missing fields"),
    ],
)
def test_malformed_likely_forgotten_steps_are_refused(mutate: object, reason: str) -> None:
    body = payload(all_kinds()[3])
    mutate(body)  # type: ignore[operator]
    with pytest.raises(MessageError, match=reason):
        decode(frames_of(body, b"alert/cam0"))


@pytest.mark.parametrize(
    ("mutate", "reason"),
    [
        (lambda b: b.update(allowed_scores=[0.5]), "allowed_scores has 1 items for 2 allowed steps"),
        (lambda b: b.update(allowed_scores=[0.5, -0.1]), r"allowed_scores\[\] must be numbers in \[0, 1\]"),
        (lambda b: b.update(allowed_scores=[0.5, True]), "number"),
        (lambda b: b.update(rule="Binary"), "rule"),
    ],
)
def test_malformed_next_step_probabilities_are_refused(mutate: object, reason: str) -> None:
    body = payload(all_kinds()[5])
    mutate(body)  # type: ignore[operator]
    with pytest.raises(MessageError, match=reason):
        decode(frames_of(body, b"status/cam0"))


def test_an_infinite_probability_is_refused() -> None:
    # JSON has no infinity, but 1e999 parses as one.
    text = encode(all_kinds()[5])[1].replace(b'"allowed_scores":[0.625,0.0]', b'"allowed_scores":[0.625,1e999]')
    with pytest.raises(MessageError, match=r"allowed_scores\[\] must be numbers in \[0, 1\]"):
        decode([b"status/cam0", text])


def test_a_status_of_the_largest_graph_fits_one_message() -> None:
    # The largest graph (2048 steps, the largest ids) with every step allowed: ids and 4-decimal probabilities.
    allowed = tuple(range(2**31 - 2048, 2**31))
    row = Status("cam0", 2**53 - 1, 2.2, run_of("s1"), (), allowed, 2**31 - 1, 2**53 - 1, 2**53 - 1, 2**53 - 1,
                 1e300, 2**53 - 1, False, False, (0.1235,) * 2048, "weighted")
    frames = encode(row)
    assert decode(frames) == row and len(frames[1]) < 38 * 1024  # docs/wire-format.md: "under 38 KiB"


def test_the_example_lines_of_the_wire_docs_decode_as_they_are() -> None:
    # docs/wire-format.md shows real lines of `stream-detect --jsonl`; the reader of the checker and the view takes each
    # (tests/conformance checks them against the docs' own tables), so the docs cannot drift from the wire.
    text = (Path(__file__).resolve().parents[2] / "docs" / "wire-format.md").read_text()
    block = text.split("Example lines of", 1)[1].split("```json\n", 1)[1].split("```", 1)[0]
    lines = block.splitlines()
    assert len(lines) >= 3
    for line in lines:
        body = json.loads(line)
        message = decode([f"{body['kind']}/{body['stream_id']}".encode(), line.encode()])
        assert json.loads(encode(message)[1]) == body


def test_a_checker_message_from_before_stream_taken_reads_it_as_zero() -> None:
    # The wire docs say the counter is "absent (0) from a checker before it"; the viewer dropped every such message as
    # malformed ("missing fields ['stream_taken']").
    health = CheckerHealth("checker", 4, 1.0, 2, 0, 10, 0, 0, 0, 0, 0, 0, denied=1, stream_taken=3)
    topic, payload = encode(health)
    body = json.loads(payload)
    del body["stream_taken"]
    read = decode([topic, json.dumps(body).encode()])
    assert read == CheckerHealth("checker", 4, 1.0, 2, 0, 10, 0, 0, 0, 0, 0, 0, denied=1, stream_taken=0)
    del body["denied"]  # every other field is still required
    with pytest.raises(MessageError, match=r"checker: missing fields \['denied'\]"):
        decode([topic, json.dumps(body).encode()])


def test_every_field_a_peer_may_leave_out_has_a_default() -> None:
    # A field read as absent without a default would make decoding raise a TypeError, not a MessageError.
    import dataclasses

    from streaming.messages import KINDS

    for cls in KINDS.values():
        defaults = {f.name for f in dataclasses.fields(cls) if f.default is not dataclasses.MISSING}
        assert cls.ADDED.issubset(defaults), cls.KIND
        assert cls.SAID_WHEN_TRUE <= cls.ADDED, cls.KIND  # left out while false: a receiver must take it as absent


# The fields a heartbeat and a status had before `stopped`: a receiver from then refuses any other.
BEFORE_STOPPED = {
    "heartbeat": {"version", "kind", "stream_id", "seq", "timestamp", "session", "history", "current", "frames",
                  "dropped", "fps", "ended", "evidence_steps", "evidence", "decode_ms", "features_ms", "detector_ms",
                  "segmenter_ms"},
    "status": {"version", "kind", "stream_id", "seq", "timestamp", "run", "done", "allowed", "current", "alerts",
               "frames", "dropped", "fps", "gaps", "ended", "lost", "allowed_scores", "rule", "decode_ms",
               "features_ms", "detector_ms", "segmenter_ms", "hop_ms", "alert_out_ms"},
}


def test_stopped_is_said_only_on_a_stopped_session_s_end_and_read_as_false_when_absent() -> None:
    # A detector stopped by Ctrl-C or SIGTERM ended its session with the very heartbeat a file's end sends: viewers
    # said "ended" of a camera stopped by hand. `stopped` says which; it is left out while false, so every other
    # message is exactly what a version-3 peer from before it reads (it refuses a field it does not know).
    beats = [Heartbeat("cam0", 4, 2.0, "s1", (1, 3), None, 120, 2, 29.5, ended) for ended in (False, True)]
    status = Status("cam0", 1, 2.2, run_of("s1"), (1, 3), (), 4, 1, 120, 0, 30.0, 0, True, False, (), "binary")
    for message in (*beats, status):
        assert set(json.loads(encode(message)[1])) == BEFORE_STOPPED[message.KIND]
        assert decode(encode(message)).stopped is False  # type: ignore[attr-defined]
    for message in (beats[1], status):
        stopped = replace(message, stopped=True)
        body = json.loads(encode(stopped)[1])
        assert body["stopped"] is True and set(body) == BEFORE_STOPPED[message.KIND] | {"stopped"}
        assert decode(encode(stopped)) == stopped
    topic, body = encode(beats[0])[0], json.loads(encode(beats[0])[1])
    with pytest.raises(MessageError, match=r"heartbeat.stopped is true while heartbeat.ended is false"):
        decode([topic, json.dumps(body | {"stopped": True}).encode()])
    with pytest.raises(MessageError, match="stopped must be true or false"):
        decode([topic, json.dumps(body | {"stopped": 1}).encode()])
    assert decode([topic, json.dumps(body | {"stopped": False}).encode()]) == beats[0]  # said needlessly: accepted
