"""A checker in the detector's own process: what it answers, at the video time it answers.

`CheckerLink` is one of a detector's sinks (`streaming.detector.sinks`), in place of or beside its ZeroMQ publisher:
every message it is given is encoded and decoded as on the wire and served by a `CheckerCore` right away, and the
answers are kept with the video time the caller set.
``stream-detect eval`` scores them; ``--annotate-out`` draws them on the frame that caused them.
"""

from __future__ import annotations

from collections.abc import Iterable

from streaming.checker.core import CheckerCore
from streaming.messages import KeyStepOnset, Message, decode, encode


class CheckerLink:
    """A sink (`streaming.detector.sinks.Sink`) wired straight into a `CheckerCore`, through the wire encoding,
    in-process: where a detector's ZeroMQ publisher stands, or beside it.

    What the checker answers is kept with the video time set by the caller before each frame (``now``); with
    ``keep``, so is what it was sent (``sent``: what the detector published, which `replay` serves again to another
    checker).

    Args:
        core: the checker.
        keep: keep every answer, and every message sent, for the end of the run (``eval`` scores them all); False:
            `take` hands each answer over once and forgets it (a live camera runs for hours).
    """

    def __init__(self, core: CheckerCore, keep: bool = True) -> None:  # no socket: nothing leaves the process
        self.core = core
        self.keep = keep
        self.now = 0.0
        self.received: list[tuple[float, Message]] = []
        self.sent: list[tuple[float, Message]] = []  # (video time, message), with keep
        self.onset_starts: dict[int, float] = {}  # history position -> start of the run announced for it (keep)
        self._taken = 0

    def send(self, message: Message) -> None:
        """Hand the message to the checker as the wire would deliver it; keep its answers."""
        if self.keep:
            self.sent.append((self.now, message))
            if isinstance(message, KeyStepOnset) and not message.withdrawn:
                self.onset_starts.setdefault(message.index, message.start)
        self.received += [(self.now, out) for out in self.core.serve([decode(encode(message))])]

    def take(self) -> list[tuple[float, Message]]:
        """The answers that came since the last call, with their video times."""
        new = self.received[self._taken :]
        if self.keep:
            self._taken = len(self.received)
        else:
            self.received.clear()
        return new

    def replay(self, messages: Iterable[tuple[float, Message]]) -> None:
        """Serve recorded messages (another link's ``sent``) as the detector sent them, each at its video time."""
        for now, message in messages:
            self.now = now
            self.send(message)
