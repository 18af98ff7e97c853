"""The points where a client written from the docs alone first disagreed with the wire (issue 32), each checked the
way such a client meets it: the docs' text and examples, and the real `stream-detect checker` on loopback, spoken
to only through `wire_client` (written from docs/wire-format.md alone).
"""

from __future__ import annotations

import json
import re
from typing import Any

import zmq

from tests.conformance.test_conformance import DOCS, WAIT_S, checker, steps_of_the_graph
from tests.conformance.wire_client import VERSION, Detector, Viewer, problems

TEXT = DOCS.read_text()
NAMES = steps_of_the_graph()


def example_lines() -> list[dict[str, Any]]:
    """The JSON example lines of the docs (the ```json block after "Example lines of")."""
    block = TEXT.split("Example lines of", 1)[1].split("```json\n", 1)[1].split("```", 1)[0]
    return [json.loads(line) for line in block.splitlines()]


def section(heading: str) -> str:
    """The text of a docs section, up to the next heading of any level."""
    body = TEXT.split(heading + "\n", 1)[1]
    return re.split(r"\n#+ ", body, maxsplit=1)[0]


def greeted(viewer: Viewer) -> bool:
    return viewer.until(lambda got: any(m["kind"] == "checker" for m in got), WAIT_S)


def health(viewer: Viewer, **wanted: int) -> dict[str, Any]:
    """The first `checker` message with these counts (waits for it)."""
    def match(m: dict[str, Any]) -> bool:
        return m["kind"] == "checker" and all(m[k] == v for k, v in wanted.items())
    assert viewer.until(lambda got: any(match(m) for m in got), WAIT_S), (
        wanted, [m for m in viewer.messages if m["kind"] == "checker"][-1:])
    return next(m for m in viewer.messages if match(m))


# 1 and 8 (and 6): a restarted checker
def test_a_restarted_checker_subscribes_again_numbers_from_0_and_its_alert_copy_wins() -> None:
    ctx = zmq.Context()
    try:
        with checker() as first:
            viewer = Viewer(ctx, first.alerts)
            assert greeted(viewer)
            detector = Detector(ctx, first.events, "kitchen")
            assert detector.wait_until_subscribed(WAIT_S)
            detector.keystep(3, NAMES[3])
            detector.keystep(2, NAMES[2])  # boil_water before fill_kettle
            assert viewer.until(lambda got: any(m["kind"] == "alert" for m in got), WAIT_S)
            assert viewer.until(lambda got: len(viewer.of("status", "kitchen")) >= 3, WAIT_S)
            before = viewer.of("alert", "kitchen")[-1]
            endpoints = first.events, first.alerts
        viewer.until(lambda got: False, 0.2)  # what the first checker sent last
        seen = len(viewer.messages)
        with checker("--bind", endpoints[0], "--publish", endpoints[1]):
            # Point 1: the verbose XPUB hands the re-subscriptions up; they tell the detector the checker listens.
            assert detector.wait_until_subscribed(WAIT_S), "no subscriptions after the reconnection"
            assert viewer.until(lambda got: any(m["kind"] == "checker" for m in got[seen:]), WAIT_S)
            detector.heartbeat(frames=5)  # its history rebuilds the stream
            assert viewer.until(lambda got: any(m["kind"] == "alert" for m in got[seen:]), WAIT_S)
            rebuilt = next(m for m in viewer.messages[seen:] if m["kind"] == "alert")
            # Point 8: the stream's seq went back: the checker restarted (the docs' rule), nothing else says so.
            assert rebuilt["seq"] < before["seq"] and viewer.checker_restarts("kitchen") == 1
            assert (rebuilt["alert_id"], rebuilt["run"], rebuilt["replayed"], rebuilt["video_time"]) == (
                before["alert_id"], before["run"], True, None)
            # Point 6: the copy received last wins, though its number is lower.
            latest = viewer.alerts_now()[(before["run"], before["alert_id"])]
            assert latest["seq"] < before["seq"] and latest["replayed"]
        detector.close()
        viewer.close()
    finally:
        ctx.destroy(linger=0)


# 2
def test_the_docs_say_the_version_the_wire_speaks_and_what_each_version_changed() -> None:
    assert f"`version` ({VERSION}," in TEXT and "`version` (2" not in TEXT
    assert re.search(rf"^\| `version` \| every kind \| the integer {VERSION} \|", TEXT, re.M)
    versions = section("### Versions")
    assert [int(v) for v in re.findall(r"^- \*\*(\d+)\*\*", versions, re.M)] == list(range(VERSION, 0, -1))
    assert {line["version"] for line in example_lines()} == {VERSION}


# 3
def test_every_example_line_is_a_message_the_docs_allow() -> None:
    lines = example_lines()
    assert {m["kind"] for m in lines} >= {"alert", "status", "missing"}
    for body in lines:
        topic = f"{body['kind']}/{body['stream_id']}".encode()
        assert problems(topic, json.dumps(body).encode(), NAMES) == [], body


# 4
def test_a_peer_of_another_socket_type_gets_nothing_in_and_is_never_blamed_on_curve() -> None:
    ctx = zmq.Context()
    try:
        with checker() as running:
            viewer = Viewer(ctx, running.alerts)
            assert greeted(viewer)
            wrong = []
            for kind in (zmq.PUSH, zmq.DEALER):
                sock = ctx.socket(kind)
                sock.setsockopt(zmq.LINGER, 0)
                sock.connect(running.events)
                wrong.append(sock)
            body = {"version": VERSION, "kind": "heartbeat", "stream_id": "pushed", "seq": 0, "timestamp": 1.0}
            for sock in wrong:
                sock.send_multipart([b"heartbeat/pushed", json.dumps(body).encode()], zmq.NOBLOCK)
            detector = Detector(ctx, running.events, "proper")
            assert detector.wait_until_subscribed(WAIT_S)
            detector.heartbeat()
            assert viewer.until(lambda got: bool(viewer.of("status", "proper")), WAIT_S)
            counts = health(viewer, received=1, streams=1)
            assert counts["malformed"] == 0 and not viewer.of("status", "pushed")
            denied = [line for line in running.log if "(denied," in line]
            assert all("without CURVE" not in line and "checker with it" not in line for line in denied), denied
            for sock in wrong:
                sock.close()
            detector.close()
        viewer.close()
    finally:
        ctx.destroy(linger=0)


# 5 and 10, and the defect: one key-step outside the graph
def test_an_unknown_step_refuses_one_message_never_the_session_and_each_reason_logs_once() -> None:
    ctx = zmq.Context()
    try:
        with checker() as running:
            viewer = Viewer(ctx, running.alerts)
            assert greeted(viewer)
            detector = Detector(ctx, running.events, "other")
            assert detector.wait_until_subscribed(WAIT_S)
            detector.keystep(3, NAMES[3])
            detector.keystep(99, "not in the checker's graph")
            for frames in (1, 2, 3):  # every later heartbeat carries 99 in its history: each is served
                detector.heartbeat(frames=frames)

                def served(_got: list[dict[str, Any]], n: int = frames) -> bool:
                    return any(m["frames"] == n for m in viewer.of("status", "other"))

                assert viewer.until(served, WAIT_S), f"heartbeat {frames} refused"
            detector.keystep(1, NAMES[1])
            assert viewer.until(lambda got: any(m["index"] == 2 for m in viewer.of("step", "other")), WAIT_S)
            for _ in range(3):  # three malformed messages: one log line for their reason
                detector.sock.send_multipart([b"keystep/other", b"{}"])
            detector.heartbeat(frames=4, ended=True)
            assert viewer.until(lambda got: any(m["ended"] for m in viewer.of("status", "other")), WAIT_S)
            counts = health(viewer, unknown_step=1, malformed=3)
            assert counts["received"] == len(detector.sent)
            ended = [m for m in viewer.of("status", "other") if m["ended"]][-1]
            assert (ended["done"], ended["allowed"], ended["allowed_scores"]) == ([3, 1], [], [])  # point 5
            assert not [m for m in viewer.of("step", "other") if m["step"] == 99]
            log = list(running.log)
            reasons = [line.split("(", 1)[1].split(",", 1)[0] for line in log if line.startswith("checker: refused")]
            assert reasons == ["unknown_step", "malformed"], log  # one line per reason (within 10 s)
            detector.close()
        viewer.close()
    finally:
        ctx.destroy(linger=0)


# 7
def test_an_oversized_frame_cuts_its_peer_off_uncounted_and_a_large_payload_is_malformed() -> None:
    ctx = zmq.Context()
    try:
        with checker() as running:
            viewer = Viewer(ctx, running.alerts)
            assert greeted(viewer)
            detector = Detector(ctx, running.events, "big")
            assert detector.wait_until_subscribed(WAIT_S)
            detector.sock.send_multipart([b"heartbeat/big", b" " * (96 * 1024)])  # over 64 KiB, under 128 KiB
            health(viewer, malformed=1)
            assert any("(malformed, 1 so far)" in line and "bytes exceeds" in line for line in running.log)
            detector.sock.send_multipart([b"heartbeat/big", b" " * (256 * 1024)])  # over 128 KiB: cut off
            assert detector.wait_until_subscribed(WAIT_S), "the peer did not connect again"
            detector.heartbeat(frames=8)
            assert viewer.until(lambda got: any(m["frames"] == 8 for m in viewer.of("status", "big")), WAIT_S)
            counts = health(viewer, received=1)
            assert counts["malformed"] == 1 and counts["denied"] == 0  # the cut-off frame is counted nowhere
            detector.close()
        viewer.close()
    finally:
        ctx.destroy(linger=0)


# 9
def test_the_procedure_answers_come_pushed_without_a_request() -> None:
    questions = section("## Procedure questions on the wire")
    assert "no request and no reply" in questions
    pushed = re.findall(r"^- \*\*([A-Z][a-z ]+)\*\* \((?:in every|the) `(\w+)`", questions, re.M)
    assert pushed == [("Next steps", "status"), ("Likely forgotten", "alert"), ("Missing at the end", "missing")]
    ctx = zmq.Context()
    try:
        with checker() as running:
            viewer = Viewer(ctx, running.alerts)  # a SUB socket: it can send nothing, and gets every answer
            assert greeted(viewer)
            detector = Detector(ctx, running.events, "asked")
            assert detector.wait_until_subscribed(WAIT_S)
            detector.heartbeat()
            detector.keystep(2, NAMES[2])
            detector.heartbeat(frames=2, ended=True)
            assert viewer.until(lambda got: bool(viewer.of("missing", "asked")), WAIT_S)
            first = viewer.of("status", "asked")[0]
            assert set(first["allowed"]) == {1, 3} and first["rule"] == "weighted"
            alert = viewer.of("alert", "asked")[0]
            assert (alert["forgotten"], alert["forgotten_name"]) == (1, "fill_kettle")
            assert viewer.of("missing", "asked")[0]["missing"] == [1, 3, 4, 5, 6]
            detector.close()
        viewer.close()
    finally:
        ctx.destroy(linger=0)
