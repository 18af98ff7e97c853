"""A detector and a viewer written only from the docs (docs/wire-format.md, docs/deployment.md, ``stream-detect
checker --help``), as a third party would write them in another language.

Plain pyzmq and the standard library: nothing of this project is imported (a test reads this file's imports), so
what the real checker sends is checked against what the docs promise, not against the code that makes it.

`FIELDS` is the docs' "Fields and ranges" table, one row per field (`test_the_field_table_mirrors_the_docs` keeps the
two alike): a new wire field is a row there, its name in its kind's row of the docs' kinds table, and a row
here.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
import secrets
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import zmq

VERSION = 3
MAX_PAYLOAD = 64 * 1024
MAX_STEP_ID = 2**31 - 1
MAX_COUNT = 2**53 - 1
MAX_NAME = 512
MAX_HISTORY = 4096
MAX_STEPS = 2048
INPUT_PREFIXES = (b"keystep/", b"heartbeat/", b"onset/")  # what the checker's SUB subscribes to (--bind)
SEQ_RESTART = 1024  # a jump this big either way is a sender starting over

Check = Callable[[Any], bool]


# -- the value rules of the table ------------------------------------------------------------------------------------
def integer(lowest: int, highest: int) -> Check:
    return lambda v: type(v) is int and lowest <= v <= highest


def number(lowest: float = -math.inf, highest: float = math.inf) -> Check:
    return lambda v: type(v) in (int, float) and math.isfinite(v) and lowest <= v <= highest


def boolean(v: Any) -> bool:
    return type(v) is bool


def text(most: int) -> Check:
    return lambda v: isinstance(v, str) and len(v) <= most


def matching(pattern: str) -> Check:
    rule = re.compile(pattern)
    return lambda v: isinstance(v, str) and rule.fullmatch(v) is not None


def array(item: Check, most: int) -> Check:
    return lambda v: isinstance(v, list) and len(v) <= most and all(item(x) for x in v)


def nullable(check: Check) -> Check:
    return lambda v: v is None or check(v)


def one_of(*values: object) -> Check:
    return lambda v: any(type(v) is type(x) and v == x for x in values)


STEP_ID = integer(0, MAX_STEP_ID)
COUNTER = integer(0, MAX_COUNT)
TOKEN = matching(r"[A-Za-z0-9_.:-]{1,64}")
NAME = text(MAX_NAME)
STEP_IDS = array(STEP_ID, MAX_STEPS)
SCORE = number(0.0, 1.0)

DETECTOR_KINDS = ("keystep", "onset", "heartbeat")
VIEWER_KINDS = ("step", "alert", "retraction", "missing", "status", "checker")
EVERY = frozenset(DETECTOR_KINDS + VIEWER_KINDS)
FROM_DETECTOR = frozenset(DETECTOR_KINDS)
SEGMENT = frozenset({"keystep", "onset", "step"})
NAMED_STEP = frozenset({"keystep", "onset", "step", "alert", "retraction"})
LIVE = frozenset({"heartbeat", "status"})
RUN = frozenset({"step", "alert", "retraction", "missing", "status"})


def _in(*kinds: str) -> frozenset[str]:
    return frozenset(kinds)


LATENCY = number(0.0, 3_600_000.0)  # milliseconds


# field: (the kinds that carry it, its value rule); row for row the docs' table.
FIELDS: dict[str, tuple[frozenset[str], Check]] = {
    "version": (EVERY, one_of(VERSION)),
    "kind": (EVERY, one_of(*EVERY)),
    "stream_id": (EVERY, TOKEN),
    "seq": (EVERY, COUNTER),
    "timestamp": (EVERY, number()),
    "session": (FROM_DETECTOR, TOKEN),
    "history": (FROM_DETECTOR, array(STEP_ID, MAX_HISTORY)),
    "step": (NAMED_STEP, STEP_ID),
    "step_name": (NAMED_STEP, NAME),
    "start": (SEGMENT, number(0.0)),
    "end": (_in("keystep", "step"), number(0.0)),
    "confidence": (SEGMENT, SCORE),
    "index": (NAMED_STEP, integer(0, MAX_HISTORY - 1)),
    "before": (_in("onset"), STEP_IDS),
    "withdrawn": (_in("onset"), boolean),
    "evidence_steps": (FROM_DETECTOR, STEP_IDS),
    "evidence": (FROM_DETECTOR, array(SCORE, MAX_STEPS)),
    "real": (_in("keystep", "onset"), SCORE),
    "current": (LIVE, nullable(STEP_ID)),
    "frames": (LIVE, COUNTER),
    "dropped": (LIVE, COUNTER),
    "fps": (LIVE, number(0.0)),
    "ended": (LIVE, boolean),
    "stopped": (LIVE, one_of(True)),  # sent only when true
    **{name: (LIVE, LATENCY) for name in ("decode_ms", "features_ms", "detector_ms", "segmenter_ms")},
    "hop_ms": (_in("status"), LATENCY),
    "alert_out_ms": (_in("status"), LATENCY),
    "run": (RUN, matching(r"[0-9a-f]{12}")),
    "alert_id": (_in("alert", "retraction"), matching(r"[A-Za-z0-9_.:-]{1,64}#[0-9]+")),
    "missing": (_in("alert", "missing"), STEP_IDS),
    "missing_names": (_in("alert", "missing"), array(NAME, MAX_STEPS)),
    "undefined": (_in("alert"), boolean),
    "event_timestamp": (_in("alert"), number()),
    "replayed": (_in("alert", "missing"), boolean),
    "forgotten": (_in("alert"), nullable(STEP_ID)),
    "forgotten_name": (_in("alert"), nullable(NAME)),
    "forgotten_score": (_in("alert"), nullable(SCORE)),
    "rule": (_in("alert", "status"), one_of("weighted", "binary")),
    "probability": (_in("alert"), SCORE),
    "video_time": (_in("alert"), nullable(number(0.0))),
    "late_for": (_in("alert"), STEP_IDS),
    "probabilities": (_in("missing"), array(SCORE, MAX_STEPS)),
    "confirmed": (_in("retraction"), nullable(STEP_ID)),
    "confirmed_name": (_in("retraction"), nullable(NAME)),
    "missing_id": (_in("missing"), matching(r"[A-Za-z0-9_.:-]{1,64}#end")),
    "done": (_in("status"), STEP_IDS),
    "allowed": (_in("status"), STEP_IDS),
    "allowed_scores": (_in("status"), array(SCORE, MAX_STEPS)),
    "alerts": (_in("status"), COUNTER),
    "gaps": (_in("status"), COUNTER),
    "lost": (_in("status"), boolean),
    **{name: (_in("checker"), COUNTER) for name in (
        "streams", "lost_streams", "received", "malformed", "stream_limit", "evicted", "unknown_step", "over_budget",
        "unsendable", "denied", "stream_taken")},
}


OPTIONAL = frozenset({"stopped"})  # absent when false (the docs' "two exceptions"; ``stream_taken`` is always sent)


def fields_of(kind: str) -> set[str]:
    """The fields a message of ``kind`` carries (the docs' kinds table)."""
    return {name for name, (kinds, _) in FIELDS.items() if kind in kinds}


def problems(topic: bytes, payload: bytes, step_ids: Iterable[int]) -> list[str]:
    """Everything about one received message that the docs do not allow (empty: it conforms).

    Args:
        topic: frame 0.
        payload: frame 1.
        step_ids: the ids of the checker's graph (every step id the checker sends is one of them).
    """
    if len(payload) > MAX_PAYLOAD:
        return [f"{topic!r}: {len(payload)} bytes"]
    pairs: list[list[tuple[str, Any]]] = []  # every object's fields, to find one written twice

    def kept(fields: list[tuple[str, Any]]) -> dict[str, Any]:
        pairs.append(fields)
        return dict(fields)

    body = json.loads(payload.decode("utf-8"), parse_constant=lambda c: math.nan, object_pairs_hook=kept)
    kind, stream_id = body.get("kind"), body.get("stream_id")
    where = f"{kind}/{stream_id}"
    found = [f"{where}: a field written twice" for p in pairs if len(dict(p)) != len(p)]
    if topic != f"{kind}/{stream_id}".encode("ascii"):
        found.append(f"{where}: topic {topic!r}")
    if kind not in VIEWER_KINDS:
        return [*found, f"{where}: not a kind viewers get"]
    if not fields_of(kind) - OPTIONAL <= set(body) <= fields_of(kind):
        found.append(f"{where}: fields {sorted((set(body) ^ fields_of(kind)) - OPTIONAL)} differ from the docs")
    found += [f"{where}.{name} = {value!r:.80}" for name, value in body.items()
              if name in FIELDS and not FIELDS[name][1](value)]
    if found:
        return found
    return [f"{where}: {rule}" for rule, holds in _rules(body, set(step_ids)) if not holds]


def _rules(m: dict[str, Any], graph: set[int]) -> list[tuple[str, bool]]:
    """The rules between fields that the docs state, as (rule, holds)."""
    kind = m["kind"]
    ids = [m.get(name) for name in ("step", "current", "forgotten", "confirmed")]
    ids += [s for name in ("missing", "done", "allowed") for s in m.get(name, ())]
    rules = [("every step id is one of the checker's graph", all(s in graph for s in ids if s is not None))]
    if kind == "checker":
        rules.append(("stream_id is 'checker'", m["stream_id"] == "checker"))
    if kind == "step":
        rules.append(("end >= start", m["end"] >= m["start"]))
    if kind in ("alert", "retraction"):
        rules.append(("alert_id is '<stream_id>#<index>'", m["alert_id"] == f"{m['stream_id']}#{m['index']}"))
    if kind in ("alert", "missing"):
        rules.append(("missing_names names the first of missing", len(m["missing_names"]) <= len(m["missing"])))
    if kind == "alert":
        together = {m["forgotten"] is None, m["forgotten_name"] is None, m["forgotten_score"] is None}
        rules += [("forgotten, forgotten_name, forgotten_score null together", len(together) == 1),
                  ("forgotten is one of missing", m["forgotten"] is None or m["forgotten"] in m["missing"])]
    if kind == "retraction":
        rules.append(("confirmed and confirmed_name null together",
                      (m["confirmed"] is None) == (m["confirmed_name"] is None)))
    if kind == "missing":
        rules += [("missing_id is '<stream_id>#end'", m["missing_id"] == f"{m['stream_id']}#end"),
                  ("missing is never empty", bool(m["missing"])),
                  ("one probability per missing step", len(m["probabilities"]) == len(m["missing"]))]
    if kind == "status":
        rules += [("one allowed_scores item per allowed step", len(m["allowed_scores"]) == len(m["allowed"])),
                  ("an ended session has no next step", not m["ended"] or m["allowed"] == []),
                  ("only an ended session was stopped", not m.get("stopped") or m["ended"]),
                  ("an ended stream is never lost", not (m["ended"] and m["lost"]))]
    return rules


def run_of(session: str) -> str:
    """What viewers call a session: the first 12 hex characters of SHA-256 of ``"run:" + session``."""
    return hashlib.sha256(("run:" + session).encode("utf-8")).hexdigest()[:12]


# -- keys ------------------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class KeyPair:
    public: bytes
    secret: bytes | None


def read_key_file(path: Path) -> KeyPair:
    """A key file as docs/deployment.md describes it: skip '#' lines, take the quoted text of the key lines."""
    keys: dict[str, bytes] = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        line = line.strip()
        if line.startswith("#"):
            continue
        for name in ("public-key", "secret-key"):
            if line.startswith(f"{name} ="):
                keys[name] = line.split('"')[1].encode("ascii")
    return KeyPair(keys["public-key"], keys.get("secret-key"))


@dataclass(frozen=True)
class Curve:
    """A CURVE client's keys: the checker's public key and this client's pair (40-character Z85 texts)."""

    server: bytes
    public: bytes
    secret: bytes

    @classmethod
    def from_files(cls, server: Path, secret: Path) -> Curve:
        pair = read_key_file(secret)
        assert pair.secret is not None
        return cls(read_key_file(server).public, pair.public, pair.secret)

    def apply(self, sock: zmq.Socket) -> None:
        sock.setsockopt(zmq.CURVE_SERVERKEY, self.server)
        sock.setsockopt(zmq.CURVE_PUBLICKEY, self.public)
        sock.setsockopt(zmq.CURVE_SECRETKEY, self.secret)


def _socket(ctx: zmq.Context, kind: int, curve: Curve | None) -> zmq.Socket:
    sock = ctx.socket(kind)
    sock.setsockopt(zmq.LINGER, 0)
    if curve is not None:
        curve.apply(sock)
    return sock


# -- a detector ------------------------------------------------------------------------------------------------------
@dataclass
class Detector:
    """One stream's detector: an XPUB socket (it waits for the checker's three subscriptions before it sends), a
    session token, one ``seq`` counter for every message it sends, and the confirmed history."""

    ctx: zmq.Context
    endpoint: str
    stream_id: str
    curve: Curve | None = None
    session: str = field(default_factory=lambda: secrets.token_hex(6))  # a fresh random token per run
    seq: int = 0
    history: list[int] = field(default_factory=list)
    sent: list[dict[str, Any]] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.sock = _socket(self.ctx, zmq.XPUB, self.curve)
        self.sock.setsockopt(zmq.XPUB_VERBOSE, 1)  # the checker's subscriptions again after every reconnection
        self.sock.connect(self.endpoint)

    def wait_until_subscribed(self, timeout_s: float) -> bool:
        """Read subscriptions (byte 1, then the prefix) until the checker took all three input prefixes."""
        wanted = set(INPUT_PREFIXES)
        deadline = time.monotonic() + timeout_s
        while wanted and self.sock.poll(max(1, int((deadline - time.monotonic()) * 1000))):
            message = self.sock.recv()
            if message[:1] == b"\x01":
                wanted.discard(message[1:])
        return not wanted

    def send(self, kind: str, skip_seq: int = 0, **fields: Any) -> dict[str, Any]:
        """Send one message of ``kind``; ``skip_seq`` numbers that many messages as never sent (a gap)."""
        self.seq += skip_seq
        body = {"version": VERSION, "kind": kind, "stream_id": self.stream_id, "seq": self.seq,
                "timestamp": time.time(), "session": self.session, "history": list(self.history), **fields}
        self.seq += 1
        self.sock.send_multipart([f"{kind}/{self.stream_id}".encode("ascii"), json.dumps(body).encode("utf-8")])
        self.sent.append(body)
        return body

    def heartbeat(self, current: int | None = None, frames: int = 0, ended: bool = False,
                  stopped: bool = False) -> dict[str, Any]:
        said = {"stopped": True} if stopped else {}  # only when true: a checker from before it refuses the field
        return self.send("heartbeat", current=current, frames=frames, dropped=0, fps=5.0, ended=ended,
                         evidence_steps=[], evidence=[], decode_ms=1.5, features_ms=20.0, detector_ms=0.2,
                         segmenter_ms=0.05, **said)

    def onset(self, step: int, name: str, before: tuple[int, ...] = (), withdrawn: bool = False) -> dict[str, Any]:
        return self.send("onset", step=step, step_name=name, start=float(len(self.history)), confidence=0.75,
                         index=len(self.history) + len(before), before=list(before), withdrawn=withdrawn,
                         evidence_steps=[], evidence=[], real=1.0)

    def keystep(self, step: int, name: str, skip_seq: int = 0) -> dict[str, Any]:
        self.history.append(step)
        start = float(len(self.history) - 1)
        return self.send("keystep", skip_seq, step=step, step_name=name, start=start, end=start + 0.8,
                         confidence=0.9, index=len(self.history) - 1, evidence_steps=[], evidence=[], real=1.0)

    def close(self) -> None:
        self.sock.close()


# -- a viewer --------------------------------------------------------------------------------------------------------
@dataclass
class Viewer:
    """A SUB socket subscribed to everything; every message it receives is kept, as frames and as JSON."""

    ctx: zmq.Context
    endpoint: str
    curve: Curve | None = None
    frames: list[tuple[bytes, bytes]] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.sock = _socket(self.ctx, zmq.SUB, self.curve)
        self.sock.setsockopt(zmq.SUBSCRIBE, b"")
        self.sock.connect(self.endpoint)

    @property
    def messages(self) -> list[dict[str, Any]]:
        return [json.loads(payload) for _, payload in self.frames]

    def until(self, predicate: Callable[[list[dict[str, Any]]], bool], timeout_s: float) -> bool:
        """Receive until ``predicate(messages)`` holds or ``timeout_s`` passed."""
        deadline = time.monotonic() + timeout_s
        while not predicate(self.messages):
            left_ms = int((deadline - time.monotonic()) * 1000)
            if left_ms <= 0:
                return False
            if self.sock.poll(min(left_ms, 100)):
                while self.sock.poll(0):
                    topic, payload = self.sock.recv_multipart()
                    self.frames.append((topic, payload))
        return True

    def of(self, kind: str, stream_id: str) -> list[dict[str, Any]]:
        return [m for m in self.messages if m["kind"] == kind and m["stream_id"] == stream_id]

    def alerts_now(self) -> dict[tuple[str, str], dict[str, Any]]:
        """Each alert as it stands: per (run, alert_id), the copy received last (it wins), unless retracted."""
        latest: dict[tuple[str, str], dict[str, Any]] = {}
        for m in self.messages:
            if m["kind"] == "alert":
                latest[(m["run"], m["alert_id"])] = m
            elif m["kind"] == "retraction":
                latest.pop((m["run"], m["alert_id"]), None)
        return latest

    def checker_restarts(self, stream_id: str) -> int:
        """How often the stream's ``seq`` did not grow: each time, the checker had restarted."""
        seqs = [m["seq"] for m in self.messages if m["stream_id"] == stream_id and m["kind"] != "checker"]
        return sum(later <= earlier for earlier, later in zip(seqs, seqs[1:], strict=False))

    def close(self) -> None:
        self.sock.close()
