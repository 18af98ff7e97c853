"""The detector's one frame loop: 1..K streams through one feature extractor and one MiniROAD.

Each stream's reader runs in its own thread: it decodes a frame, prepares it for the network there (resized to the
backbone's input: `streaming.extractors.FeatureExtractor.prepare`) and hands it over. The readers start their slots
spread over one frame period (`stagger_s`), so that the cameras' frames arrive one after the other, not all at once.
On a CPU, ``threads`` workers (at most one per stream) each take a share of the frames that are ready and extract
their features as one batch of the fixed sizes (`streaming.detector.batching`, every size warmed before the first
frame is read), each worker on its own core (torch's intra-op threads: the cores left over per worker): a small batch
split across two cores' barriers cost 2.7 times the CPU of two batches side by side on a busy machine. Then, one
worker at a time, the batch steps its streams' GRU state rows (`recognition.model.FastStepper.step_rows` on a CPU,
`recognition.model.ModelStepper` on a GPU) and each stream gets its frame (`DetectorStream.deliver`). A stream's next
frame is taken only once its last one was delivered, so its state steps in order. On a GPU one worker runs every
batch (torch keeps ``threads``). One camera is a batch of one.

It never waits for a stream: a batch is whatever is ready when a worker is free, so a stalled or failed source holds
back no other, and batches grow by themselves when the workers fall behind (continuous batching). A stream whose
source ends (or fails, after its reader's reconnect attempts) is flushed and sends its last heartbeats while the
others go on.
"""

from __future__ import annotations

import contextlib
import math
import threading
import time
import traceback
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Final

import numpy as np
import torch

from graphs.common.errors import InputError, RunError, output_full
from recognition.checkpoint import DetectorCheckpoint
from recognition.model import MiniROAD, make_stepper
from streaming.detector.batching import BatchedExtractor, Buckets, default_batch_sizes
from streaming.detector.streams import DetectorStats, DetectorStream
from streaming.extractors import FeatureExtractor
from streaming.readers import Frame, source_fault
from streaming.readers import out_of_memory as reader_out_of_memory
from streaming.transport import HEARTBEAT_S, PING_TIMEOUT_MS, POLL_MS

FINAL_REPEATS = 3  # the last heartbeat is sent this many times, FINAL_GAP_S apart
FINAL_GAP_S = HEARTBEAT_S / 5  # whatever the heartbeat period, so stopping takes (FINAL_REPEATS - 1) * 0.1 s
# A stream that ended this long before its checker's connection was seen cut may have sent its last heartbeats into
# the dead connection (a frozen checker is taken as gone only after PING_TIMEOUT_MS): they go again when it is back.
UNHEARD_BEFORE_CUT_S = PING_TIMEOUT_MS / 1000 + 1.0
READER_JOIN_S = 10.0  # on shutdown, longest wait for each reader thread (then the interpreter's own wait, below)
# The readers and workers are not daemon threads: a daemon thread still inside OpenCV, decord or torch when the
# interpreter finalises aborts the process ("terminate called without an active exception", exit -6: Python 3.11 ends
# it with pthread_exit, and C++ frames terminate on that unwinding). An eval stopped by SIGTERM aborted so once in
# CI, its reader still decoding after the 2 s it was given. Halted, each ends after its current decode or batch, so
# the interpreter's wait for them at exit is that long at most.
WORKER_JOIN_S = 30.0  # on shutdown, longest wait for a worker to finish its batch (a GPU's first pass is slow)
_ROOT = Path(__file__).resolve().parents[2]  # a checkout, or the site-packages the project is installed in
# Where the frames `internal_failure` names are this project's own: its packages, not the folder above them, which
# installed is site-packages (torch's frames were named the project's innermost line); a checkout's tests too.
_PROJECT: Final = tuple(_ROOT / name for name in ("graphs", "recognition", "streaming", "tgml")) + \
    ((_ROOT / "tests",) if (_ROOT / "pyproject.toml").is_file() else ())


def out_of_memory(err: BaseException) -> bool:
    """Whether ``err`` says the host's or a GPU's memory ran out (torch's ``OutOfMemoryError``, or what
    `streaming.readers.out_of_memory` reads as such): no bug of the project, and no traceback needed."""
    oom = getattr(torch, "OutOfMemoryError", torch.cuda.OutOfMemoryError)
    return isinstance(err, oom) or reader_out_of_memory(err)


def _ours(filename: str) -> bool:
    path = Path(filename).resolve()
    return any(path.is_relative_to(package) for package in _PROJECT)


def internal_failure(err: BaseException) -> BaseException:
    """What a run that failed inside ends with: ``err`` itself when it already says what failed in one line
    (`InputError`, `RunError`), is a sink's standard output gone or full, or is no error at all (an interrupt); any
    other exception (``MemoryError``, a GPU's ``CUDA out of memory``, a bug) as a `RunError` naming its type, message
    and the project's innermost line it came through, caused by ``err``; a bug (anything but memory run out,
    `out_of_memory`) prints the traceback of ``err`` above that line (`RunError.shows_cause`).

    It went out as a traceback, the run's streams cut short behind it with no ``error:`` line, which read as a crash
    of the command rather than a failure the run had said and ended its sessions for; its exit status (1, that of a
    traceback too) keeps telling it from a mistake in the input (2).
    """
    if isinstance(err, InputError | RunError | BrokenPipeError) or output_full(err) or not isinstance(err, Exception):
        # A sink's standard output whose reader left (`| head`: the command's quiet 141, as `Fanout` passes it on for)
        # or whose device is full (its own line): `exit_on_input_error` says those, as it does off the detector.
        return err
    text = next((line.strip() for line in str(err).splitlines() if line.strip()), "")
    what = f"{type(err).__name__}: {text[:200]}" if text else type(err).__name__
    frames = traceback.extract_tb(err.__traceback__)
    ours = [f for f in frames if _ours(f.filename)] or frames
    if ours:
        where = Path(ours[-1].filename).resolve()
        shown = where.relative_to(_ROOT) if _ours(str(where)) else where
        what += f" (at {shown}:{ours[-1].lineno} in {ours[-1].name})"
    failure = RunError(f"internal failure of the detector, not a mistake in its input: {what}")
    failure.__cause__ = err
    failure.shows_cause = not out_of_memory(err)  # a bug: its traceback, above the line, is what a fix starts from
    return failure


def stagger_s(index: int, streams: int, fps: float) -> float:
    """When stream ``index`` of ``streams`` reads its first frame: the streams' slots spread evenly over one period
    of ``fps``, so that a loop of K cameras sees one frame every ``1 / (K fps)`` s rather than K at once."""
    return index / (streams * fps) if streams > 1 and fps > 0 else 0.0


def batched(extractor: FeatureExtractor | BatchedExtractor, streams: int, batch_sizes: Sequence[int] = ()
            ) -> BatchedExtractor:
    """The extractor behind the fixed batch sizes (``batch_sizes``, or `default_batch_sizes` for ``streams``);
    one that is batched already is kept as it is."""
    if isinstance(extractor, BatchedExtractor):
        return extractor
    on_gpu = getattr(getattr(extractor, "device", None), "type", "cpu") != "cpu"
    sizes = tuple(batch_sizes) or default_batch_sizes(extractor, streams, on_gpu)
    return BatchedExtractor(extractor, Buckets(sizes))


class FrameLoop:
    """The frame loop of one or several streams (see the module), each stream with its own GRU state row,
    segmenter, session and statistics.

    Args:
        streams: the streams, with distinct stream ids.
        extractor: the feature extractor the checkpoint names.
        model: the MiniROAD detector (eval mode).
        checkpoint: its description.
        threads: on a CPU, workers that extract features side by side, one core each; on a GPU, torch's threads.
        batch_sizes: the backbone's batch sizes (`streaming.detector.batching.Buckets`); empty: the defaults.
        warn: told at once when a stream's source fails while other streams go on (their run may never end, and
            the run's error line waits for the end); None: nobody.
    """

    def __init__(
        self,
        streams: list[DetectorStream],
        extractor: FeatureExtractor | BatchedExtractor,
        model: MiniROAD,
        checkpoint: DetectorCheckpoint,
        threads: int = 1,
        batch_sizes: Sequence[int] = (),
        warn: Callable[[str], None] | None = None,
        rejoined: Callable[[], float | None] | None = None,
    ) -> None:
        checkpoint.check_features(extractor.dim, source=f"feature extractor {extractor.name!r}")
        ids = [s.stream_id for s in streams]
        if not streams or len(set(ids)) != len(ids):
            raise InputError(f"FrameLoop: give streams with distinct ids, got {ids}")
        self.streams = streams
        self.batches = batched(extractor, len(streams), batch_sizes)
        self.stepper = make_stepper(model, len(streams))
        self.threads = threads
        self.warn = warn
        self.rejoined = rejoined
        on_gpu = getattr(getattr(self.batches.extractor, "device", None), "type", "cpu") != "cpu"
        # A stream has one frame in flight at a time, so more workers than streams would idle: they lend torch
        # their cores instead (one camera with --threads 2 runs each frame on two cores, as before the workers).
        self.workers = 1 if on_gpu else min(threads, len(streams))
        # One lock, three conditions, so that each hand-over wakes only the threads it concerns: a frame handed over
        # wakes the workers, a frame taken wakes the readers, a stream's end wakes the loop. One condition for all
        # woke every waiting thread (and the loop, which then took the output lock) several times per frame.
        lock = threading.Lock()
        self._cond = threading.Condition(lock)  # workers: a frame is takeable
        self._slot_free = threading.Condition(lock)  # readers: a stream's handed-over frame was taken
        self._loop_wake = threading.Condition(lock)  # the loop: a stream may have ended, or a worker failed
        self._out = threading.Lock()  # one worker at a time steps the model and publishes (sockets are not shared)
        # The frame each reader thread handed over, with its image prepared for the network.
        self._ready: list[tuple[Frame, np.ndarray] | None] = [None] * len(streams)
        self._busy = [False] * len(streams)  # a worker holds the stream's frame: its next one waits
        self._read_out = [False] * len(streams)  # the reader thread has ended
        self._halt = threading.Event()
        self._failure: BaseException | None = None  # what stopped a worker; the loop raises it
        self._finals: list[tuple[float, DetectorStream]] = []  # last heartbeats still to repeat, with when
        self._ended_at: dict[str, float] = {}  # when (monotonic) each ended stream sent its last heartbeat
        self._on_end: Callable[[DetectorStream], None] | None = None  # `run`'s ``ended``

    def run(self, stop: threading.Event | None = None,
            ended: Callable[[DetectorStream], None] | None = None) -> list[DetectorStats]:
        """Process every stream until each source ends or reaches ``max_frames``, or ``stop`` is set.

        Args:
            stop: set it to end every stream (each still sends its last heartbeats).
            ended: called with each stream once it has ended (its statistics settled, its last heartbeat sent), on
                this thread, while the others go on: a stream's end line is said when it ends, not when the last
                source does (for live cameras, never). Streams that end in the same pass come in the order of
                ``streams``. Not called for a stream whose end failed (an error, or a second one while stopping).

        Returns:
            Each stream's statistics, in the order of ``streams``.
        """
        stop = stop or threading.Event()
        self._on_end = ended
        torch.set_num_threads(max(1, self.threads // self.workers))
        try:
            self.warm()
        except (InputError, RunError):
            raise
        except Exception as err:  # a GPU out of memory on its first batches: no stream has started yet
            failure = internal_failure(err)
            if failure is err:  # not its own cause
                raise
            raise failure from err
        readers = [threading.Thread(target=self._read, args=(i,), name=f"read-{s.stream_id}", daemon=False)
                   for i, s in enumerate(self.streams)]  # fmt: skip
        workers = [threading.Thread(target=self._work, name=f"features-{k}", daemon=False)
                   for k in range(self.workers)]  # fmt: skip
        for stream in self.streams:
            stream.start()
        interrupted = False
        try:  # the threads start inside: an interrupt between two starts still halts those started
            for thread in readers + workers:
                thread.start()
            while not stop.is_set() and not all(s.ended for s in self.streams):
                with self._loop_wake:
                    finished = self._finished()
                    if not finished and self._failure is None:
                        self._loop_wake.wait(self._wait_s())
                        finished = self._finished()
                if self._failure is not None:
                    raise self._failure
                if finished or self._finals or self._ended_at:
                    with self._out:
                        for i in finished:
                            self._end(self.streams[i])
                        self._repeat_finals(time.monotonic())
                        self._tell_ends_again()
                    for i in finished:  # out of the lock: a slow or blocked stderr must not stall the other streams
                        self._tell(self.streams[i])
            self._stop_workers(workers)
            if self._failure is not None:
                raise self._failure
            for stream in self.streams:
                if not stream.ended:  # stopped: what its segmenter holds is published, as at the end of a file
                    self._end(stream, stopped=True)
                    self._tell(stream)
        except KeyboardInterrupt:
            interrupted = True  # first: a second Ctrl-C while the workers stop still ends the sessions as stopped
            # A worker that failed before the Ctrl-C (or on the batch it finished as it stopped) ended the run: its
            # streams were cut short by the failure, not stopped by the person, and its error line is the run's end.
            self._stop_workers(workers)
            if self._failure is not None:
                interrupted = False
                raise self._failure from self._failure.__cause__  # not the interrupt's context: the failure came first
            raise
        finally:
            self._stop_workers(workers)
            for stream in self.streams:
                stream.reader.interrupt()
            for thread in readers:
                if thread.ident is not None:
                    thread.join(READER_JOIN_S)
            for stream in self.streams:
                if not stream.ended:
                    # Ctrl-C or SIGTERM (a detector run on its own sets no stop event) ends a session as the end of
                    # its file does, its open segment published: without it, the step under way was never confirmed,
                    # its early alert retracted and a real mistake gone from the verdict. An error ends the stream
                    # without it, without its end line, and without ending its session: the run's error line says
                    # why, and a session cut short by a failure must never be reported as one that played to its end.
                    with contextlib.suppress(Exception):  # a second error must not hide the one that stopped it
                        self._end(stream, flush=interrupted, stopped=interrupted, failed=not interrupted)
                        if interrupted:
                            self._tell(stream)
            while self._finals:
                time.sleep(max(0.0, self._finals[0][0] - time.monotonic()))
                self._repeat_finals(time.monotonic())
        return [s.stats for s in self.streams]

    def _stop_workers(self, workers: list[threading.Thread]) -> None:
        """Stop the readers and the workers; each worker finishes (delivers) the batch it holds."""
        self._halt.set()
        self._wake_all()
        for thread in workers:
            if thread.ident is not None:
                thread.join(WORKER_JOIN_S)

    def warm(self) -> float:
        """Run every batch size once (`streaming.detector.batching.BatchedExtractor.warm`), if not done yet; the loop
        does it before its readers read their first frame.

        Returns:
            Seconds it took (0 when warm already).
        """
        return 0.0 if self.batches.warmed else self.batches.warm()

    def _wait_s(self) -> float:
        """How long the loop may wait for a frame: until the next repeated last heartbeat is due, at most a poll."""
        due = min((when for when, _ in self._finals), default=float("inf"))
        return min(POLL_MS / 1000, max(0.0, due - time.monotonic()))

    def _read(self, i: int) -> None:
        """Reader thread of stream ``i``: read a frame, wait until the previous one was taken, hand it over."""
        stream = self.streams[i]
        try:
            self._halt.wait(stagger_s(i, len(self.streams), stream.reader.config.fps))
            while not self._halt.is_set() and not stream.read_enough:
                try:
                    frame = stream.reader.read()
                except Exception as err:
                    if not source_fault(err):
                        raise
                    # The source's own (a damaged frame OpenCV refused, a file gone): its stream ends, never the others.
                    stream.stats.error = f"--video {stream.reader.source.spec}: {str(err).strip()[:160] or repr(err)}"
                    break
                if frame is None:
                    break
                prepared = self.batches.prepare(frame.image)  # here, not in the loop: resizing is the reader's work
                with self._cond:
                    while self._ready[i] is not None and not self._halt.is_set():
                        self._slot_free.wait(POLL_MS / 1000)
                    self._ready[i] = (frame, prepared)
                    self._cond.notify_all()
        except Exception as err:
            # Memory run out or a bug while decoding, resizing or preparing a frame: no fault of the video (it was
            # said as "--video X: MemoryError()", exit status 2, and sent the user looking for damage that was not
            # there), but the detector's internal failure, which ends the run as a worker's does.
            self._fail(err)
        finally:
            with self._cond:
                self._read_out[i] = True
                self._loop_wake.notify_all()

    def _work(self) -> None:
        """A worker: take a share of the ready frames, extract their features, step and deliver them; until halted."""
        try:
            while not self._halt.is_set():
                taken = self._take()
                if not taken:
                    continue
                try:
                    self._process(taken)
                except BaseException as err:
                    # Said before the streams are freed (below): a stream whose frame failed (or went undelivered
                    # behind it) looked ended to the loop, which sent its normal end before it saw the failure.
                    self._fail(err)
                    raise
                finally:
                    with self._cond:
                        for i, _ in taken:
                            self._busy[i] = False
                        self._cond.notify_all()  # those streams' next frames may be waiting
                        if any(self._read_out[i] for i, _ in taken):
                            self._loop_wake.notify_all()  # a stream's last frame is delivered
        except BaseException as err:  # the loop raises it; the other workers stop
            self._fail(err)

    def fail(self, reason: BaseException) -> None:
        """End the run as failed from outside, ``reason`` being what `run` raises: a part beside the detector that
        failed (the one-command run's view, its checker process) cut its sessions short, and a stop would end them as
        stopped by the person, with a verdict so far and a report of the steps the stop left undone."""
        self._fail(reason)

    def _fail(self, err: BaseException) -> None:
        """A worker failed: the loop raises the first failure, and every thread stops."""
        with self._cond:
            self._failure = self._failure or internal_failure(err)
            self._halt.set()
        self._wake_all()

    def _take(self) -> list[tuple[int, tuple[Frame, np.ndarray]]]:
        """Wait up to a poll for frames, then take this worker's share of those ready (of streams with no frame in
        another worker), the oldest first: all of them over the workers, rounded up (on a CPU a batch is not cheaper
        per frame than one frame, so two workers take one frame each rather than one taking two).

        Returns:
            ``(stream index, (frame, prepared image))`` pairs, possibly none.
        """
        with self._cond:
            ready = self._takeable()
            if not ready and not self._halt.is_set():
                self._cond.wait(POLL_MS / 1000)
                ready = self._takeable()
            if not ready or self._halt.is_set():
                return []
            share = math.ceil(len(ready) / self.workers)
            taken = []
            for i in ready[:share]:
                frame = self._ready[i]
                assert frame is not None  # `_takeable` lists only streams with a frame
                taken.append((i, frame))
                self._ready[i] = None
                self._busy[i] = True
            self._slot_free.notify_all()
            if len(ready) > share:
                self._cond.notify_all()  # the other workers' shares
            return taken

    def _wake_all(self) -> None:
        """Wake every waiting thread (to stop, or to see a failure)."""
        with self._cond:
            for condition in (self._cond, self._slot_free, self._loop_wake):
                condition.notify_all()

    def _takeable(self) -> list[int]:
        """Streams with a frame handed over and none in a worker (call with the lock held)."""
        ready = [(f[0].arrived, i) for i, f in enumerate(self._ready) if f is not None and not self._busy[i]]
        return [i for _, i in sorted(ready)]

    def _finished(self) -> list[int]:
        """Streams whose reader ended and whose last frame was delivered, not ended yet (call with the lock held)."""
        return [i for i, s in enumerate(self.streams)
                if self._read_out[i] and self._ready[i] is None and not self._busy[i] and not s.ended]  # fmt: skip

    def _process(self, taken: list[tuple[int, tuple[Frame, np.ndarray]]]) -> None:
        """One batch: the frames' features, then (one worker at a time) one step of their streams' state rows and
        each stream's segmenter."""
        for i, (frame, _) in taken:
            self.streams[i].took(frame)
        started = time.perf_counter()
        feats = self._features([image for _, (_, image) in taken])  # (m, F)
        extracted = time.perf_counter()
        with self._out:
            stepped = time.perf_counter()
            rows = torch.tensor([i for i, _ in taken], dtype=torch.long)
            # A copy: step_rows hands a view of its buffer, which the next batch overwrites, and an observer (the
            # overlay draws a frame once the next one is known) or a sink may hold a frame's row past this batch.
            probs = self.stepper.step_rows(torch.from_numpy(feats), rows).numpy().copy()  # (m, outputs)
            done = time.perf_counter()
            for j, (i, (frame, _)) in enumerate(taken):
                stream = self.streams[i]
                stream.stages.add("features", extracted - started)
                stream.stages.add("detector", done - stepped)
                stream.deliver(frame, feats[j], probs[j])

    def _features(self, images: list[np.ndarray]) -> np.ndarray:
        """Features of frames from several sources: one batch per frame size (cameras need not agree; prepared for a
        network they all have its input size)."""
        shapes = [image.shape for image in images]
        if len(set(shapes)) == 1:
            return self.batches(np.stack(images))
        out = np.empty((len(images), self.batches.dim), dtype=np.float32)
        for shape in set(shapes):
            group = [j for j, other in enumerate(shapes) if other == shape]
            out[group] = self.batches(np.stack([images[j] for j in group]))
        return out

    def _end(self, stream: DetectorStream, flush: bool = True, stopped: bool = False, failed: bool = False) -> None:
        """A stream's source ended (or the run stops: ``stopped``; or it failed: ``failed``): flush it, send its last
        heartbeat and schedule the repeats (the caller then tells `run`'s ``ended``: `_tell`)."""
        # A source that failed after its stream went quiet (a camera retried in vain) ends unheard: the step under way
        # when it stopped delivering, flushed, went out after a heartbeat that showed the lost stream live again.
        if flush and not (stream.source_failed and stream.quiet):
            stream.flush()
        stream.stopped = stopped
        stream.failed = failed
        stream.settle()
        stream.last_heartbeat()
        others = [s.stream_id for s in self.streams if not s.ended]
        if stream.stats.error and others and self.warn is not None:
            go_on = "the other stream goes on" if len(others) == 1 else f"the other {len(others)} go on"
            self.warn(f"{stream.stream_id}: {stream.stats.error}; this stream has ended, {go_on}")
        self._ended_at[stream.stream_id] = time.monotonic()
        self._repeat_last_heartbeat(stream)

    def _tell(self, stream: DetectorStream) -> None:
        """`run`'s ``ended`` of a stream that has ended."""
        if self._on_end is not None:
            self._on_end(stream)

    def _tell_ends_again(self) -> None:
        """A checker back after its connection was cut (restarted, say) heard no stream end meanwhile: those streams'
        sessions would stay unended there, with no verdict, while the others go on. Their last heartbeats go again."""
        cut = self.rejoined() if self.rejoined is not None else None
        if cut is None:
            return
        for stream in self.streams:
            ended = self._ended_at.get(stream.stream_id)
            if ended is not None and ended >= cut - UNHEARD_BEFORE_CUT_S:
                stream.last_heartbeat()
                self._repeat_last_heartbeat(stream)

    def _repeat_last_heartbeat(self, stream: DetectorStream) -> None:
        """Send a stream's last heartbeat, just sent, `FINAL_REPEATS` - 1 more times, `FINAL_GAP_S` apart
        (`_repeat_finals`), in place of the repeats it still had due: a stream that ended just before its checker
        came back sent its repeats twice over, those of its end and those of the checker's return."""
        now = time.monotonic()
        self._finals = [(when, other) for when, other in self._finals if other is not stream]
        self._finals += [(now + k * FINAL_GAP_S, stream) for k in range(1, FINAL_REPEATS)]
        self._finals.sort(key=lambda item: item[0])

    def _repeat_finals(self, now: float) -> None:
        while self._finals and self._finals[0][0] <= now:
            _, stream = self._finals.pop(0)
            stream.last_heartbeat()
