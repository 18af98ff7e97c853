"""The checker's settings (``stream-detect checker`` options), checked when they are made."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Final

from graphs.checker_settings import CheckerSettings
from graphs.common.errors import InputError
from streaming.curve_keys import CurveServer
from streaming.transport import (
    DEFAULT_ALERTS_ENDPOINT,
    DEFAULT_EVENTS_ENDPOINT,
    HEARTBEAT_S,
    MIN_STREAM_TIMEOUT_S,
    check_endpoint,
    check_exposure,
    same_endpoint,
)

STREAM_TIMEOUT_S: Final = 5.0  # a stream silent this long is lost (10 heartbeats missed)
MAX_STREAM_TIMEOUT_S: Final = 3600.0
# Streams a checker tracks at once (a bound on memory from untrusted peers); a view and a dashboard keep as many.
MAX_STREAMS: Final = 256


@dataclass(frozen=True)
class CheckerConfig:
    """Settings of the checker process.

    Args:
        bind_events: endpoint detectors connect to (SUB, bound).
        bind_alerts: endpoint viewers connect to (PUB, bound).
        status_period_s: how often each stream's status is re-sent even without change.
        max_streams: most streams tracked at once (a bound on memory from untrusted peers); when full, the idle
            (ended or lost) stream that has waited longest makes room for a new one.
        stream_timeout_s: a stream with no message for this long is marked lost (``--stream-timeout``); it is
            freed after `streaming.checker.streams.FORGET_AFTER` times as long.
        curve: the checker's keys and client folder (``--curve-secret``, ``--curve-clients``); None: no CURVE.
        insecure: bind beyond loopback without CURVE (``--insecure``); refused otherwise.
        checking: which pre-condition checker each stream gets (``--checker``, ``--alert-threshold``).
    """

    bind_events: str = DEFAULT_EVENTS_ENDPOINT
    bind_alerts: str = DEFAULT_ALERTS_ENDPOINT
    status_period_s: float = HEARTBEAT_S
    max_streams: int = MAX_STREAMS
    stream_timeout_s: float = STREAM_TIMEOUT_S
    curve: CurveServer | None = None
    insecure: bool = False
    checking: CheckerSettings = field(default_factory=CheckerSettings)

    def __post_init__(self) -> None:
        if not self.status_period_s > 0:
            raise InputError(f"CheckerConfig.status_period_s = {self.status_period_s} must be > 0")
        if self.max_streams < 1:
            raise InputError(f"CheckerConfig.max_streams = {self.max_streams} must be >= 1")
        check_endpoint(self.bind_events, "--bind")  # now, before a run loads models or renders the demo video
        check_endpoint(self.bind_alerts, "--publish")
        if same_endpoint(self.bind_events, self.bind_alerts):  # the second bind would blame "another program"
            raise InputError(f"--bind {self.bind_events} and --publish {self.bind_alerts} name the same endpoint: "
                             "detectors and viewers need one each")
        for endpoint, option in ((self.bind_events, "--bind"), (self.bind_alerts, "--publish")):
            check_exposure(endpoint, option, self.curve is not None, self.insecure)
        lowest = MIN_STREAM_TIMEOUT_S
        if not lowest <= self.stream_timeout_s <= MAX_STREAM_TIMEOUT_S:  # also refuses NaN
            raise InputError(f"--stream-timeout {self.stream_timeout_s}: must be {lowest:g}..{MAX_STREAM_TIMEOUT_S:g}"
                             f" seconds (at least two heartbeat periods)")
