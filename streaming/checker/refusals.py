"""What the checker turns away: a named error per reason, its counter, and a log that a flood cannot flood."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from typing import ClassVar, Final

from graphs.common.safe_text import printable
from streaming.service_log import LogLine

LOG_EVERY_S: Final = 10.0  # at most one log line per refusal reason this often (a flood must not flood the log)
# The counters' names; "denied" (refused handshakes) is counted by `CheckerService` from its sockets' monitors.
COUNTED: Final = ("stream_limit", "evicted", "unknown_step", "over_budget", "unsendable", "denied", "stream_taken")


class Refused(Exception):
    """A message the checker will not apply; ``reason`` names the counter it is counted under."""

    reason: ClassVar[str] = ""


class UnknownStep(Refused):
    """The message names a step id that is not in the task graph (a detector for another procedure)."""

    reason = "unknown_step"


class StreamLimit(Refused):
    """Every stream slot is taken by a stream that is not idle: the new stream is turned away."""

    reason = "stream_limit"


class StreamTaken(Refused):
    """Another detector session is live on the stream id (two cameras given one name): the newcomer is turned away
    until that session ends or is lost, instead of the two taking the stream from each other at every message."""

    reason = "stream_taken"


class OverBudget(Refused):
    """The stream used its share of this poll; its next message, which carries the whole history, is served."""

    reason = "over_budget"


class Unsendable(Refused):
    """An output could not be encoded (a defect: by construction every output fits the wire)."""

    reason = "unsendable"


class Refusals:
    """The counts of what was turned away, by reason, and their rate-limited log.

    Args:
        monotonic: the clock of the log's rate limit.
        log: called with a line for each refusal reason (first occurrence, then every `LOG_EVERY_S`), its
            ``reason``, ``count`` and ``detail`` as fields; None: no log.
    """

    def __init__(self, monotonic: Callable[[], float], log: LogLine | None = None) -> None:
        self.counts: Counter[str] = Counter({name: 0 for name in COUNTED})
        self.last = ""  # "<reason>: <detail>" of the last refused message
        self.monotonic = monotonic
        self.log = log
        self._logged: dict[str, float] = {}
        # reason -> (its count, the detail) of its last refusal not said: a burst that ends within the window is said
        # once the window is over (`flush`), not only if another refusal of its reason comes later
        self._unsaid: dict[str, tuple[int, str]] = {}

    def refuse(self, err: Refused) -> None:
        """Count a refused message under its reason, remember it, and log it (rate-limited per reason)."""
        self.counts[err.reason] += 1
        self.last = f"{err.reason}: {err}"
        self.log_refusal(err.reason, self.counts[err.reason], str(err))

    def log_refusal(self, reason: str, count: int, detail: str) -> None:
        """Log a refusal: the first of its reason at once, then at most one line per reason every `LOG_EVERY_S`
        (the last of those not said, once its window is over: `flush`).

        Args:
            reason: the counter's name (``malformed``, ``denied``, or a `Refused` reason).
            count: the counter's value now.
            detail: what was refused, and why.
        """
        if self.log is None:
            return
        now = self.monotonic()
        if now - self._logged.get(reason, float("-inf")) >= LOG_EVERY_S:
            self._say(reason, count, detail, now)
        else:
            self._unsaid[reason] = (count, detail)

    def flush(self) -> None:
        """Say the last refusal of each reason whose window is over with refusals it did not say (called as the
        checker's loop turns): a burst is said in full 10 s after its first line, not at the next refusal of its
        reason, which may never come."""
        now = self.monotonic()
        for reason, (count, detail) in list(self._unsaid.items()):
            if now - self._logged.get(reason, float("-inf")) >= LOG_EVERY_S:
                self._say(reason, count, detail, now)

    def _say(self, reason: str, count: int, detail: str, now: float) -> None:
        if self.log is None:
            return
        self._logged[reason] = now
        self._unsaid.pop(reason, None)
        self.log(f"checker: refused ({reason}, {count} so far): {printable(detail)}", reason=reason, count=count,
                 detail=printable(detail))
