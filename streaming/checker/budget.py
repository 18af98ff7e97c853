"""What one poll may cost: which of its messages the checker serves, in which order, and which wait.

Each poll, a stream's session gets at most `STREAM_BUDGET` messages, and all replays together (a new session, a
restarted checker: many history items at once) at most `REPLAY_BUDGET` history items, served to the stream that has
waited longest first; a message cheaper than `CHEAP_ITEMS` new items (what a live stream sends) is never held back by
a replay. What is dropped is sent again: every detector message carries the whole history.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from typing import Final

from streaming.checker.refusals import OverBudget, Refused
from streaming.messages import Heartbeat, KeyStepEvent, KeyStepOnset, Message

STREAM_BUDGET: Final = 8  # messages one stream may have served per poll (a detector sends about one)
CHEAP_ITEMS: Final = 64  # a message that applies at most this many new history items is served at once
REPLAY_BUDGET: Final = 4096  # history items all replays of one poll may apply together: one full history (~10 ms)

Served = KeyStepEvent | Heartbeat | KeyStepOnset


class PollBudget:
    """Shares each poll among streams, and remembers which stream's replay has waited since when.

    Args:
        cost: how many history items applying a key-step or heartbeat would observe, as the streams stand now.
        superseded: called with a message a later one of its stream replaced in the same poll (heard, not applied).
        refuse: called with the `OverBudget` refusal of each message not served.
        monotonic: the clock of waiting.
        max_streams: the stream limit (at most twice as many waiting streams are remembered).
    """

    def __init__(
        self,
        cost: Callable[[KeyStepEvent | Heartbeat], int],
        superseded: Callable[[KeyStepEvent | Heartbeat], None],
        refuse: Callable[[Refused], None],
        monotonic: Callable[[], float],
        max_streams: int,
    ) -> None:
        self.cost = cost
        self.superseded = superseded
        self.refuse = refuse
        self.monotonic = monotonic
        self.max_streams = max_streams
        self._waiting: dict[tuple[str, str], float] = {}  # (stream, session) -> when its replay was first deferred

    def admit(self, messages: Iterable[Message]) -> Iterator[Served]:
        """The messages of one poll to serve, in the order to serve them; the caller applies each before the next.

        Messages that apply at most `CHEAP_ITEMS` new steps come in arrival order. Replays (more new steps) are held
        to the end: a later message of the same stream supersedes an earlier one (it carries the whole history), and
        they share `REPLAY_BUDGET`, the stream that has waited longest first; a replay over budget is dropped
        (refused as over budget) and served from the stream's next message. A cost is read when its message comes up,
        so it counts what the messages before it applied.

        Args:
            messages: the messages of one poll, in arrival order (kinds the checker does not take are skipped).
        """
        # Budgets are a session's of a stream: another session flooding a live stream's id (refused as taken, but
        # after the budget is spent) must not push the live session's own messages out of every poll.
        taken: Counter[tuple[str, str]] = Counter()
        replays: dict[tuple[str, str], tuple[int, KeyStepEvent | Heartbeat]] = {}
        for arrival, message in enumerate(messages):
            if not isinstance(message, KeyStepEvent | Heartbeat | KeyStepOnset):
                continue
            sid, key = message.stream_id, (message.stream_id, message.session)
            taken[key] += 1
            if taken[key] > STREAM_BUDGET:
                self.refuse(OverBudget(f"{sid}: more than {STREAM_BUDGET} messages in one poll"))
            elif isinstance(message, KeyStepOnset):  # an early alert is as urgent as a live step: served in order
                yield message
            elif key in replays or self.cost(message) > CHEAP_ITEMS:
                if key in replays:  # taken in, and superseded by this one (which carries its history): not a gap
                    self.superseded(replays[key][1])
                replays[key] = (arrival, message)
            else:
                yield message
        budget = REPLAY_BUDGET
        never = float("inf")
        waited_longest_first = sorted(replays.items(), key=lambda kv: (self._waiting.get(kv[0], never), kv[1][0]))
        for key, (_arrival, replay) in waited_longest_first:
            cost = self.cost(replay)
            if cost > budget:
                if key not in self._waiting and len(self._waiting) < 2 * self.max_streams:
                    self._waiting[key] = self.monotonic()
                self.refuse(OverBudget(f"{key[0]}: replay of {cost} steps deferred to a later poll"))
                continue
            budget -= cost
            self._waiting.pop(key, None)
            yield replay

    def forget_waiting(self, now: float, after_s: float) -> None:
        """Forget the streams whose replay has waited longer than ``after_s`` (their detector is gone)."""
        for key, since in list(self._waiting.items()):
            if now - since > after_s:
                del self._waiting[key]
