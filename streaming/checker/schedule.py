"""What the checker re-sends when: each stream's snapshot every period, and its own health.

Each due stream's most recent alerts (`streaming.checker.streams.RESEND_ALERTS`, ``replayed=True``, same
``alert_id``), its end report if its session ended, and its status go out: a viewer that joined late, or reconnected
to a restarted checker, catches up (the snapshot half of the ZeroMQ guide's Clone pattern); consumers de-duplicate
alerts by ``alert_id``. The period runs on its own clock: the status sent on every change does not postpone it, or a
busy stream (a heartbeat every period) would never re-send the alert a slow-joining viewer missed.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import Final

from streaming.checker.streams import StreamState
from streaming.messages import Alert, Message, MissingSteps, Status

# Messages one call may re-send; streams left over are due at the next call, which comes within SNAPSHOT_POLL_MS.
# A live key-step waits for at most one such slice (32 messages, about 1 ms), where 512 in one go held the loop for
# 20-50 ms, the whole p99 of 100 streams at 10 key-steps a second.
SNAPSHOT_BUDGET: Final = 32
SNAPSHOT_POLL_MS: Final = 1


class Snapshots:
    """When each stream's snapshot, and the checker's health, are due again.

    Args:
        status: builds a stream's current status (`streaming.checker.outputs.Outputs.status`).
    """

    def __init__(self, status: Callable[[str, StreamState], Status]) -> None:
        self.status = status
        self.pending = False  # the last call left due streams for the next (see SNAPSHOT_POLL_MS)
        self._last_health = float("-inf")

    def due(self, streams: Mapping[str, StreamState], now: float, period_s: float) -> list[Message]:
        """The snapshots of the streams whose last one is older than ``period_s``, the longest waiting first.

        One call sends at most `SNAPSHOT_BUDGET` messages; the others stay due for the next call (``pending``: the
        service polls again within `SNAPSHOT_POLL_MS`), so 256 streams of 32 alerts never stall the loop in one go.

        Args:
            streams: the streams tracked.
            now: the wall clock.
            period_s: re-send period in seconds.
        """
        out: list[Message] = []
        budget = SNAPSHOT_BUDGET
        self.pending = False
        for sid, state in sorted(streams.items(), key=lambda item: item[1].last_snapshot):
            if now - state.last_snapshot < period_s:
                continue
            if budget <= 0:
                self.pending = True
                continue
            resent: list[Alert | MissingSteps] = [*state.recent_alerts, *([state.report] if state.report else [])]
            budget -= len(resent) + 1
            state.last_snapshot = now
            out.extend(replace(m, seq=state.next_seq(), timestamp=now, replayed=True) for m in resent)
            out.append(self.status(sid, state))
        return out

    def health_due(self, now: float, period_s: float) -> bool:
        """Whether the checker's `CheckerHealth` is due (once per period); if so, it is counted as sent."""
        if now - self._last_health < period_s:
            return False
        self._last_health = now
        return True
