"""What the dashboard knows: the checker's messages folded into tiles (one per stream) and an alert feed.

`DashboardState.apply` takes one decoded message and returns what every open page must be told at once (a new
alert, a retraction); a stream whose tile changed is marked dirty instead, and the server pushes the dirty tiles a
few times a second (`DashboardState.take_dirty_tiles`), so a checker that re-sends every stream's status twice a
second does not turn into a flood of identical updates. Everything is plain JSON-ready dicts: the page draws them.

Alerts are de-duplicated as the terminal view does (`streaming.view.state`): by their stable ``alert_id`` within
their detector ``run``, so the checker's periodic re-sends show once and a new run's alerts, whose ids start over,
show too. Each alert the dashboard keeps gets a serial number (``id``): the page acknowledges it by that number,
and the alert's frame picture is served under it, never under a path a page could choose.

A tile says ``live`` only while the checker says so *and* keeps saying it: the checker re-sends every stream's status
every 0.5 s, so a stream that has not ended and whose status has not arrived for `SILENT_S` is ``silent`` (a
restarted checker forgets a stream whose detector went away meanwhile: its tile said ``live`` for ever), and while
the link to the checker is down every stream that has not ended is ``unknown``. Which one is worked out when tiles
are drawn (`tile_state`), from the time each stream's status was received and the link's state handed in.

A session that ends is kept in a list of its own (`DashboardState.finished`, the newest `MAX_FINISHED`), with its
end report (the steps never done) and its counts: its tile goes `FORGET_S` after the checker let the stream go
(`forget_gone`; the checker does a minute after the session ended), and with it went the only place the page said a
step was forgotten. Like the alerts it is sent to each page that opens (`snapshot`) and pushed as it changes (a
``finished`` event).

A step named by the checker otherwise than by the ``--graph`` means the dashboard was given another graph than the
checker's: the checker's name is shown from then on (it is what its alerts mean), and `apply` returns a
``name_conflict`` event, once per step, for the page and the log.

Every collection is bounded (`MAX_ALERTS`, `MAX_STREAMS`, `MAX_FINISHED`, names, each run's alert ids): a peer cannot
make the dashboard remember without limit. Every name is made `graphs.common.safe_text.printable` here, once; the page
then only ever sets it as text.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from typing import Any, Final

from graphs.common.safe_text import printable
from streaming.checker.config import MAX_STREAMS  # tiles kept (the checker tracks as many); the one silent longest goes
from streaming.checker.streams import RESEND_ALERTS
from streaming.frame_names import frame_name
from streaming.messages import LATENCY_FIELDS, Alert, CheckerHealth, Message, MissingSteps, Retraction, Status
from streaming.next_steps import JustLeft, allowed_next, just_left, waiting_on
from streaming.session_verdict import no_verdict_text, nothing_recognised
from streaming.step_names import StepNames, named_steps
from streaming.transport import FORGET_S, answering_start, gone_silent, let_go

MAX_ALERTS: Final = 500  # alerts kept (newest); their acknowledgements live on them
# Ended sessions kept (newest), each with its end report: a site whose cameras come and go ends hundreds a day, and
# the list is there for the ones a supervisor did not see end (its tile goes some 11 minutes later).
MAX_FINISHED: Final = 100
MAX_SHOWN_STEPS: Final = 8  # allowed next steps shown on a tile
HEALTH_FIELDS: Final = ("streams", "lost_streams", "received", "malformed", "stream_limit", "evicted", "unknown_step",
                        "over_budget", "unsendable", "denied", "stream_taken")


@dataclass
class AlertRecord:
    """One alert as the dashboard keeps it: the alert, its retraction and its acknowledgement.

    Attributes:
        id: the dashboard's serial number of the alert (acknowledgements and frame pictures use it).
        alert: the copy of the alert received last (docs/wire-format.md, which copy of an alert wins).
        received: wall time it reached the dashboard.
        raised: when it was raised: the earliest ``event_timestamp`` of its copies (an early alert's onset; a later
            copy, the confirmation or one rebuilt after a restart, carries a later one).
        live_copy: a copy that was not a re-send (``replayed`` false) reached this dashboard: it saw the alert
            happen, rather than learning of it from the checker's re-sends.
        retraction: the retraction, once one came.
        acked_at: wall time it was acknowledged (None: not yet).
    """

    id: int
    alert: Alert
    received: float
    raised: float
    live_copy: bool
    retraction: Retraction | None = None
    retracted_at: float | None = None
    acked_at: float | None = None


@dataclass
class FinishedSession:
    """One detector session that ended, as the finished list keeps it once its tile has gone.

    Attributes:
        stream: the stream id.
        run: the detector run that ended.
        ended: wall time this dashboard learned that it ended (its end report or its ended status, the first).
        seen_end: this dashboard heard the end as it happened (the report as first sent, or the run's status
            turning ended, either with the run's previous status, not lost, heard less than `SILENT_S` before),
            rather than from the checker's re-sends or after a silence (it started later, its link to the checker was
            down, or the checker was, or the detector's link to it, while the source played out): ``ended`` is then
            only when it heard of it.
        status: the run's latest status (None: none received; a session ended by the next one starting on its
            stream may have sent none after its report).
        report: its end report (None: none came; the checker sends none for a session that did every required step).
    """

    stream: str
    run: str
    ended: float
    seen_end: bool
    status: Status | None = None
    report: MissingSteps | None = None


@dataclass
class DashboardState:
    """Tiles and alerts of every stream a checker publishes.

    Args:
        names: step id -> name from the task graph (unknown ids are learned from the messages, else shown as numbers).
        frames: whether alert pictures are served (``--alert-frames``): alerts with a video time then name one
            (one that `streaming.frame_names.frame_name` can name a file for).
        max_alerts: alerts kept.
        max_finished: ended sessions kept (`finished`).
    """

    names: dict[int, str] = field(default_factory=dict)
    frames: bool = False
    max_alerts: int = MAX_ALERTS
    max_finished: int = MAX_FINISHED
    streams: dict[str, Status] = field(default_factory=dict)
    # stream id -> the step that has just stopped being under way, its key-step on its way (`streaming.next_steps`)
    left: dict[str, JustLeft] = field(default_factory=dict)
    reports: dict[str, MissingSteps] = field(default_factory=dict)  # each stream's latest end-of-session report
    alerts: deque[AlertRecord] = field(default_factory=deque)
    by_id: dict[int, AlertRecord] = field(default_factory=dict)
    # stream id -> (its latest run, that run's alert ids -> the record's serial, or -1 once the record is gone)
    seen: dict[str, tuple[str, dict[str, int]]] = field(default_factory=dict)
    last_alert: dict[str, int] = field(default_factory=dict)  # stream id -> serial of its newest alert
    # (stream id, run) -> the session, oldest first: ended sessions outlive their tiles (`_drop`)
    finished: dict[tuple[str, str], FinishedSession] = field(default_factory=dict)
    health: CheckerHealth | None = None
    dirty: set[str] = field(default_factory=set)
    serial: int = 0
    forgotten_open: int = 0  # alerts no longer kept that were neither acknowledged nor retracted
    heard: dict[str, float] = field(default_factory=dict)  # stream id -> wall time its latest status was received
    since: dict[str, float] = field(default_factory=dict)  # stream id -> when its run, lost or ended last changed
    shown_state: dict[str, str] = field(default_factory=dict)  # stream id -> the tile state pages were last sent
    gone: list[str] = field(default_factory=list)  # tiles dropped since pages were last told (`take_gone`)
    forget_s: float = FORGET_S
    # When the latest message came, and since when the checker has answered without a silence of `SILENT_S`: a
    # stream is let go only once its status has not come for `forget_s` of the checker answering (`forget_gone`).
    last_message: float | None = None
    answering_since: float | None = None
    steps: StepNames = field(init=False)  # the names shown: the --graph's, until the checker names a step

    def __post_init__(self) -> None:
        self.steps = StepNames({step: printable(name) for step, name in self.names.items()})

    @property
    def name_conflicts(self) -> dict[int, tuple[str, str]]:
        """step -> (the --graph's name, the checker's), in the order found."""
        return self.steps.conflicts

    # -- folding messages in ----------------------------------------------------------------------------------------
    def apply(self, message: Message, now: float) -> list[dict[str, Any]]:
        """Fold one message into the state.

        Args:
            message: a decoded message from the checker's output.
            now: wall time of its arrival.

        Returns:
            The events every page must get now (``alert``, ``update``, ``retraction``, ``name_conflict``,
            ``finished``), as JSON-ready dicts; tiles that changed are marked dirty instead (`take_dirty_tiles`).
        """
        self.answering_since = answering_start(self.answering_since, self.last_message, now)
        self.last_message = now
        if isinstance(message, Alert):
            return self._alert(message, now)
        if isinstance(message, Retraction):
            return self._retraction(message, now)
        if isinstance(message, Status):
            return self._status(message, now)
        if isinstance(message, MissingSteps):
            previous = self.reports.get(message.stream_id)
            if previous is not None and previous.run == message.run:
                return self._finished_report(message, now, listed=True)
            if previous is None and len(self.reports) >= MAX_STREAMS:
                del self.reports[next(iter(self.reports))]
            self.reports[message.stream_id] = message
            self.dirty.add(message.stream_id)
            return self._learn(message) + self._finished_report(message, now, listed=False)
        if isinstance(message, CheckerHealth):
            self.health = message
        return []

    def _alert(self, alert: Alert, now: float) -> list[dict[str, Any]]:
        run, ids = self.seen.get(alert.stream_id, ("", {}))
        if run != alert.run:
            run, ids = alert.run, {}
            if alert.stream_id not in self.seen and len(self.seen) >= MAX_STREAMS:
                del self.seen[next(iter(self.seen))]
            self.seen[alert.stream_id] = (run, ids)
        earlier = self.by_id.get(ids.get(alert.alert_id, -1))
        if alert.alert_id in ids and (earlier is None or earlier.retraction is None):
            return self._later_copy(ids[alert.alert_id], alert)
        # New, or after its retraction: an alert then is another mistake at that position (an early alert withdrawn,
        # then another step's), shown as a new alert beside the withdrawn one; its id now names it.
        self.serial += 1
        record = AlertRecord(self.serial, alert, now, alert.event_timestamp, not alert.replayed)
        ids.pop(alert.alert_id, None)  # re-inserted: the ids stay in the order their alerts came, oldest first
        ids[alert.alert_id] = record.id
        # A run of 4,096 steps may bring as many alert ids, and 256 streams that many each (about 150 MB): an id
        # older than every alert kept and every copy a checker re-sends (its newest RESEND_ALERTS per stream, a
        # restarted checker's too) names nothing any message can still bring to the page.
        while len(ids) > self.max_alerts + 2 * RESEND_ALERTS:
            del ids[next(iter(ids))]
        conflicts = self._learn(alert)
        self.alerts.append(record)
        self.by_id[record.id] = record
        while len(self.alerts) > self.max_alerts:
            oldest = self.alerts.popleft()
            del self.by_id[oldest.id]
            # The pages' "not acknowledged" counts the kept alerts: without this, alerts nobody looked at would
            # leave the count as newer ones pushed them out, and the header would read as if they had been dealt with.
            self.forgotten_open += oldest.acked_at is None and oldest.retraction is None
        self.last_alert[alert.stream_id] = record.id
        if len(self.last_alert) > MAX_STREAMS:
            del self.last_alert[next(iter(self.last_alert))]
        self.dirty.add(alert.stream_id)
        # With the count it may have changed: the pages' header counts the alerts nobody dealt with by it.
        return conflicts + [{"type": "alert", "alert": self.alert_json(record), "forgotten_open": self.forgotten_open}]

    def _later_copy(self, serial: int, alert: Alert) -> list[dict[str, Any]]:
        """Another copy of a shown alert (the early alert confirmed, a re-send, a restarted checker's): the copy
        received last wins, as in the terminal view (docs/wire-format.md, which copy of an alert wins); the pages
        get it only when it says something new."""
        record = self.by_id.get(serial)
        if record is None:
            return []  # no longer kept
        conflicts = self._learn(alert)
        raised, live_copy = min(record.raised, alert.event_timestamp), record.live_copy or not alert.replayed
        news = record.alert.says() != alert.says() or (raised, live_copy) != (record.raised, record.live_copy)
        record.alert, record.raised, record.live_copy = alert.over(record.alert), raised, live_copy
        if not news:
            return conflicts
        self.dirty.add(alert.stream_id)  # its tile shows the stream's last alert
        return conflicts + [{"type": "update", "alert": self.alert_json(record)}]

    def _retraction(self, retraction: Retraction, now: float) -> list[dict[str, Any]]:
        run, ids = self.seen.get(retraction.stream_id, ("", {}))
        record = self.by_id.get(ids.get(retraction.alert_id, -1)) if run == retraction.run else None
        if record is None or record.retraction is not None:
            return []  # an alert this dashboard never showed (or no longer keeps), or already retracted
        record.retraction, record.retracted_at = retraction, now
        conflicts = self._learn(retraction)
        self.dirty.add(retraction.stream_id)
        return conflicts + [{"type": "retraction", "alert": self.alert_json(record)}]

    def _status(self, status: Status, now: float) -> list[dict[str, Any]]:
        stream = status.stream_id
        previous = self.streams.get(stream)
        if previous is None and len(self.streams) >= MAX_STREAMS:
            self._drop(min(self.streams, key=lambda sid: self.heard.get(sid, 0.0)))
        self.streams[stream] = status
        heard, self.heard[stream] = self.heard.get(stream), now
        if previous is None or _phase(previous) != _phase(status):
            self.since[stream] = now
        held = self.left.pop(stream, None)
        left = just_left(status, previous, held, now)
        if left is not None:
            self.left[stream] = left
        if previous is None or _shown(previous) != _shown(status) or left != held:
            self.dirty.add(stream)
        return self._finished_status(status, previous, heard, now)

    def _finished_status(
        self, status: Status, previous: Status | None, heard: float | None, now: float
    ) -> list[dict[str, Any]]:
        """Keep an ended run's status in the finished list (its counts, and whether it recognised anything);
        ``previous`` is the stream's status before it, received at ``heard``."""
        session = self.finished.get((status.stream_id, status.run))
        if session is None:
            # Its run ended here before: it was listed then, and pushed out since by newer ones. The checker re-sends
            # it each 0.5 s for a minute: listed again, it pushed out another, which the next re-send listed again.
            if not status.ended or (previous is not None and previous.run == status.run and previous.ended):
                return []
            # Seen turning ended here, or known only from the checker's re-sends of a stream that ended earlier. A
            # status is re-sent each 0.5 s: one not heard for `SILENT_S` before (the link to the checker was down)
            # may have turned ended at any time since.
            seen = _heard_running(status.run, previous, heard, now)
            session = self._add_finished(FinishedSession(status.stream_id, status.run, now, seen, status))
        elif session.status is not None and _shown(session.status) == _shown(status):
            return []  # a re-send: every 0.5 s while the checker holds the stream
        else:
            session.status = status
        return [self._finished_event(session)]

    def _finished_report(self, report: MissingSteps, now: float, listed: bool) -> list[dict[str, Any]]:
        """Keep an end report in the finished list. It comes before its run's ended status (the checker sends it
        first), and a session ended by the next one starting on its stream may have no ended status at all.
        ``listed``: the stream's report of this run came before, so its session was listed then."""
        session = self.finished.get((report.stream_id, report.run))
        if session is None and listed:
            return []  # pushed out by newer sessions: a re-send must not list it again as the newest
        if session is None:
            status = self.streams.get(report.stream_id)
            # A report sent as the checker learned of the end is not always the end as it happened: a detector whose
            # source played out while the checker was down sends its last heartbeat again once a checker is back,
            # whose first report then comes long after the end. Only a session heard running until then was seen.
            seen = not report.replayed and _heard_running(report.run, status, self.heard.get(report.stream_id), now)
            session = self._add_finished(FinishedSession(
                report.stream_id, report.run, now, seen,
                status if status is not None and status.run == report.run else None, report))
        elif session.report is None:
            session.report = report
        else:
            return []  # a re-send
        return [self._finished_event(session)]

    def _add_finished(self, session: FinishedSession) -> FinishedSession:
        self.finished[(session.stream, session.run)] = session
        while len(self.finished) > self.max_finished:
            del self.finished[next(iter(self.finished))]
        return session

    def _drop(self, stream: str) -> None:
        """Forget a stream's tile and what is kept for it; pages are told (`take_gone`), or an open page kept every
        tile it was ever sent.

        Its alert ids (``seen``) and last alert stay, under their own bound (`MAX_STREAMS`): its alerts are still in
        the feed, and a stream that comes back in the same run (a detector whose link was down for 10 minutes) has its
        alerts re-sent by the checker: they showed again as new, unacknowledged, beside the acknowledged ones. Its end
        report stays in the finished list (`finished`), as the terminal view keeps it in its table of steps never
        done: the tile was the only place it was shown, so a supervisor who looked a quarter of an hour after the
        session ended never learned of a forgotten step."""
        for kept in (self.streams, self.left, self.reports, self.heard, self.since, self.shown_state):
            kept.pop(stream, None)
        self.dirty.discard(stream)
        self.gone.append(stream)

    def forget_gone(self, now: float, connected: bool) -> None:
        """Drop the tiles whose status has not arrived for `forget_s` while the checker answers: streams it let go.
        While the link is down nothing is dropped (a stream may only be unheard for want of a link), and only the
        time since the checker answers again counts: after a longer outage every tile was dropped at its first
        message, before it had re-sent the streams it holds (it does every 0.5 s)."""
        if not connected or self.answering_since is None:
            return
        for stream in let_go(self.heard, self.answering_since, now, self.forget_s):
            self._drop(stream)

    def take_gone(self) -> list[str]:
        """The streams whose tiles were dropped since the last call (and forget that they were)."""
        gone, self.gone = self.gone, []
        return gone

    def _learn(self, message: Message) -> list[dict[str, Any]]:
        """Take the checker's names of the steps ``message`` names (`streaming.step_names`): a ``name_conflict``
        event for each step the --graph names otherwise, once per step."""
        return [self.conflict_json(step) for step, name in named_steps(message)
                if self.steps.learn(step, printable(name))]

    # -- acknowledgements -------------------------------------------------------------------------------------------
    def acknowledge(self, alert_id: object, now: float) -> dict[str, Any] | None:
        """Remember that someone acknowledged an alert.

        Args:
            alert_id: the alert's serial number, as a page sent it (anything else is ignored).
            now: wall time.

        Returns:
            The ``ack`` event for every page, or None when there is no such alert or it was acknowledged already.
        """
        if not isinstance(alert_id, int) or isinstance(alert_id, bool):
            return None
        record = self.by_id.get(alert_id)
        if record is None or record.acked_at is not None:
            return None
        record.acked_at = now
        self.dirty.add(record.alert.stream_id)
        return {"type": "ack", "alert": self.alert_json(record)}

    # -- what pages get ---------------------------------------------------------------------------------------------
    def conflict_json(self, step: int) -> dict[str, Any]:
        """One step the --graph names otherwise than the checker, for the page and the log."""
        mine, theirs = self.name_conflicts[step]
        return {"type": "name_conflict", "step": step, "graph_name": mine, "checker_name": theirs}

    def name(self, step: int | None) -> str | None:
        """A step's readable name (its number when no graph or message named it); None for none."""
        if step is None:
            return None
        return self.steps.name(step)

    def finished_json(self, session: FinishedSession) -> dict[str, Any]:
        """One ended session for the page: when it ended, its counts, and its verdict as its tile gave it (the steps
        never done; none for a session that recognised nothing, as in the view)."""
        status, report = session.status, session.report
        unjudged = status is not None and status.ended and nothing_recognised(len(status.done), status.alerts)
        return {
            "stream": session.stream,
            "run": session.run,
            "ended": session.ended,
            "seen_end": session.seen_end,
            "stopped": status is not None and status.stopped,  # its detector was stopped before its source's end
            "done": None if status is None else len(status.done),
            "last_done": self.name(status.done[-1]) if status is not None and status.done else None,
            "alerts": None if status is None else status.alerts,
            "never_done": None if report is None or unjudged else [self.name(step) for step in report.missing],
            "no_verdict": no_verdict_text(status.frames, status.stopped) if status is not None and unjudged else None,
        }

    def _finished_event(self, session: FinishedSession) -> dict[str, Any]:
        return {"type": "finished", "session": self.finished_json(session)}

    def alert_json(self, record: AlertRecord) -> dict[str, Any]:
        """One alert for the page: names resolved and made printable, times as Unix seconds."""
        alert = record.alert
        names = [printable(n) for n in alert.missing_names]
        missing = names + [self.name(s) or "" for s in alert.missing[len(names) :]]
        retraction = record.retraction
        return {
            "id": record.id,
            "stream": alert.stream_id,
            "run": alert.run,
            "alert_id": printable(alert.alert_id),  # the checker's id: a restarted dashboard numbers alerts afresh
            "step": alert.step,
            "step_name": printable(alert.step_name),
            "missing": list(alert.missing),
            "missing_names": missing,
            "undefined": alert.undefined,
            "late_for": [self.name(s) for s in alert.late_for],
            "forgotten": None if alert.forgotten_name is None else printable(alert.forgotten_name),
            "probability": alert.probability,
            "video_time": alert.video_time,
            "replayed": not record.live_copy,  # never seen live here: known only from the checker's re-sends
            "raised": record.raised,
            "published": alert.timestamp,
            "received": record.received,
            # Only a time a picture can be named for: the page asks no /frames/N that can only answer 404.
            "frame": self.frames and alert.video_time is not None and frame_name(alert.video_time) is not None,
            "retracted": None if retraction is None else {
                "confirmed": None if retraction.confirmed_name is None else printable(retraction.confirmed_name),
                "at": record.retracted_at,
            },
            "acked_at": record.acked_at,
        }  # fmt: skip

    def _alert_brief(self, record: AlertRecord) -> dict[str, Any]:
        """What a tile shows of its stream's last alert (the feed has the rest): tiles go out several times a
        second, to every page."""
        alert = record.alert
        return {"id": record.id, "step_name": printable(alert.step_name), "probability": alert.probability,
                "missing_names": [printable(n) for n in alert.missing_names], "acked_at": record.acked_at,
                "retracted": record.retraction is not None}  # fmt: skip

    def tile_state(self, stream_id: str, now: float, connected: bool) -> str | None:
        """What a stream's tile says it is: ``ended``; else ``unknown`` while the checker is not answering (the
        link is down, so nothing can be said of the stream); else ``silent`` once its status has not arrived for
        `SILENT_S` (the checker, which re-sends it every 0.5 s, no longer knows it); else ``lost`` or ``live`` as
        the checker says. None for a stream it does not hold.

        Args:
            stream_id: the stream.
            now: wall time.
            connected: the link to the checker is up (`streaming.dashboard.feed.FeedStatus.connected`).
        """
        status = self.streams.get(stream_id)
        if status is None:
            return None
        if status.ended:
            return "ended"
        if not connected:
            return "unknown"
        if gone_silent(self.heard.get(stream_id, now), now):
            return "silent"
        return "lost" if status.lost else "live"

    def tile_json(self, stream_id: str, now: float, connected: bool = True) -> dict[str, Any] | None:
        """One stream's tile: state, current and last step, next steps, last alert, stage latencies.

        A tile that is not live says no step is being done now and no frame rate (those it was last told are old
        news), and when the stream's present state began and when its status last arrived.

        Args:
            stream_id: the stream.
            now: wall time, for `tile_state`.
            connected: the link to the checker is up.
        """
        status = self.streams.get(stream_id)
        state = self.tile_state(stream_id, now, connected)
        if status is None or state is None:
            return None
        left = self.left.get(stream_id)
        shown = allowed_next(status, left)
        allowed = [{"step": step, "name": self.name(step), "probability": score}
                   for step, score in shown[:MAX_SHOWN_STEPS]]  # fmt: skip
        last = self.by_id.get(self.last_alert.get(stream_id, -1))
        report = self.reports.get(stream_id)
        # A session that recognised nothing gets no verdict, as in the view: its end report often names every step.
        unjudged = status.ended and nothing_recognised(len(status.done), status.alerts)
        never = None
        if report is not None and report.run == status.run and not unjudged:
            never = [self.name(step) for step in report.missing]
        return {
            "stream": stream_id,
            "run": status.run,
            "state": state,
            "stopped": status.stopped,  # an ended session its detector was stopped in, before its source's end
            "current": self.name(status.current) if state == "live" else None,
            "last_done": self.name(status.done[-1]) if status.done else None,
            "done": len(status.done),
            "allowed": allowed,
            "allowed_more": max(0, len(shown) - MAX_SHOWN_STEPS),
            # every step left waits on the one under way: "after <it>", as in the terminal view, not "none"
            "after": self.name(waiting_on(status, left)),
            "alerts": status.alerts,
            "last_alert": None if last is None or last.alert.run != status.run else self._alert_brief(last),
            "never_done": never,
            "no_verdict": no_verdict_text(status.frames, status.stopped) if unjudged else None,
            "fps": status.fps if state in ("live", "ended") else None,
            "frames": status.frames,
            "dropped": status.dropped,
            "gaps": status.gaps,
            "latency_ms": {name: getattr(status, name) for name in LATENCY_FIELDS},
            "updated": status.timestamp,
            "heard": self.heard.get(stream_id),
            "since": self.since.get(stream_id),
        }

    def take_dirty_tiles(self, now: float, connected: bool = True) -> list[dict[str, Any]]:
        """The tiles that changed since the last call (and forget that they did): those whose status changed, and
        those whose `tile_state` did (a stream gone silent, the checker link lost or back).

        Args:
            now: wall time.
            connected: the link to the checker is up.
        """
        for stream in self.streams:
            if self.tile_state(stream, now, connected) != self.shown_state.get(stream):
                self.dirty.add(stream)
        tiles = [tile for stream in sorted(self.dirty) if (tile := self.tile_json(stream, now, connected)) is not None]
        for tile in tiles:
            self.shown_state[tile["stream"]] = tile["state"]
        self.dirty.clear()
        return tiles

    def health_json(self) -> dict[str, int] | None:
        """The checker's own counts of what it took in and refused (its latest ``checker`` message)."""
        if self.health is None:
            return None
        return {name: getattr(self.health, name) for name in HEALTH_FIELDS}

    def snapshot(self, now: float, connected: bool = True) -> dict[str, Any]:
        """Everything a page that just connected needs: every tile, every kept alert and ended session (newest first),
        the names, the steps the --graph names otherwise than the checker.

        Args:
            now: wall time.
            connected: the link to the checker is up.
        """
        tiles = [tile for sid in sorted(self.streams) if (tile := self.tile_json(sid, now, connected)) is not None]
        return {
            "type": "snapshot",
            "tiles": tiles,
            "alerts": [self.alert_json(record) for record in reversed(self.alerts)],
            "names": {str(step): name for step, name in self.steps.shown.items()},
            "name_conflicts": [self.conflict_json(step) for step in self.name_conflicts],
            "max_alerts": self.max_alerts,
            "finished": [self.finished_json(session) for session in reversed(self.finished.values())],
            "max_finished": self.max_finished,
            "forgotten_open": self.forgotten_open,
        }


def _heard_running(run: str, previous: Status | None, heard: float | None, now: float) -> bool:
    """The stream's status before this end was of ``run``, neither ended nor lost, and heard less than `SILENT_S`
    before ``now``: the checker re-sends it every 0.5 s, so an end that follows a longer silence (the link to the
    checker down, or the checker itself) may have come at any time since. A lost one is re-sent as often, but says
    the detector was silent: its end came with the heartbeat it sent again once its link was back."""
    return (previous is not None and previous.run == run and not previous.ended and not previous.lost
            and heard is not None and not gone_silent(heard, now))


def _phase(row: Status) -> tuple[object, ...]:
    """What a tile's "since" dates: the run, and whether it is lost or ended."""
    return (row.run, row.lost, row.ended)


def _shown(row: Status) -> tuple[object, ...]:
    """What a tile shows of a status: everything but its sequence number and send time."""
    return (row.run, row.done, row.allowed, row.allowed_scores, row.current, row.alerts, row.ended, row.lost,
            row.frames, row.dropped, row.fps, row.gaps, *(getattr(row, name) for name in LATENCY_FIELDS))
