"""The typed, versioned wire format between the detector, the checker and the viewers.

Every message is one ZeroMQ multipart message of exactly two frames (pyzmq does the framing)::

    frame 0  topic    ASCII  "<kind>/<stream_id>"   e.g. b"keystep/kitchen-cam"
    frame 1  payload  UTF-8  one JSON object        e.g. b'{"version": 3, "kind": "keystep", ...}'

Subscribers filter on the topic prefix (``b"alert/"`` gets every alert). The checker's input is a bound SUB socket
subscribed to `INPUT_TOPICS` (a detector connects a PUB, or an XPUB to learn when the subscription has arrived);
its output a bound XPUB that greets every new subscription with a ``checker`` message (viewers connect SUB).
The payload object holds exactly the fields of the dataclass named by ``kind`` (no more, no fewer, none twice; a
field added within the version, a class's ``ADDED``, may be absent, and one of its ``SAID_WHEN_TRUE`` is sent only
when true); tuples travel as JSON arrays, ``None`` as ``null``; NaN and infinities are refused. Fields common to
all kinds:

    version    int    WIRE_VERSION (3); a receiver refuses any other version
    kind       str    "keystep" | "heartbeat" | "onset" (detector -> checker); "step" | "alert" | "missing" |
                      "retraction" | "status" | "checker" (checker -> viewers)
    stream_id  str    1..64 characters from [A-Za-z0-9_.:-]; names one video stream ("checker" for kind checker)
    seq        int    0..2^53-1: one counter per stream and sender, shared by every kind it sends, +1 for each
                      message (a detector's onsets, key-steps and heartbeats count together; so do the checker's
                      messages of one stream, and its ``checker`` messages have their own)
    timestamp  float  sender's wall clock (Unix seconds) when the message was made

Kinds (see each dataclass for its own fields): `KeyStepEvent`, `KeyStepOnset` (a key-step begun, before it is
confirmed) and `Heartbeat` go from a detector to the checker; `StepEvent` (each new key-step, without the detector's
session token or history), `Alert`, `Retraction` (an early alert withdrawn), `MissingSteps` (the required steps a
session that ended never did), `Status` and `CheckerHealth` go from the checker to viewers. `KeyStepEvent` and
`Heartbeat` carry the stream's whole confirmed-step ``history``, so a checker that restarts mid-stream rebuilds its
state from the next message it gets (the ZeroMQ guide's Clone pattern) and a lost message costs nothing. Viewers
never get the detector's ``session`` token: the checker names a detector run to them by ``run``, a digest of
``"run:" + session`` (`run_of`).
`Alert.alert_id` is stable (``"<stream_id>#<index in history>"``): the checker re-sends each stream's recent
alerts with its periodic status (so late or reconnecting viewers catch up), and receivers de-duplicate by it
within a ``run`` (a new detector session on the stream starts its indexes, and so its ids, over). A
`MissingSteps` report is re-sent the same way, with the id ``"<stream_id>#end"`` (one report per run).

Ranges (shared with the file loaders, `graphs.limits`): step ids (``step``, ``current``, ``forgotten``,
``confirmed``, and every item of ``history``, ``missing``, ``done``, ``allowed``, ``before``, ``evidence_steps``,
``late_for``) lie
in 0..2^31-1; probabilities and scores (``allowed_scores``, ``forgotten_score``, ``evidence``, ``real``,
``probability``, ``probabilities``) in [0, 1]; stage latencies (`LATENCY_FIELDS`, milliseconds) in
0..`MAX_LATENCY_MS`; ``index`` in 0..`MAX_HISTORY`-1; counters in
0..2^53-1; step names hold at most 512 characters; a history at most `MAX_HISTORY` items and a step list at most
2048. Every message the checker builds fits `MAX_MESSAGE_BYTES` by construction: an alert whose pre-condition
names would not fit carries the names of the first ones only (`Alert.fitted`, `MissingSteps.fitted`; ``missing``
always lists them all).

Decoding never unpickles anything: `decode` checks the frame count, the size (`MAX_MESSAGE_BYTES`),
the topic, the JSON and the version, and hands the fields to the class of their ``kind`` (`Message.from_payload`),
which checks every field's type and range; it raises `MessageError` otherwise, and receivers drop and count such
messages. Each message class owns its checks, run when it is built as when it is received (nothing invalid is sent
either): a field's declared type carries its range (``step: StepId``, ``real: Score``: a `Check`), and the class's
``_check_together`` the rules that read several fields (an alert's ``alert_id`` is ``"<stream_id>#<index>"``).
"""

from __future__ import annotations

import hashlib
import json
import math
import re
import types
import typing
from collections.abc import Callable
from dataclasses import dataclass, fields, replace
from typing import Annotated, Any, ClassVar, Final, Literal, TypeVar, Union

from graphs.common.safe_text import quoted, shortened
from graphs.limits import MAX_NAME, MAX_STEP_ID, MAX_STEPS

# 2: viewers get `run` instead of the session token, `StepEvent`, `CheckerHealth`, `lost`; 3: the detector's evidence
# (`evidence_steps`, `evidence`, `real`), the alert's `probability`, `video_time` and `late_for`, the report's
# `probabilities`.
WIRE_VERSION: Final = 3
MAX_MESSAGE_BYTES: Final = 64 * 1024  # a history of thousands of steps still fits; anything bigger is refused
MAX_HISTORY: Final = 4096  # confirmed key-steps per stream a message may carry
MAX_TEXT: Final = MAX_NAME  # characters in a free-text field (step names), as the file loaders allow
MAX_COUNT: Final = 2**53 - 1  # counters and seq: exact in every JSON reader (a double holds integers up to 2^53)
# The longest topic read: "<kind>/<stream id>" is at most 10 + 1 + 64 bytes; a longer one is refused before its payload.
MAX_TOPIC_BYTES: Final = 128
MAX_STREAM_ID: Final = 64  # characters of a stream id
STREAM_ID_RULE: Final = f"1-{MAX_STREAM_ID} characters from [A-Za-z0-9_.:-]"  # what `is_stream_id` accepts, for errors
CHECKER_STREAM: Final = "checker"  # the stream_id of the checker's own `CheckerHealth` messages
_STREAM_ID = re.compile(rf"[A-Za-z0-9_.:\-]{{1,{MAX_STREAM_ID}}}")
# Which procedure-question rule gave a message's scores (`graphs.procedure_queries.ProcedureQueries.rule`).
RULES: Final = ("weighted", "binary")
# Per-stage latencies (`Heartbeat`, `Status`, each declared `Latency`), in milliseconds: 0..MAX_LATENCY_MS.
LATENCY_FIELDS: Final = ("decode_ms", "features_ms", "detector_ms", "segmenter_ms", "hop_ms", "alert_out_ms")
MAX_LATENCY_MS: Final = 3_600_000.0  # an hour: a longer "latency" is a broken clock, not a measurement


class MessageError(ValueError):
    """A received message is malformed, oversized or of an unknown kind/version."""


def run_of(session: str) -> str:
    """The name viewers get for a detector run: a digest of its session token, never the token itself.

    The same session always gives the same ``run`` (a restarted checker names it the same, so viewers still
    de-duplicate its re-sent alerts), and the token cannot be read back from it.

    Args:
        session: the detector's session token.

    Returns:
        12 hexadecimal characters.
    """
    return hashlib.sha256(b"run:" + session.encode("utf-8")).hexdigest()[:12]


def is_stream_id(value: object) -> bool:
    """Whether ``value`` may name a stream on the wire (`STREAM_ID_RULE`).

    Args:
        value: a candidate stream id (from a message or a command line).

    Returns:
        True if messages may carry it as ``stream_id``.
    """
    return isinstance(value, str) and _STREAM_ID.fullmatch(value) is not None


@dataclass(frozen=True)
class Check:
    """The range of one kind of field: a reusable validator, declared with the field's type (``step: StepId``).

    A value is checked by the type it holds, not the one declared: a message built in code may hold an int where a
    float is declared, and it is then checked (and sent) as a counter. Decoding turns every number of a float field
    into a float first.

    Attributes:
        highest: an integer lies in 0..highest.
        floats: a float is ``"any"`` finite number, a ``"score"`` in [0, 1], or a ``"latency"`` in 0..`MAX_LATENCY_MS`.
        token: a string is a token (`STREAM_ID_RULE`: ``session``, ``run``), not free text.
        items: what a tuple holds: ``"step"`` ids, ``"score"``s or ``"text"``.
        longest: the most items a tuple may hold.
    """

    highest: int = MAX_COUNT
    floats: Literal["any", "score", "latency"] = "any"
    token: bool = False
    items: Literal["step", "score", "text"] = "text"
    longest: int = MAX_STEPS

    def __call__(self, kind: str, name: str, value: object) -> None:
        """Refuse ``value`` of the field ``<kind>.<name>`` out of range (`MessageError`); None and bools pass."""
        if isinstance(value, bool) or value is None:
            return
        if isinstance(value, float):
            if not math.isfinite(value):
                raise MessageError(f"{kind}.{name} is not finite")
            if self.floats == "latency" and not 0.0 <= value <= MAX_LATENCY_MS:
                raise MessageError(f"{kind}.{name} = {value} must be in 0..{MAX_LATENCY_MS:.0f}")
            if self.floats == "score" and not 0.0 <= value <= 1.0:
                raise MessageError(f"{kind}.{name} = {value} is not in [0, 1]")
        elif isinstance(value, int):
            if not 0 <= value <= self.highest:
                raise MessageError(f"{kind}.{name} = {shortened(str(value), 40)} must be in 0..{self.highest}")
        elif isinstance(value, str):
            if self.token and not is_stream_id(value):
                raise MessageError(f"{kind}.{name} {quoted(value)} must be {STREAM_ID_RULE}")
            if len(value) > MAX_TEXT:
                raise MessageError(f"{kind}.{name} is longer than {MAX_TEXT} characters")
        elif isinstance(value, tuple):
            self._items(kind, name, value)

    def _items(self, kind: str, name: str, items: tuple[Any, ...]) -> None:
        """Length and range of a tuple: step ids, scores, or names."""
        if len(items) > self.longest:
            raise MessageError(f"{kind}.{name} has more than {self.longest} items")
        if self.items == "step":
            if items and not (min(items) >= 0 and max(items) <= MAX_STEP_ID):  # min/max run in C: one pass each
                raise MessageError(f"{kind}.{name}[] must be step ids in 0..{MAX_STEP_ID}")
        elif self.items == "score":
            if not all(0.0 <= item <= 1.0 for item in items):  # also refuses NaN (min/max would let it through)
                raise MessageError(f"{kind}.{name}[] must be numbers in [0, 1]")
        elif any(len(item) > MAX_TEXT for item in items):
            raise MessageError(f"{kind}.{name}[] is longer than {MAX_TEXT} characters")


PLAIN: Final = Check()  # a field declared without one: counters, timestamps, free text, names
_STEP: Final = Check(highest=MAX_STEP_ID, items="step")
_SCORE: Final = Check(floats="score", items="score")
# The field types that carry a `Check` (a field of a plain type gets `PLAIN`):
StepId = Annotated[int, _STEP]  # a task-graph step id, 0..MAX_STEP_ID
StepIds = Annotated[tuple[int, ...], _STEP]  # at most MAX_STEPS of them
History = Annotated[tuple[int, ...], Check(highest=MAX_STEP_ID, items="step", longest=MAX_HISTORY)]
Index = Annotated[int, Check(highest=MAX_HISTORY - 1)]  # a position in a history
Score = Annotated[float, _SCORE]  # a probability or score, [0, 1]
Scores = Annotated[tuple[float, ...], _SCORE]
Latency = Annotated[float, Check(floats="latency")]  # milliseconds, 0..MAX_LATENCY_MS
Token = Annotated[str, Check(token=True)]  # a session token or a run name (STREAM_ID_RULE)


def _check_of(hint: Any) -> Check:
    """The `Check` a field's declared type carries (``X``, or ``X | None``), `PLAIN` if none."""
    for candidate in (hint, *typing.get_args(hint)):
        if typing.get_origin(candidate) is Annotated:
            check: Check = candidate.__metadata__[0]
            return check
    return PLAIN


def _check_stable_id(kind: str, name: str, value: str, expected: str, form: str) -> None:
    """An id a receiver de-duplicates by must be the one its other fields give (``form`` says how it is made)."""
    if value != expected:
        raise MessageError(f"{kind}.{name} {quoted(value)} must be '{form}'")


def _check_evidence(kind: str, steps: tuple[int, ...], evidence: tuple[float, ...]) -> None:
    """A detector's evidence: one probability per step, no step twice."""
    if len(evidence) != len(steps):
        raise MessageError(f"{kind}.evidence has {len(evidence)} items for {len(steps)} evidence_steps")
    if len(set(steps)) != len(steps):
        raise MessageError(f"{kind}.evidence_steps names a step twice")


def _check_fps(kind: str, fps: float) -> None:
    if fps < 0:
        raise MessageError(f"{kind}.fps = {fps} must not be negative")


def _check_names(kind: str, names: tuple[str, ...], missing: tuple[int, ...]) -> None:
    """``missing_names`` names the first of ``missing`` (all, unless they would not fit one message)."""
    if len(names) > len(missing):
        raise MessageError(f"{kind}.missing_names has more names than {kind}.missing has steps")


def _check_stopped(kind: str, stopped: bool, ended: bool) -> None:
    """Only a session that ended can have been stopped."""
    if stopped and not ended:
        raise MessageError(f"{kind}.stopped is true while {kind}.ended is false")


def _check_rule(kind: str, rule: str) -> None:
    if rule not in RULES:
        raise MessageError(f"{kind}.rule {quoted(rule, 40)} must be one of {', '.join(RULES)}")


@dataclass(frozen=True)
class Message:
    """Fields every message has; subclasses add their own."""

    KIND: ClassVar[str] = ""
    # Fields added to a kind within its version: a peer from before them leaves them out, and they take their default.
    ADDED: ClassVar[frozenset[str]] = frozenset()
    # ADDED booleans left out of the payload while false: a peer of this version from before them refuses any field it
    # does not know, so only the rare message that has something to say in one carries it (`encode_payload`).
    SAID_WHEN_TRUE: ClassVar[frozenset[str]] = frozenset()

    stream_id: str
    seq: int
    timestamp: float

    def __post_init__(self) -> None:
        """Refuse a message out of range (`MessageError`), built here or received: nothing invalid is ever sent."""
        if not is_stream_id(self.stream_id):
            raise MessageError(f"stream_id {quoted(self.stream_id)} must be {STREAM_ID_RULE}")
        kind = self.KIND
        for name, check in self.field_checks():
            value = getattr(self, name)
            if value is not None and value.__class__ is not bool:  # neither has a range: no call (the hot path)
                check(kind, name, value)
        self._check_together()

    def _check_together(self) -> None:
        """The checks of this kind that read several fields, after each field's own `Check`."""

    @classmethod
    def field_checks(cls) -> tuple[tuple[str, Callable[[str, str, object], None]], ...]:
        """``(field name, its Check)`` of every field, in order (built once per class; the bound ``__call__``, a
        lookup less per field)."""
        checks = _FIELD_CHECKS.get(cls)
        if checks is None:
            hints = typing.get_type_hints(cls, include_extras=True)
            checks = _FIELD_CHECKS[cls] = tuple((name, _check_of(hints[name]).__call__) for name in _field_names(cls))
        return checks

    @classmethod
    def from_payload(cls, body: dict[str, Any]) -> Message:
        """The message of this kind a decoded payload holds (``version`` and ``kind`` taken out).

        Args:
            body: the payload's other fields, as JSON read them.

        Raises:
            MessageError: a missing or extra field, a value of the wrong type or out of range.
        """
        kind = cls.KIND
        names = _field_names(cls)
        missing = [n for n in names if n not in body and n not in cls.ADDED]
        extra = [k for k in body if k not in names]
        if missing or extra:
            raise MessageError(f"{kind}: missing fields {missing}, unexpected fields {shortened(str(extra), 160)}")
        return cls(**{name: coerce(body[name]) for name, coerce in _coercers(cls) if name in body})

    @property
    def kind(self) -> str:
        """The ``kind`` string written on the wire."""
        return self.KIND

    @property
    def topic(self) -> bytes:
        """Frame 0: ``"<kind>/<stream_id>"``."""
        return f"{self.KIND}/{self.stream_id}".encode("ascii")


@dataclass(frozen=True)
class KeyStepSegment(Message):
    """The fields of a confirmed key-step segment, shared by the detector's event and the viewers' copy of it.

    Attributes:
        step: taxonomy id of the key-step.
        step_name: its name (the detector checkpoint's on a `KeyStepEvent`, the task graph's on a `StepEvent`).
        start: segment start, seconds of video time.
        end: segment end, seconds of video time.
        confidence: mean class probability over the segment, in [0, 1].
        index: position of this step in the session's history (0-based).
    """

    step: StepId
    step_name: str
    start: float
    end: float
    confidence: float
    index: Index

    def _check_together(self) -> None:
        if not 0.0 <= self.confidence <= 1.0:
            raise MessageError(f"{self.KIND}.confidence = {self.confidence} is not in [0, 1]")
        if self.start < 0:
            raise MessageError(f"{self.KIND}.start = {self.start} must not be negative")
        if self.end < self.start:
            raise MessageError(f"{self.KIND}.end = {self.end} is before start = {self.start}")


@dataclass(frozen=True)
class KeyStepEvent(KeyStepSegment):
    """A key-step segment the online segmenter just confirmed (detector -> checker).

    Attributes (besides the segment's, `KeyStepSegment`):
        session: random token of the detector run; a new session resets the stream's checker.
        history: every key-step confirmed so far in this session, this one last (``history[index] == step``).
        evidence_steps: the key-steps the detector reports evidence for (its classes; may be empty).
        evidence: for each of ``evidence_steps``, the even-odds probability that it was done before this step
            started, from the detector's output alone (`recognition.evidence`, formula E3), in [0, 1].
        real: the probability that this detection is real (formula E4), in [0, 1]; 1 from a detector that does not
            measure it.
    """

    KIND: ClassVar[str] = "keystep"

    session: Token
    history: History
    evidence_steps: StepIds = ()
    evidence: Scores = ()
    real: Score = 1.0

    def _check_together(self) -> None:
        super()._check_together()
        if self.history[self.index : self.index + 1] != (self.step,):
            raise MessageError(f"keystep.index = {self.index} does not point at step {self.step} in history")
        _check_evidence(self.KIND, self.evidence_steps, self.evidence)


@dataclass(frozen=True)
class Heartbeat(Message):
    """Periodic liveness and stream statistics (detector -> checker), with the full history.

    Attributes:
        session: random token of the detector run.
        history: every key-step confirmed so far in this session.
        current: key-step the detector sees right now (None: background or nothing yet).
        frames: frames processed so far.
        dropped: frames a live source dropped to stay real time.
        fps: frames processed per second, recent average (on the last heartbeats, the whole session's).
        ended: true on the last heartbeat of a stream (end of file or shut down).
        stopped: true on the last heartbeat of a session its detector was stopped in (Ctrl-C, SIGTERM, told to stop)
            before its source ended; false (left out of the payload) on every other heartbeat.
        evidence_steps: as `KeyStepEvent.evidence_steps`.
        evidence: for each of ``evidence_steps``, the even-odds probability that it was done by now (formula E3);
            the checker's end-of-session report reads the last heartbeat's.
        decode_ms, features_ms, detector_ms, segmenter_ms: mean milliseconds per frame of each stage since the
            previous heartbeat (`LATENCY_FIELDS`; 0 when no frame was processed): a frame's arrival at the reader to
            the model taking it, the feature extractor, the MiniROAD step, the segmenter and the evidence.
    """

    KIND: ClassVar[str] = "heartbeat"
    ADDED: ClassVar[frozenset[str]] = frozenset({"stopped"})  # absent (false) from a detector before it
    SAID_WHEN_TRUE: ClassVar[frozenset[str]] = frozenset({"stopped"})

    session: Token
    history: History
    current: StepId | None
    frames: int
    dropped: int
    fps: float
    ended: bool
    evidence_steps: StepIds = ()
    evidence: Scores = ()
    decode_ms: Latency = 0.0
    features_ms: Latency = 0.0
    detector_ms: Latency = 0.0
    segmenter_ms: Latency = 0.0
    stopped: bool = False

    def _check_together(self) -> None:
        _check_evidence(self.KIND, self.evidence_steps, self.evidence)
        _check_fps(self.KIND, self.fps)
        _check_stopped(self.KIND, self.stopped, self.ended)


@dataclass(frozen=True)
class KeyStepOnset(Message):
    """A key-step announced before it ends (detector -> checker, ``--alert-on onset``), or the withdrawal of one.

    The online segmenter announces a step seen with confidence for ``--onset-frames`` frames; the checker alerts on it
    at once if it is done too early. It is provisional: the confirmed `KeyStepEvent` at ``index`` follows (its alert
    repeats the same ``alert_id``), or it turns out to be another step or none, and the checker retracts the alert.

    Attributes:
        session: random token of the detector run.
        history: every key-step confirmed so far in this session.
        step: the key-step seen.
        step_name: its name (the detector checkpoint's).
        start: when its run started, seconds of video time.
        confidence: mean class probability over the run so far, in [0, 1].
        index: the position it will take in the history: ``len(history) + len(before)``.
        before: the steps that will be confirmed before it (the segment still open when it began).
        withdrawn: true when the announcement is withdrawn: the run will not be confirmed as this step.
        evidence_steps, evidence: as on `KeyStepEvent`, before this run started.
        real: the probability that this run is a real instance of the step, from the run so far (formula E4).
    """

    KIND: ClassVar[str] = "onset"

    session: Token
    history: History
    step: StepId
    step_name: str
    start: float
    confidence: float
    index: Index
    before: StepIds
    withdrawn: bool
    evidence_steps: StepIds = ()
    evidence: Scores = ()
    real: Score = 1.0

    def _check_together(self) -> None:
        """An announcement's position follows the steps before it, and its run a real time and confidence."""
        if self.index != len(self.history) + len(self.before):
            raise MessageError(f"onset.index = {self.index} must be len(history) + len(before) "
                               f"({len(self.history) + len(self.before)})")
        if not 0.0 <= self.confidence <= 1.0:
            raise MessageError(f"onset.confidence = {self.confidence} is not in [0, 1]")
        if self.start < 0:
            raise MessageError(f"onset.start = {self.start} must not be negative")
        _check_evidence(self.KIND, self.evidence_steps, self.evidence)


@dataclass(frozen=True)
class Retraction(Message):
    """An early alert withdrawn (checker -> viewers): it no longer holds. Another step was confirmed at its position;
    or its own step was, and with the evidence of the whole segment the checker no longer finds it a mistake; or none
    was (`streaming.session_verdict.retraction_reason` says which, in words).

    Attributes:
        alert_id: the retracted alert's id (``"<stream_id>#<index>"``).
        run: the detector run (`run_of` its session).
        step: the step the early alert named.
        step_name: its name in the task graph.
        index: the position in the history the alert was raised for.
        confirmed: the step confirmed at that position: another step, or ``step`` itself when, with the whole segment
            seen, it is no longer likely a mistake: its own detection doubted, or its pre-conditions seen done (None:
            none; the announcement was withdrawn, the session ended, the stream started over or was forgotten while
            lost, or a step outside the graph).
        confirmed_name: its name in the task graph (None with ``confirmed``).
    """

    KIND: ClassVar[str] = "retraction"

    alert_id: str
    run: Token
    step: StepId
    step_name: str
    index: Index
    confirmed: StepId | None
    confirmed_name: str | None

    def _check_together(self) -> None:
        _check_stable_id(self.KIND, "alert_id", self.alert_id, f"{self.stream_id}#{self.index}", "<stream_id>#<index>")
        if (self.confirmed is None) != (self.confirmed_name is None):
            raise MessageError("retraction.confirmed and retraction.confirmed_name go together (or both null)")


@dataclass(frozen=True)
class StepEvent(KeyStepSegment):
    """A key-step the checker accepted, as viewers get it (checker -> viewers), once per step: the segment, named
    by the checker's task graph, without the detector's session token or history.

    Attributes (besides the segment's, `KeyStepSegment`):
        run: the detector run (`run_of` its session).
    """

    KIND: ClassVar[str] = "step"

    run: Token


@dataclass(frozen=True)
class Alert(Message):
    """A key-step done before its pre-conditions (checker -> viewers).

    Attributes:
        alert_id: stable id ``"<stream_id>#<index>"``, unique within the run; re-sent alerts (after a
            checker restart) repeat it.
        run: the detector run the step belongs to (`run_of` its session).
        step: the key-step that was done too early.
        step_name: its name in the task graph.
        index: its position in the stream's history.
        missing: pre-conditions not done yet (step ids), all of them.
        missing_names: the names of the first ``len(missing_names)`` of them: all, unless they would not fit one
            message (`fitted`).
        undefined: the step has no pre-conditions in the graph (counted as a mistake by the protocol).
        event_timestamp: ``timestamp`` of the message that brought the step (for latency figures): the `KeyStepOnset`
            for an early alert, the `KeyStepEvent` once the step is confirmed, or the message whose history the
            checker rebuilt the step from (a `Heartbeat` or a later `KeyStepEvent`).
        replayed: false only on the alert sent the moment its key-step arrived; true on an alert rebuilt
            from history (after a checker restart or a lost event) and on the periodic re-sends.
        forgotten: the missing pre-condition most likely forgotten: the one with the highest missing-step score
            (`graphs.procedure_queries.ProcedureQueries.missing`); None when no missing step scores above 0 (an
            undefined step has none).
        forgotten_name: its name in the task graph (None with ``forgotten``).
        forgotten_score: its missing-step score, in [0, 1] (None with ``forgotten``).
        rule: ``"weighted"`` or ``"binary"``: the procedure-question rule the score comes from.
        probability: the probability that the alert is right: that the step really happened and a pre-condition was
            truly skipped, not merely unseen (`graphs.probabilistic_checker`, formula 2), in [0, 1]; 1 from the
            binary checker (``--checker binary``), which takes what the detector confirmed as certain.
        video_time: when the step started, in seconds of the stream's video time (None for an alert rebuilt from
            history, whose step's time the checker never received).
        late_for: under the late-step rule (``--order-rule late-step``), the steps already done that required this
            one: it came after them (empty otherwise).
    """

    KIND: ClassVar[str] = "alert"

    alert_id: str
    run: Token
    step: StepId
    step_name: str
    index: Index
    missing: StepIds
    missing_names: tuple[str, ...]
    undefined: bool
    event_timestamp: float
    replayed: bool
    forgotten: StepId | None
    forgotten_name: str | None
    forgotten_score: Score | None
    rule: str
    probability: Score = 1.0
    video_time: float | None = None
    late_for: StepIds = ()

    def over(self, earlier: Alert) -> Alert:
        """This copy as shown over ``earlier``, a copy of the same ``alert_id`` received before: it wins (docs/
        wire-format.md, which copy of an alert wins), but where it has no ``video_time`` (a restarted checker rebuilds
        its alerts from the history, which holds none) the earlier copy's is kept: a view or dashboard that knew when
        the step was done, and the picture filed under that time, keeps them."""
        if self.video_time is None and earlier.video_time is not None:
            return replace(self, video_time=earlier.video_time)
        return self

    def says(self) -> tuple[object, ...]:
        """What the alert says, not when or how it was sent: of two copies of one ``alert_id``, the one received last
        wins (docs/wire-format.md, which copy of an alert wins), and is news to show only where this differs."""
        return (self.step, self.missing, self.undefined, self.forgotten, self.forgotten_score, self.probability,
                self.late_for)

    def _check_together(self) -> None:
        if self.video_time is not None and self.video_time < 0:
            raise MessageError(f"alert.video_time = {self.video_time} must not be negative")
        _check_names(self.KIND, self.missing_names, self.missing)
        _check_stable_id(self.KIND, "alert_id", self.alert_id, f"{self.stream_id}#{self.index}", "<stream_id>#<index>")
        self._check_forgotten()
        _check_rule(self.KIND, self.rule)

    def _check_forgotten(self) -> None:
        """The likely forgotten step: all three fields or none, one of the missing steps, a score in [0, 1]."""
        given = (self.forgotten is not None, self.forgotten_name is not None, self.forgotten_score is not None)
        if any(given) and not all(given):
            raise MessageError("alert.forgotten, alert.forgotten_name and alert.forgotten_score go together "
                               "(or all null)")
        if self.forgotten is not None and self.forgotten not in self.missing:
            raise MessageError(f"alert.forgotten = {self.forgotten} is not one of alert.missing")
        if self.forgotten_score is not None and not 0.0 <= self.forgotten_score <= 1.0:
            raise MessageError(f"alert.forgotten_score = {self.forgotten_score} is not in [0, 1]")

    def fitted(self) -> Alert:
        """This alert, with as many of its pre-condition names as fit in one message (all of them, usually).

        The ids in ``missing`` always fit (a graph has at most 2048 steps); the names are up to 512 characters
        each, so a step with many long-named pre-conditions is sent with the names of the first ones only.

        Returns:
            ``self`` if it fits, else a copy with ``missing_names`` cut to fit `MAX_MESSAGE_BYTES`.
        """
        return _fitted(self)


@dataclass(frozen=True)
class MissingSteps(Message):
    """The required key-steps a detector session never did, sent when the session ends (checker -> viewers).

    A session ends with its detector's last heartbeat (end of file, Ctrl-C, SIGTERM) or when a new session starts
    on its stream; a lost stream (its detector silent for the stream timeout) has not ended and is never reported.
    Steps the graph marks optional, and steps removed in training (no edge in the graph), are never named; a session
    that did every required step gets no report.

    Attributes:
        missing_id: stable id ``"<stream_id>#end"``: one report per run; re-sends repeat it.
        run: the detector run that ended (`run_of` its session).
        missing: the required steps never done (step ids, graph order), all of them.
        missing_names: the names of the first ``len(missing_names)`` of them: all, unless they would not fit one
            message (`fitted`).
        replayed: false on the report sent when the session ended; true on the periodic re-sends.
        probabilities: for each of ``missing``, the probability that it was truly never done (formula 1 of
            `graphs.probabilistic_checker`), in [0, 1]; 1 each from the binary checker.
    """

    KIND: ClassVar[str] = "missing"

    missing_id: str
    run: Token
    missing: StepIds
    missing_names: tuple[str, ...]
    replayed: bool
    probabilities: Scores

    def _check_together(self) -> None:
        _check_names(self.KIND, self.missing_names, self.missing)
        _check_stable_id(self.KIND, "missing_id", self.missing_id, f"{self.stream_id}#end", "<stream_id>#end")
        if not self.missing:
            raise MessageError("missing.missing is empty: a session that did every required step is not reported")
        if len(self.probabilities) != len(self.missing):
            raise MessageError(f"missing.probabilities has {len(self.probabilities)} items for "
                               f"{len(self.missing)} missing steps")

    def fitted(self) -> MissingSteps:
        """This report, with as many step names as fit in one message (all of them, usually; see `Alert.fitted`).

        Returns:
            ``self`` if it fits, else a copy with ``missing_names`` cut to fit `MAX_MESSAGE_BYTES`.
        """
        return _fitted(self)


_Named = TypeVar("_Named", Alert, MissingSteps)


def _fitted(message: _Named) -> _Named:
    """``message`` with ``missing_names`` cut to the first names that fit `MAX_MESSAGE_BYTES` (ids always fit)."""
    size = len(encode_payload(replace(message, missing_names=())))
    room = MAX_MESSAGE_BYTES - size
    keep = 0
    for name in message.missing_names:
        room -= len(json.dumps(name)) + 1  # the name as JSON writes it, and its comma
        if room < 0:
            break
        keep += 1
    if keep == len(message.missing_names):
        return message
    return replace(message, missing_names=message.missing_names[:keep])


@dataclass(frozen=True)
class Status(Message):
    """The checker's view of one stream (checker -> viewers), sent on every change and periodically.

    Attributes:
        run: the detector run (`run_of` its session).
        done: the steps done, each once, in the order first confirmed.
        allowed: steps whose pre-conditions are all met now, the most likely next first (``allowed_scores``; ties
            in graph order).
        current: step the detector sees right now (None: background).
        alerts: number of alerts raised on this stream.
        frames: frames the detector processed.
        dropped: frames the source dropped.
        fps: detector frame rate.
        gaps: the session's messages the checker did not take, by the numbers its ``seq`` skipped (lost on the way,
            or dropped over a stream's budget); what they said is recovered from the next history.
        ended: the stream has ended (its detector said so).
        stopped: it ended because its detector was stopped (its last heartbeat said ``stopped``), not because its
            source did; false (left out of the payload) otherwise.
        lost: no message from the stream for the checker's stream timeout: its detector died or its link broke.
        allowed_scores: the future-step probability of each step of ``allowed`` (same order), given the step done
            last and those before it (`graphs.procedure_queries.ProcedureQueries.future`), rounded to 4 decimals.
        rule: ``"weighted"`` or ``"binary"``: the procedure-question rule the probabilities come from.
        decode_ms, features_ms, detector_ms, segmenter_ms: the detector's stage latencies from its latest heartbeat.
        hop_ms: the detector's latest message, from its ``timestamp`` to the checker applying it (clocks of two
            machines: 0 when the detector's runs ahead).
        alert_out_ms: the stream's latest alert or retraction, from the checker receiving what caused it to the
            alert leaving the checker.
    """

    KIND: ClassVar[str] = "status"
    ADDED: ClassVar[frozenset[str]] = frozenset({"stopped"})  # absent (false) from a checker before it
    SAID_WHEN_TRUE: ClassVar[frozenset[str]] = frozenset({"stopped"})

    run: Token
    done: StepIds
    allowed: StepIds
    current: StepId | None
    alerts: int
    frames: int
    dropped: int
    fps: float
    gaps: int
    ended: bool
    lost: bool
    allowed_scores: Scores
    rule: str
    decode_ms: Latency = 0.0
    features_ms: Latency = 0.0
    detector_ms: Latency = 0.0
    segmenter_ms: Latency = 0.0
    hop_ms: Latency = 0.0
    alert_out_ms: Latency = 0.0
    stopped: bool = False

    def _check_together(self) -> None:
        _check_fps(self.KIND, self.fps)
        _check_stopped(self.KIND, self.stopped, self.ended)
        if self.ended and self.lost:
            # The checker never sends it (an ended stream stays ended): the view read it as lost and the dashboard as
            # ended, so a peer's status that says both is refused rather than shown one way or the other.
            raise MessageError("status.lost is true while status.ended is true (an ended stream is never lost)")
        if len(self.allowed_scores) != len(self.allowed):
            raise MessageError(f"status.allowed_scores has {len(self.allowed_scores)} items for "
                               f"{len(self.allowed)} allowed steps")
        _check_rule(self.KIND, self.rule)


@dataclass(frozen=True)
class CheckerHealth(Message):
    """What the checker took in and turned away, over its whole run (checker -> viewers, every status period).

    Refusals have no other place on the wire: a detector that was turned away, or a peer that speaks garbage,
    gets no reply, so the viewer shows these counts. ``stream_id`` is `CHECKER_STREAM`.

    Attributes:
        streams: streams tracked now.
        lost_streams: how many of them are lost (no message for the stream timeout).
        received: well-formed messages received (whatever became of them next); the malformed ones are not in it,
            nor those dropped undecoded over a stream's budget.
        malformed: messages dropped undecoded (bad framing, size, JSON, version, field type or range).
        stream_limit: messages refused because every stream slot was taken by a stream that is not idle.
        evicted: idle (ended or lost) streams evicted to make room for a new one.
        unknown_step: messages refused because they name a step id that is not in the task graph.
        over_budget: messages dropped because their stream used its share of a poll (sent again by the detector).
        unsendable: outputs that could not be encoded (a defect; counted, never fatal).
        denied: handshakes refused on either socket: a client whose key is not in the checker's client folder,
            one holding another checker's public key, one without CURVE at a CURVE checker (or with CURVE at one
            without), a connection closed before its handshake ended (a port probe); a refused client that tries
            again is counted again.
        stream_taken: messages refused because another detector session was live on their stream id (two detectors
            given one ``--stream-id``): the first keeps the stream until it ends or is lost.
    """

    KIND: ClassVar[str] = "checker"
    ADDED: ClassVar[frozenset[str]] = frozenset({"stream_taken"})  # "absent (0) from a checker before it"

    streams: int
    lost_streams: int
    received: int
    malformed: int
    stream_limit: int
    evicted: int
    unknown_step: int
    over_budget: int
    unsendable: int
    denied: int = 0
    stream_taken: int = 0

    def _check_together(self) -> None:
        if self.stream_id != CHECKER_STREAM:
            raise MessageError(f"checker.stream_id must be {CHECKER_STREAM!r}")


# The topic prefixes the checker's input subscribes to: what a detector sends.
INPUT_TOPICS: Final = tuple(f"{cls.KIND}/".encode("ascii") for cls in (KeyStepEvent, Heartbeat, KeyStepOnset))

KINDS: Final[dict[str, type[Message]]] = {
    cls.KIND: cls
    for cls in (KeyStepEvent, Heartbeat, StepEvent, Alert, MissingSteps, Status, CheckerHealth, KeyStepOnset,
                Retraction)
}


def encode(message: Message) -> list[bytes]:
    """Serialise a message to its two frames ``[topic, payload]``.

    Args:
        message: any of the message dataclasses.

    Returns:
        The multipart frames to send.
    """
    payload = encode_payload(message)
    if len(payload) > MAX_MESSAGE_BYTES:
        raise MessageError(f"{message.KIND} message of {len(payload)} bytes exceeds {MAX_MESSAGE_BYTES}")
    return [message.topic, payload]


def encode_payload(message: Message) -> bytes:
    """Frame 1 of a message, its JSON payload, whatever its size (`encode` refuses one that is too big).

    Args:
        message: any of the message dataclasses.

    Returns:
        The UTF-8 JSON object (ASCII only: every other character is written as an escape).

    Raises:
        MessageError: a value JSON cannot write (a non-finite float).
    """
    # Fields are numbers, strings, None or tuples of them: read them as they are (asdict deep-copies every
    # history item, 14x slower for a 4096-step history).
    body = {"version": WIRE_VERSION, "kind": message.KIND}
    body.update((name, getattr(message, name)) for name in _field_names(type(message)))
    for name in message.SAID_WHEN_TRUE:
        if body[name] is False:
            del body[name]
    try:
        return json.dumps(body, allow_nan=False, separators=(",", ":")).encode("utf-8")
    except ValueError as err:
        # A non-finite float the field checks let through (a NaN after the first item of a step list passes their
        # min and max): refused as the wire refuses it, not raised into the sender's loop as a crash.
        raise MessageError(f"{message.KIND} cannot be encoded: {err}") from None


def decode(frames: list[bytes]) -> Message:
    """Parse and validate received frames; never trusts the sender.

    Args:
        frames: the multipart message as received.

    Returns:
        The typed message.

    Raises:
        MessageError: wrong frame count, oversized, bad UTF-8/JSON, unknown kind or version, a missing,
            extra, repeated or ill-typed field, a value out of range, or a topic that does not match the payload.
    """
    if len(frames) != 2:
        raise MessageError(f"expected 2 frames, got {len(frames)}")
    topic, payload = bytes(frames[0]), bytes(frames[1])
    if len(payload) > MAX_MESSAGE_BYTES:
        raise MessageError(f"message of {len(payload)} bytes exceeds {MAX_MESSAGE_BYTES}")
    if len(topic) > MAX_TOPIC_BYTES:
        raise MessageError(f"topic of {len(topic)} bytes exceeds {MAX_TOPIC_BYTES}")
    try:
        body = json.loads(payload.decode("utf-8"), parse_constant=_refuse_constant, object_pairs_hook=_unique_fields)
    except (ValueError, RecursionError) as err:  # bad UTF-8 or JSON, NaN, too many digits, nesting too deep
        raise MessageError(f"payload is not UTF-8 JSON: {str(err)[:120]}") from None
    if not isinstance(body, dict):
        raise MessageError("payload is not a JSON object")
    version = body.pop("version", None)
    if type(version) is not int or version != WIRE_VERSION:
        raise MessageError(f"unsupported version {quoted(version, 40)} (this program speaks {WIRE_VERSION})")
    kind = body.pop("kind", None)
    cls = KINDS.get(kind) if isinstance(kind, str) else None
    if cls is None:
        raise MessageError(f"unknown kind {quoted(kind, 40)}")
    message = cls.from_payload(body)
    if message.topic != topic:
        raise MessageError(f"topic {quoted(topic, 80)} does not match the payload ({message.topic!r})")
    return message


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not allowed")


def _unique_fields(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """A JSON object whose keys are all different: ``json`` would keep the last of two silently, so a peer could
    show one value to a filter and another to the reader."""
    body = dict(pairs)
    if len(body) != len(pairs):
        raise ValueError("a field appears twice in one object")
    return body


_COERCERS: dict[type, tuple[tuple[str, Callable[[Any], Any]], ...]] = {}
_FIELD_NAMES: dict[type, tuple[str, ...]] = {}
_FIELD_CHECKS: dict[type, tuple[tuple[str, Callable[[str, str, object], None]], ...]] = {}


def _field_names(cls: type) -> tuple[str, ...]:
    """A message class's field names, in order (``dataclasses.fields`` rebuilds the list on every call: a tenth of
    the checker's time under load)."""
    names = _FIELD_NAMES.get(cls)
    if names is None:
        names = _FIELD_NAMES[cls] = tuple(f.name for f in fields(cls))
    return names


def _coercers(cls: type) -> tuple[tuple[str, Callable[[Any], Any]], ...]:
    """``(field name, its coercer)`` of every field of a message class (`_coercer`, built once per class)."""
    coercers = _COERCERS.get(cls)
    if coercers is None:
        hints = typing.get_type_hints(cls)
        kind = getattr(cls, "KIND", cls.__name__)
        coercers = _COERCERS[cls] = tuple((n, _coercer(hints[n], f"{kind}.{n}")) for n in _field_names(cls))
    return coercers


def _coercer(hint: Any, where: str) -> Callable[[Any], Any]:
    """The check of one JSON value against a field type (JSON arrays become tuples), built once per field: reading
    the type on every message took a tenth of the checker's time under load."""
    origin = typing.get_origin(hint)
    if origin in (Union, types.UnionType):
        args = typing.get_args(hint)
        inner = _coercer(next(a for a in args if a is not type(None)), where)
        if type(None) not in args:  # pragma: no cover - every union of the messages is an optional
            return inner
        return lambda value: None if value is None else inner(value)
    if origin is tuple:
        item = typing.get_args(hint)[0]
        if item is int:  # the histories: passes in C instead of a Python call per item

            def integers(value: Any) -> tuple[int, ...]:
                if not isinstance(value, list):
                    raise MessageError(f"{where} must be an array")
                if not set(map(type, value)) <= {int}:  # exactly int: a bool is not a step id, as for one value
                    raise MessageError(f"{where}[] must be an integer")
                return tuple(value)

            return integers
        each = _coercer(item, f"{where}[]")

        def items(value: Any) -> tuple[Any, ...]:
            if not isinstance(value, list):
                raise MessageError(f"{where} must be an array")
            return tuple(each(v) for v in value)

        return items
    if hint is bool:

        def boolean(value: Any) -> bool:
            if not isinstance(value, bool):
                raise MessageError(f"{where} must be true or false")
            return value

        return boolean
    if hint is int:

        def integer(value: Any) -> int:
            if not isinstance(value, int) or isinstance(value, bool):
                raise MessageError(f"{where} must be an integer")
            return value

        return integer
    if hint is float:

        def number(value: Any) -> float:
            if not isinstance(value, int | float) or isinstance(value, bool):
                raise MessageError(f"{where} must be a number")
            try:
                return float(value)
            except OverflowError:  # an integer literal beyond the float range
                raise MessageError(f"{where} is not finite") from None

        return number
    if hint is str:

        def string(value: Any) -> str:
            if not isinstance(value, str):
                raise MessageError(f"{where} must be a string")
            return value

        return string
    raise TypeError(f"{where}: unsupported field type {hint!r}")  # pragma: no cover - a programming error
