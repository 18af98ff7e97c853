"""The typed, versioned wire format between the detector, the checker and the viewers.

Every message is one ZeroMQ multipart message of exactly two frames (pyzmq does the framing)::

    frame 0  topic    ASCII  "<kind>/<stream_id>"   e.g. b"keystep/kitchen-cam"
    frame 1  payload  UTF-8  one JSON object        e.g. b'{"version": 1, "kind": "keystep", ...}'

Subscribers filter on the topic prefix (``b"alert/"`` gets every alert). The payload object holds
exactly the fields of the dataclass named by ``kind`` (no more, no fewer); tuples travel as JSON
arrays, ``None`` as ``null``; NaN and infinities are refused. Fields common to all kinds:

    version    int    WIRE_VERSION (1); a receiver refuses any other version
    kind       str    "keystep" | "heartbeat" | "alert" | "status"
    stream_id  str    1..64 characters from [A-Za-z0-9_.:-]; names one video stream
    seq        int    >= 0, per stream and per sender, +1 for every message sent
    timestamp  float  sender's wall clock (Unix seconds) when the message was made

Kinds (see each dataclass for its own fields): `KeyStepEvent` and `Heartbeat` go from a detector
to the checker; `Alert`, `Status` and a forwarded copy of each new `KeyStepEvent` go from the
checker to viewers. `KeyStepEvent` and `Heartbeat` carry the stream's whole confirmed-step
``history``, so a checker that restarts mid-stream rebuilds its state from the next message it
gets (the ZeroMQ guide's Clone pattern) and a lost message costs nothing. `Alert.alert_id` is
stable (``"<stream_id>#<index in history>"``): the checker re-sends each stream's recent alerts with
its periodic status (so late or reconnecting viewers catch up), and receivers de-duplicate by it
within a ``session`` (a new detector session on the stream starts its indexes, and so its ids, over).

Decoding never unpickles anything: `decode` checks the frame count, the size (`MAX_MESSAGE_BYTES`),
the topic, the JSON, the version and every field's type and range, and raises `MessageError`
otherwise; receivers drop and count such messages.
"""

from __future__ import annotations

import json
import math
import re
import types
import typing
from dataclasses import dataclass, fields
from typing import Any, ClassVar, Final, Union

WIRE_VERSION: Final = 1
MAX_MESSAGE_BYTES: Final = 64 * 1024  # a history of thousands of steps still fits; anything bigger is refused
MAX_HISTORY: Final = 4096  # confirmed key-steps per stream a message may carry
MAX_TEXT: Final = 256  # characters in a free-text field (step names)
STREAM_ID_RULE: Final = "1-64 characters from [A-Za-z0-9_.:-]"  # what `is_stream_id` accepts, for error messages
_STREAM_ID = re.compile(r"[A-Za-z0-9_.:\-]{1,64}")


class MessageError(ValueError):
    """A received message is malformed, oversized or of an unknown kind/version."""


def is_stream_id(value: object) -> bool:
    """Whether ``value`` may name a stream on the wire (`STREAM_ID_RULE`).

    Args:
        value: a candidate stream id (from a message or a command line).

    Returns:
        True if messages may carry it as ``stream_id``.
    """
    return isinstance(value, str) and _STREAM_ID.fullmatch(value) is not None


@dataclass(frozen=True)
class Message:
    """Fields every message has; subclasses add their own."""

    KIND: ClassVar[str] = ""

    stream_id: str
    seq: int
    timestamp: float

    def __post_init__(self) -> None:
        _validate(self)

    @property
    def kind(self) -> str:
        """The ``kind`` string written on the wire."""
        return self.KIND

    @property
    def topic(self) -> bytes:
        """Frame 0: ``"<kind>/<stream_id>"``."""
        return f"{self.KIND}/{self.stream_id}".encode("ascii")


@dataclass(frozen=True)
class KeyStepEvent(Message):
    """A key-step segment the online segmenter just confirmed (detector -> checker).

    Attributes:
        session: random token of the detector run; a new session resets the stream's checker.
        step: taxonomy id of the key-step.
        step_name: readable name from the detector checkpoint.
        start: segment start, seconds of video time.
        end: segment end, seconds of video time.
        confidence: mean class probability over the segment, in [0, 1].
        index: position of this step in ``history`` (0-based).
        history: every key-step confirmed so far in this session, this one last.
    """

    KIND: ClassVar[str] = "keystep"

    session: str
    step: int
    step_name: str
    start: float
    end: float
    confidence: float
    index: int
    history: tuple[int, ...]


@dataclass(frozen=True)
class Heartbeat(Message):
    """Periodic liveness and stream statistics (detector -> checker), with the full history.

    Attributes:
        session: random token of the detector run.
        history: every key-step confirmed so far in this session.
        current: key-step the detector sees right now (None: background or nothing yet).
        frames: frames processed so far.
        dropped: frames a live source dropped to stay real time.
        fps: frames processed per second, recent average.
        ended: true on the last heartbeat of a stream (end of file or shut down).
    """

    KIND: ClassVar[str] = "heartbeat"

    session: str
    history: tuple[int, ...]
    current: int | None
    frames: int
    dropped: int
    fps: float
    ended: bool


@dataclass(frozen=True)
class Alert(Message):
    """A key-step done before its pre-conditions (checker -> viewers).

    Attributes:
        alert_id: stable id ``"<stream_id>#<index>"``, unique within the session; re-sent alerts (after a
            checker restart) repeat it.
        session: detector session the step belongs to.
        step: the key-step that was done too early.
        step_name: its name in the task graph.
        index: its position in the stream's history.
        missing: pre-conditions not done yet (step ids).
        missing_names: their names.
        undefined: the step has no pre-conditions in the graph (counted as a mistake by the protocol).
        event_timestamp: ``timestamp`` of the message that brought the step (for latency figures).
        replayed: false only on the alert sent the moment its key-step arrived; true on an alert rebuilt
            from history (after a checker restart or a lost event) and on the periodic re-sends.
    """

    KIND: ClassVar[str] = "alert"

    alert_id: str
    session: str
    step: int
    step_name: str
    index: int
    missing: tuple[int, ...]
    missing_names: tuple[str, ...]
    undefined: bool
    event_timestamp: float
    replayed: bool


@dataclass(frozen=True)
class Status(Message):
    """The checker's view of one stream (checker -> viewers), sent on every change and periodically.

    Attributes:
        session: detector session.
        done: steps recorded as done, in order.
        allowed: steps whose pre-conditions are all met now.
        current: step the detector sees right now (None: background).
        alerts: number of alerts raised on this stream.
        frames: frames the detector processed.
        dropped: frames the source dropped.
        fps: detector frame rate.
        gaps: messages from the detector the checker never received (recovered from history).
        ended: the stream has ended.
    """

    KIND: ClassVar[str] = "status"

    session: str
    done: tuple[int, ...]
    allowed: tuple[int, ...]
    current: int | None
    alerts: int
    frames: int
    dropped: int
    fps: float
    gaps: int
    ended: bool


KINDS: Final[dict[str, type[Message]]] = {cls.KIND: cls for cls in (KeyStepEvent, Heartbeat, Alert, Status)}


def encode(message: Message) -> list[bytes]:
    """Serialise a message to its two frames ``[topic, payload]``.

    Args:
        message: any of the message dataclasses.

    Returns:
        The multipart frames to send.
    """
    # Fields are numbers, strings, None or tuples of them: read them as they are (asdict deep-copies every
    # history item, 14x slower for a 4096-step history).
    body = {"version": WIRE_VERSION, "kind": message.KIND}
    body.update((f.name, getattr(message, f.name)) for f in fields(message))
    payload = json.dumps(body, allow_nan=False, separators=(",", ":")).encode("utf-8")
    if len(payload) > MAX_MESSAGE_BYTES:
        raise MessageError(f"{message.KIND} message of {len(payload)} bytes exceeds {MAX_MESSAGE_BYTES}")
    return [message.topic, payload]


def decode(frames: list[bytes]) -> Message:
    """Parse and validate received frames; never trusts the sender.

    Args:
        frames: the multipart message as received.

    Returns:
        The typed message.

    Raises:
        MessageError: wrong frame count, oversized, bad UTF-8/JSON, unknown kind or version, a missing,
            extra or ill-typed field, or a topic that does not match the payload.
    """
    if len(frames) != 2:
        raise MessageError(f"expected 2 frames, got {len(frames)}")
    topic, payload = bytes(frames[0]), bytes(frames[1])
    if len(payload) > MAX_MESSAGE_BYTES or len(topic) > 128:
        raise MessageError(f"message of {len(payload)} bytes exceeds {MAX_MESSAGE_BYTES}")
    try:
        body = json.loads(payload.decode("utf-8"), parse_constant=_refuse_constant)
    except (ValueError, RecursionError) as err:  # bad UTF-8 or JSON, NaN, too many digits, nesting too deep
        raise MessageError(f"payload is not UTF-8 JSON: {err}") from None
    if not isinstance(body, dict):
        raise MessageError("payload is not a JSON object")
    version = body.pop("version", None)
    if type(version) is not int or version != WIRE_VERSION:
        raise MessageError(f"unsupported version {version!r} (this program speaks {WIRE_VERSION})")
    kind = body.pop("kind", None)
    cls = KINDS.get(kind) if isinstance(kind, str) else None
    if cls is None:
        raise MessageError(f"unknown kind {kind!r}")
    names = [f.name for f in fields(cls)]
    missing = [n for n in names if n not in body]
    extra = [k for k in body if k not in names]
    if missing or extra:
        raise MessageError(f"{kind}: missing fields {missing}, unexpected fields {extra}")
    hints = _hints(cls)
    values = {n: _coerce(body[n], hints[n], f"{kind}.{n}") for n in names}
    message = cls(**values)
    if message.topic != topic:
        raise MessageError(f"topic {topic[:64]!r} does not match the payload ({message.topic!r})")
    return message


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not allowed")


_HINTS: dict[type, dict[str, Any]] = {}


def _hints(cls: type) -> dict[str, Any]:
    if cls not in _HINTS:
        _HINTS[cls] = typing.get_type_hints(cls)
    return _HINTS[cls]


def _coerce(value: Any, hint: Any, where: str) -> Any:
    """Check one JSON value against a field type; JSON arrays become tuples."""
    origin = typing.get_origin(hint)
    if origin in (Union, types.UnionType):
        if value is None and type(None) in typing.get_args(hint):
            return None
        inner = [a for a in typing.get_args(hint) if a is not type(None)]
        return _coerce(value, inner[0], where)
    if origin is tuple:
        if not isinstance(value, list):
            raise MessageError(f"{where} must be an array")
        item = typing.get_args(hint)[0]
        if item is int:  # the histories: one pass in C instead of a call per item
            if not all(type(v) is int for v in value):  # bool is not int here, as in the scalar case
                raise MessageError(f"{where}[] must be an integer")
            return tuple(value)
        return tuple(_coerce(v, item, f"{where}[]") for v in value)
    if hint is bool:
        if not isinstance(value, bool):
            raise MessageError(f"{where} must be true or false")
        return value
    if hint is int:
        if not isinstance(value, int) or isinstance(value, bool):
            raise MessageError(f"{where} must be an integer")
        return value
    if hint is float:
        if not isinstance(value, int | float) or isinstance(value, bool):
            raise MessageError(f"{where} must be a number")
        try:
            return float(value)
        except OverflowError:  # an integer literal beyond the float range
            raise MessageError(f"{where} is not finite") from None
    if hint is str:
        if not isinstance(value, str):
            raise MessageError(f"{where} must be a string")
        return value
    raise MessageError(f"{where}: unsupported field type {hint!r}")  # pragma: no cover - a programming error


def _validate(message: Message) -> None:
    """Range checks shared by construction and decoding, so nothing invalid is ever sent either."""
    if not is_stream_id(message.stream_id):
        raise MessageError(f"stream_id {message.stream_id!r} must be {STREAM_ID_RULE}")
    if not isinstance(message.seq, int) or message.seq < 0:
        raise MessageError(f"seq {message.seq!r} must be a non-negative integer")
    for f in fields(message):
        value = getattr(message, f.name)
        if isinstance(value, float) and not math.isfinite(value):
            raise MessageError(f"{message.KIND}.{f.name} is not finite")
        if isinstance(value, str) and len(value) > MAX_TEXT:
            raise MessageError(f"{message.KIND}.{f.name} is longer than {MAX_TEXT} characters")
        if isinstance(value, tuple) and len(value) > MAX_HISTORY:
            raise MessageError(f"{message.KIND}.{f.name} has more than {MAX_HISTORY} items")
        if isinstance(value, int) and not isinstance(value, bool) and value < 0:
            raise MessageError(f"{message.KIND}.{f.name} = {value} must not be negative")
    if isinstance(message, KeyStepEvent):
        if not 0.0 <= message.confidence <= 1.0:
            raise MessageError(f"keystep.confidence = {message.confidence} is not in [0, 1]")
        if message.end < message.start:
            raise MessageError(f"keystep.end = {message.end} is before start = {message.start}")
        if not (0 <= message.index < len(message.history)) or message.history[message.index] != message.step:
            raise MessageError(f"keystep.index = {message.index} does not point at step {message.step} in history")
    if isinstance(message, Alert) and len(message.missing) != len(message.missing_names):
        raise MessageError("alert.missing and alert.missing_names differ in length")
