"""What goes on the wire for one detector stream (`EventPublisher`): the session token, the per-stream ``seq``, and
the confirmed-step ``history`` every `KeyStepEvent` and `Heartbeat` carries (so a restarted checker rebuilds the
stream from the next message). Each message it builds goes to one `streaming.detector.sinks.Sink` (the ZeroMQ
publisher, a checker in the same process, several at once through `streaming.detector.sinks.Fanout`)."""

from __future__ import annotations

import secrets
import time
from collections.abc import Callable, Mapping

import numpy as np

from recognition.evidence import EvidenceReporter
from recognition.segmenter import OnsetEvent
from streaming.detector.sinks import Sink
from streaming.messages import MAX_HISTORY, Heartbeat, KeyStepEvent, KeyStepOnset

EVIDENCE_DECIMALS = 4  # evidence on the wire: 2048 steps' take at most 20 KiB, so a message always fits


class EventPublisher:
    """Publishes one stream's key-step events and heartbeats with seq numbers and the full history.

    A message carries at most `MAX_HISTORY` key-steps, so a stream that confirms more (a camera left
    running for days) starts a new session with an empty history; the checker starts the stream over,
    as for a restarted detector.

    Args:
        publisher: where each message goes (a connected PUB `streaming.transport.Publisher`, or any other sink).
        stream_id: the stream's name.
        clock: wall clock for timestamps.
        session: token of this run (random if None); a new one tells the checker to start over.
        evidence: the stream's evidence (`recognition.evidence`), fed every frame with `frame`; None: the messages
            carry no evidence, and the checker takes the confirmed steps as certain.
    """

    def __init__(
        self,
        publisher: Sink,
        stream_id: str,
        clock: Callable[[], float] = time.time,
        session: str | None = None,
        evidence: EvidenceReporter | None = None,
    ) -> None:
        self.publisher = publisher
        self.stream_id = stream_id
        self.clock = clock
        self.session = session or secrets.token_hex(6)
        self.history: list[int] = []
        self.seq = 0
        self.evidence = evidence

    def frame(self, probs: np.ndarray) -> None:
        """Take one frame's class probabilities ``(C,)`` into the evidence (nothing is sent)."""
        if self.evidence is not None:
            self.evidence.update(probs)

    def _evidence(self, start_frame: int | None) -> tuple[tuple[int, ...], tuple[float, ...]]:
        """``(evidence_steps, evidence)`` of a message: as it stood before ``start_frame`` (None: now), rounded for
        the wire; empty without evidence."""
        if self.evidence is None:
            return (), ()
        steps, q = self.evidence.done_now() if start_frame is None else self.evidence.done_before(start_frame)
        return steps, tuple(round(v, EVIDENCE_DECIMALS) for v in q)

    def _real(self, step: int, confidence: float, frames: int) -> float:
        if self.evidence is None:
            return 1.0
        return round(self.evidence.real(step, confidence, frames), EVIDENCE_DECIMALS)

    def _next_seq(self) -> int:
        self.seq += 1
        return self.seq - 1

    def keystep(
        self,
        step: int,
        name: str,
        start: float,
        end: float,
        confidence: float,
        start_frame: int | None = None,
        frames: int = 0,
    ) -> KeyStepEvent:
        """Record a confirmed key-step and publish it.

        Args:
            step: key-step id.
            name: its name.
            start: segment start (video seconds).
            end: segment end (video seconds).
            confidence: mean probability over the segment.
            start_frame: the segment's first frame (the evidence sent is as it stood before it); None: now.
            frames: the segment's length in frames (for the probability that it is real).

        Returns:
            The message sent.
        """
        if len(self.history) >= MAX_HISTORY:
            self.session = secrets.token_hex(6)
            self.history = []
        self.history.append(int(step))
        evidence_steps, evidence = self._evidence(start_frame)
        message = KeyStepEvent(
            stream_id=self.stream_id,
            seq=self._next_seq(),
            timestamp=self.clock(),
            session=self.session,
            step=int(step),
            step_name=name[:256],
            start=float(start),
            end=max(float(end), float(start)),
            confidence=float(min(max(confidence, 0.0), 1.0)),
            index=len(self.history) - 1,
            history=tuple(self.history),
            real=self._real(step, confidence, frames),
            evidence_steps=evidence_steps,
            evidence=evidence,
        )
        self.publisher.send(message)
        return message

    def onset(self, event: OnsetEvent, name: str) -> KeyStepOnset:
        """Publish a provisional key-step (or its withdrawal); the history does not change.

        Args:
            event: the segmenter's announcement.
            name: the step's name.

        Returns:
            The message sent.
        """
        evidence_steps, evidence = self._evidence(event.start_frame)
        message = KeyStepOnset(
            stream_id=self.stream_id,
            seq=self._next_seq(),
            timestamp=self.clock(),
            session=self.session,
            history=tuple(self.history),
            step=int(event.step),
            step_name=name[:256],
            start=max(float(event.start), 0.0),
            confidence=float(min(max(event.confidence, 0.0), 1.0)),
            index=len(self.history) + len(event.before),
            before=tuple(int(s) for s in event.before),
            withdrawn=event.withdrawn,
            real=self._real(event.step, event.confidence, event.frame - event.start_frame + 1),
            evidence_steps=evidence_steps,
            evidence=evidence,
        )
        self.publisher.send(message)
        return message

    def heartbeat(
        self,
        current: int | None,
        frames: int,
        dropped: int,
        fps: float,
        ended: bool = False,
        latency: Mapping[str, float] | None = None,
        stopped: bool = False,
    ) -> Heartbeat:
        """Publish a heartbeat with stream statistics and the history.

        Args:
            current: step being seen now (None for background).
            frames: frames processed.
            dropped: frames dropped by the source.
            fps: recent processing rate.
            ended: this is the stream's last message.
            latency: mean milliseconds per frame of each detector stage since the last heartbeat, by field name
                (``decode_ms``, ..., `streaming.stage_latency.StageWindow.take`); None: all 0.
            stopped: (with ``ended``) the session ends because the run was stopped, not because its source ended.

        Returns:
            The message sent.
        """
        evidence_steps, evidence = self._evidence(None)
        message = Heartbeat(
            stream_id=self.stream_id,
            seq=self._next_seq(),
            timestamp=self.clock(),
            session=self.session,
            history=tuple(self.history),
            current=current,
            frames=int(frames),
            dropped=int(dropped),
            fps=float(fps),
            ended=ended,
            evidence_steps=evidence_steps,
            evidence=evidence,
            **(latency or {}),
            stopped=stopped,
        )
        self.publisher.send(message)
        return message
