"""The wire protocol as the docs describe it, played against the real `stream-detect checker` by a detector and a
viewer written from the docs alone (`wire_client`): three streams (a correct execution, one out of order, one that
goes silent) with heartbeats, onsets and key-steps, with and without CURVE; every field the viewer receives is
checked against the ranges of docs/wire-format.md, and what the streams did against what the docs say comes back.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import zmq

from tests.command_lines import with_options
from tests.conformance.wire_client import (
    EVERY,
    FIELDS,
    Curve,
    Detector,
    Viewer,
    fields_of,
    problems,
    read_key_file,
    run_of,
)
from tests.source_imports import imports_of

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs" / "wire-format.md"
DEMO_GRAPH = ROOT / "streaming" / "demo" / "demo_graph.json"
STREAMS = ("correct", "order", "silent")
WAIT_S = 10.0  # longest any one expected reply may take (they take milliseconds)


def stream_detect() -> str:
    """The `stream-detect` command of this environment."""
    beside = Path(sys.executable).with_name("stream-detect")
    found = str(beside) if beside.exists() else shutil.which("stream-detect")
    assert found, "stream-detect is not installed"
    return found


@dataclass
class RunningChecker:
    events: str
    alerts: str
    log: list[str]


@contextmanager
def checker(*options: str) -> Iterator[RunningChecker]:
    """`stream-detect checker` on the demo graph at free loopback ports (or at the ``--bind`` and ``--publish`` of
    ``options``); its stderr lines are kept as they come."""
    defaults = {"--bind": "tcp://127.0.0.1:0", "--publish": "tcp://127.0.0.1:0", "--stream-timeout": "1"}
    process = subprocess.Popen(
        [stream_detect(), "checker", "--graph", str(DEMO_GRAPH), *with_options(defaults, *options)],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        stderr = process.stderr
        assert stderr is not None
        first = stderr.readline()
        ready = re.fullmatch(r"checker: detectors connect to (\S+), viewers to (\S+)\n", first)
        assert ready, f"the checker did not say where it listens: {first!r}"
        log: list[str] = []
        reader = threading.Thread(target=lambda: log.extend(iter(stderr.readline, "")), daemon=True)
        reader.start()
        yield RunningChecker(ready[1], ready[2], log)
    finally:
        process.terminate()
        process.wait(10)


def steps_of_the_graph() -> dict[int, str]:
    """The step ids and names of the graph file the checker runs (docs: `steps[].id`, `steps[].name`)."""
    return {step["id"]: step["name"] for step in json.loads(DEMO_GRAPH.read_text())["steps"]}


def make_keys(out: Path, clients: str) -> None:
    subprocess.run([stream_detect(), "keys", "--out", str(out), "--clients", clients], check=True,
                   capture_output=True, timeout=60)


def refused_clients(ctx: zmq.Context, endpoint: str, checker_key: bytes | None) -> list[Detector]:
    """Clients the checker must turn away and count as ``denied``: at a CURVE checker one without keys, one whose key
    the checker does not know, one holding another checker's public key; at a checker without CURVE, one with keys.
    Each sends a heartbeat that never arrives; close them once they are counted."""
    public, secret = zmq.curve_keypair()  # a pair made by another tool: the docs say such pairs work the same
    another_checker = zmq.curve_keypair()[0]
    clients: list[Curve | None] = [Curve(another_checker, public, secret)]
    if checker_key is not None:
        clients += [None, Curve(checker_key, public, secret)]
    refused = [Detector(ctx, endpoint, "refused", keys) for keys in clients]
    for client in refused:
        client.heartbeat()
    return refused


@dataclass
class Played:
    """What the viewer received, and what each stream's detector sent in which session."""

    viewer: Viewer
    sessions: dict[str, str]
    sent: dict[str, list[dict[str, Any]]]


def play(ctx: zmq.Context, running: RunningChecker, keys: Path | None) -> Played:
    """The three streams, each step awaited at the viewer before the next (a detector sends a few a second)."""
    names = steps_of_the_graph()

    def curve(client: str) -> Curve | None:
        if keys is None:
            return None
        return Curve.from_files(keys / "checker.key", keys / "clients" / f"{client}.key_secret")

    viewer = Viewer(ctx, running.alerts, curve("viewer"))
    # Readiness, as the docs tell it: the viewer's first `checker` message, the detectors' three subscriptions.
    assert viewer.until(lambda got: any(m["kind"] == "checker" for m in got), WAIT_S), "no greeting"
    detectors = {name: Detector(ctx, running.events, name, curve(name)) for name in STREAMS}
    assert all(d.wait_until_subscribed(WAIT_S) for d in detectors.values()), "the checker never subscribed"
    correct, order, silent = (detectors[name] for name in STREAMS)

    def expect(kind: str, stream: str, **fields: Any) -> None:
        found = viewer.until(lambda got: any(m["kind"] == kind and m["stream_id"] == stream
                                             and all(m[k] == v for k, v in fields.items()) for m in got), WAIT_S)
        assert found, f"no {kind} of {stream} with {fields}"

    for stream in STREAMS:
        detectors[stream].heartbeat()
        expect("status", stream)
    silent.keystep(3, names[3], skip_seq=1)  # seq skips one number: one gap; then nothing more
    expect("step", "silent", index=0)

    for frames, step in enumerate((3, 4, 1, 2, 5, 6), start=1):
        correct.onset(step, names[step])
        correct.heartbeat(current=step, frames=frames)
        correct.keystep(step, names[step])
        expect("step", "correct", index=frames - 1)
    correct.heartbeat(frames=7, ended=True)
    expect("status", "correct", ended=True)

    order.keystep(3, names[3])
    expect("step", "order", index=0)
    order.onset(2, names[2])  # boil_water before fill_kettle: an early alert
    expect("alert", "order", alert_id="order#1")
    order.keystep(2, names[2])  # confirmed as announced: the same alert again, with this message's timestamp
    expect("step", "order", index=1)
    order.onset(6, names[6])  # add_milk before pour_water: an early alert ...
    expect("alert", "order", alert_id="order#2")
    order.keystep(1, names[1])  # ... retracted: fill_kettle is confirmed at that position instead
    expect("retraction", "order", alert_id="order#2")
    order.onset(5, names[5])  # pour_water before add_teabag: an early alert ...
    expect("alert", "order", alert_id="order#3")
    order.onset(5, names[5], withdrawn=True)  # ... retracted: withdrawn
    expect("retraction", "order", alert_id="order#3")
    order.keystep(4, names[4])
    expect("step", "order", index=3)
    order.sock.send_multipart([b"keystep/order", b'{"version": 1, "kind": "keystep"}'])  # malformed: counted
    order.heartbeat(frames=9, ended=True, stopped=True)  # its detector stopped by hand, before its video's end
    expect("missing", "order")

    refused = refused_clients(ctx, running.events, None if keys is None else read_key_file(keys / "checker.key").public)
    sent = sum(len(d.sent) for d in detectors.values())
    expect("status", "silent", lost=True)
    assert viewer.until(lambda got: any(  # the last word on the run: every message counted, every refusal too
        m["kind"] == "checker" and m["received"] == sent and m["denied"] >= len(refused) and m["lost_streams"] == 1
        for m in got), WAIT_S), json.dumps([m for m in viewer.messages if m["kind"] == "checker"][-1])
    for detector in (*detectors.values(), *refused):
        detector.close()
    return Played(viewer, {name: d.session for name, d in detectors.items()},
                  {name: d.sent for name, d in detectors.items()})


def check_what_came_back(played: Played) -> None:
    """What the docs say each stream gets."""
    names = steps_of_the_graph()
    viewer, sent = played.viewer, played.sent
    for stream, session in played.sessions.items():
        runs = {m["run"] for m in viewer.messages if m["stream_id"] == stream and "run" in m}
        assert runs == {run_of(session)}, stream

    steps = viewer.of("step", "correct")
    keysteps = [m for m in sent["correct"] if m["kind"] == "keystep"]
    assert [(m["step"], m["index"], m["step_name"]) for m in steps] == [
        (k["step"], k["index"], names[k["step"]]) for k in keysteps]
    assert [(m["start"], m["end"], m["confidence"]) for m in steps] == [
        (k["start"], k["end"], k["confidence"]) for k in keysteps]
    assert not viewer.of("alert", "correct") + viewer.of("retraction", "correct") + viewer.of("missing", "correct")
    last = viewer.of("status", "correct")[-1]
    assert (last["done"], last["alerts"], last["gaps"], last["ended"], last["lost"], last["frames"]) == (
        [3, 4, 1, 2, 5, 6], 0, 0, True, False, 7)
    assert "stopped" not in last  # its video reached its end: the field is left out

    onset, confirmed = (m for m in sent["order"] if m["kind"] in ("onset", "keystep") and m["step"] == 2)
    first = [m for m in viewer.of("alert", "order") if m["alert_id"] == "order#1"]
    assert [(m["replayed"], m["event_timestamp"]) for m in first[:2]] == [
        (False, onset["timestamp"]), (False, confirmed["timestamp"])]
    assert {(m["event_timestamp"], m["replayed"]) for m in first[2:]} == {(confirmed["timestamp"], True)}
    assert (first[0]["step"], first[0]["index"], first[0]["missing"], first[0]["missing_names"]) == (
        2, 1, [1], ["fill_kettle"])
    assert (first[0]["forgotten"], first[0]["forgotten_name"]) == (1, "fill_kettle")
    # The copy received last wins: the confirmation (re-sent since), not the early alert; retracted ones are gone.
    now = viewer.alerts_now()
    assert {alert_id for run, alert_id in now if run == run_of(played.sessions["order"])} == {"order#1"}
    assert now[(run_of(played.sessions["order"]), "order#1")]["event_timestamp"] == confirmed["timestamp"]
    retractions = {m["alert_id"]: m for m in viewer.of("retraction", "order")}
    assert (retractions["order#2"]["step"], retractions["order#2"]["confirmed"],
            retractions["order#2"]["confirmed_name"]) == (6, 1, "fill_kettle")
    assert (retractions["order#3"]["step"], retractions["order#3"]["confirmed"]) == (5, None)
    report = viewer.of("missing", "order")[0]
    assert (report["missing"], report["missing_names"], report["replayed"]) == ([5, 6], ["pour_water", "add_milk"],
                                                                                 False)
    last = viewer.of("status", "order")[-1]
    assert (last["done"], last["alerts"], last["gaps"], last["ended"], last["stopped"]) == ([3, 2, 1, 4], 1, 0, True,
                                                                                         True)

    last = viewer.of("status", "silent")[-1]
    assert (last["done"], last["gaps"], last["lost"], last["ended"]) == ([3], 1, True, False)
    assert not viewer.of("missing", "silent")  # a lost stream is never reported

    health = [m for m in viewer.messages if m["kind"] == "checker" and m["lost_streams"]][-1]
    assert (health["streams"], health["lost_streams"], health["malformed"], health["over_budget"],
            health["unknown_step"], health["stream_limit"]) == (3, 1, 1, 0, 0, 0)


@pytest.mark.parametrize("curve", [False, True], ids=["plain", "curve"])
def test_a_client_written_from_the_docs_gets_what_the_docs_promise(tmp_path: Path, curve: bool) -> None:
    keys = None
    options: list[str] = []
    if curve:
        keys = tmp_path / "keys"
        make_keys(keys, ",".join((*STREAMS, "viewer")))
        options = ["--curve-secret", str(keys / "checker.key_secret"), "--curve-clients", str(keys / "clients")]
    ctx = zmq.Context()
    try:
        with checker(*options) as running:
            played = play(ctx, running, keys)
            log = list(running.log)  # what it logged while running, not at exit
        viewer = played.viewer
        bad = [p for topic, payload in viewer.frames for p in problems(topic, payload, steps_of_the_graph())]
        assert bad == []
        assert {m["kind"] for m in viewer.messages} == {"checker", "status", "step", "alert", "retraction", "missing"}
        check_what_came_back(played)
        assert any(line.startswith("checker: refused (malformed, 1 so far): ") for line in log), log
        assert any(line.startswith("checker: refused (denied, 1 so far): ") for line in log), log
        viewer.close()
    finally:
        ctx.destroy(linger=0)


def _markdown_table(text: str, heading: str) -> list[list[str]]:
    """The rows of the first table under ``heading``, cells stripped, header and rule left out."""
    section = text.split(heading, 1)[1]
    end = next((i for i, line in enumerate(section.splitlines()) if line.startswith("#")), None)
    rows = [line for line in section.splitlines()[:end] if line.startswith("|")]
    return [[cell.strip() for cell in row.strip("|").split("|")] for row in rows[2:]]


def _names(cell: str) -> list[str]:
    return re.findall(r"`([a-z_]+)`", cell)


def test_the_field_table_mirrors_the_docs() -> None:
    text = DOCS.read_text()
    # "### Fields and ranges": | `field` | `kind`, `kind` (or "every kind") | value |
    documented = {_names(row[0])[0]: frozenset(_names(row[1]) or EVERY)
                  for row in _markdown_table(text, "### Fields and ranges")}
    assert documented == {name: kinds for name, (kinds, _) in FIELDS.items()}
    # "## Messages": | `kind` | from → to | when | `field`, ... (besides the five every message has) |
    common = {name for name, (kinds, _) in FIELDS.items() if kinds == EVERY}
    listed = {_names(row[0])[0]: set(_names(row[3])) | common for row in _markdown_table(text, "## Messages")}
    assert listed == {kind: fields_of(kind) for kind in EVERY}


def test_the_client_imports_nothing_of_the_product() -> None:
    client = Path(__file__).with_name("wire_client.py")
    modules = {module.split(".")[0] for module, _, _ in imports_of(client)}
    assert modules <= set(sys.stdlib_module_names) | {"zmq"}, modules
