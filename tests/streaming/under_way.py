"""A detector's messages as `streaming.detector.streams.DetectorStream` sends them, from the real segmenter, to a real
checker, and the statuses a real viewer receives: what the screens say is under way, done and next.

Import it as `from tests.streaming.under_way import ...`.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import partial
from pathlib import Path

import zmq

from recognition.segmenter import OnlineSegmenter, SegmenterConfig, SegmentEvent
from streaming.detector import EventPublisher
from streaming.messages import Status
from streaming.transport import Publisher, connect
from streaming.view.client import Viewer
from streaming.view.state import ViewState
from tests.streaming.helpers import running_checker, wait_for

FPS = 10.0  # frames a second: min_duration (0.5 s) is 5 frames, min_run (0.1 s) 1
BACKGROUND = 0  # label 0 is background; label k > 0 is the tea graph's step k


def frames(*runs: tuple[int, int]) -> list[int]:
    """Labels, run by run: ``(label, frames)``."""
    return [label for label, count in runs for _ in range(count)]


def has_all(received: list[Status], count: int) -> bool:
    return len(received) >= count


def statuses_shown(tmp_path: Path, labels: Sequence[int]) -> list[Status]:
    """Feed ``labels`` frame by frame to the segmenter and send what the detector sends (a heartbeat naming the step
    under way just before each key-step, as `DetectorStream.deliver` does; a heartbeat whenever the step under way
    changes, standing in for the 0.5 s ones; one at the end) to a real checker; every status of the stream a real
    viewer received, decoded off the wire, in order."""
    segmenter = OnlineSegmenter(SegmenterConfig(fps=FPS, background=BACKGROUND))
    with running_checker(tmp_path) as (ctx, _service, _thread):
        viewer = Viewer(ctx, f"ipc://{tmp_path}/out", ViewState(), jsonl=False)
        events = EventPublisher(Publisher(connect(ctx, zmq.PUB, f"ipc://{tmp_path}/in", wait_s=5.0)), "cam0",
                                session="s")
        received: list[Status] = []

        def take() -> None:
            received.extend(m for m in viewer.pump(20) if isinstance(m, Status) and m.stream_id == "cam0")

        def beat_and_take() -> None:
            events.heartbeat(None, 0, 0, FPS)
            take()

        # The stream's first heartbeat, until the viewer hears of it: from then on it misses nothing.
        assert wait_for(lambda: bool(received), 10.0, beat_and_take)
        received.clear()
        before: int | None = None
        sent = 0  # each heartbeat and key-step the checker applies brings one status
        for count, label in enumerate(labels, start=1):
            confirmed = [e for e in segmenter.update_events(label) if isinstance(e, SegmentEvent)]
            active = segmenter.active
            now = None if active is None else active[0]
            if confirmed or now != before:
                events.heartbeat(now, count, 0, FPS)
                sent += 1
            for seg in confirmed:
                events.keystep(seg.step, str(seg.step), seg.start, seg.end, seg.confidence)
                sent += 1
            before = now
            # Frame by frame, as a detector's come: a burst of more than a poll's budget would be refused in part.
            assert wait_for(partial(has_all, received, sent), 10.0, take)
        events.heartbeat(before, len(labels) + 1, 0, FPS)
        assert wait_for(lambda: bool(received) and received[-1].frames == len(labels) + 1, 10.0, take)
        viewer.close()
    return received
