"""The alert frames (``--alert-frames DIR``): for each key-step a stream publishes, the frame at which it was
published, as a JPEG the dashboard shows beside the alert.

The file of a key-step is ``DIR/<stream>/<ms>.jpg``: ``<stream>`` is ``urllib.parse.quote(stream_id, safe='')``,
``<ms>`` is ``int(round(start * 1000))`` where ``start`` is the key-step's start in the stream's video time: the
``start`` of the `KeyStepEvent` (confirmed) or `KeyStepOnset` (announced) the detector sends, which is the number
the checker copies into the `Alert.video_time` of an alert it raises on that message (`streaming.frame_names`, the
rule the dashboard follows too; a start of `streaming.frame_names.FRAME_TIME_LIMIT_S` or more has no picture). An
announced step's frame is written when it is announced; its confirmation, if it starts at the same time, overwrites
it with the frame that confirmed it; the copies of the onset a detector re-sends while the step lasts write nothing,
but try the announcement's frame again (up to `ANNOUNCED_RETRIES` times) when its write failed.

Bounded: at most ``keep`` files per stream folder, the oldest (the earliest video times) deleted first. The JPEGs
are encoded and written in the sink's own thread (`BackgroundSink`), so a slow disk never holds the frame loop.
"""

from __future__ import annotations

import contextlib
import urllib.parse
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import cv2
import numpy as np

from graphs.common.errors import InputError
from graphs.common.files import make_folders, write_failure
from streaming.detector.sinks import BackgroundSink
from streaming.frame_names import FRAME_STEM, frame_name
from streaming.messages import KeyStepEvent, KeyStepOnset, Message
from streaming.readers import Frame

DEFAULT_KEEP = 500  # files per stream
JPEG_QUALITY = 85
ANNOUNCED_RETRIES = 3  # tries again of an announcement's picture, one per copy of its onset (every 0.5 s)


def stream_folder(root: str | Path, stream_id: str) -> Path:
    """The folder of one stream's frames: ``root / quote(stream_id, safe='')``.

    Raises:
        InputError: a stream id of ``.`` or ``..``, which the wire allows but quoting leaves as they are: its frames
            would go into ``root`` or above it, and the bound would delete files there.
    """
    name = urllib.parse.quote(stream_id, safe="")
    if name in (".", ".."):
        raise InputError(f"--stream-id {stream_id!r}: with --alert-frames it would name the folder itself or the one "
                         "above; give the stream another id")
    return Path(root) / name


def is_frame_file(path: Path) -> bool:
    """``path`` is named as `frame_name` names a key-step's frame (``<ms>.jpg``): the only files the bound deletes."""
    return path.suffix == ".jpg" and FRAME_STEM.fullmatch(path.stem) is not None


def check_alert_frames_dir(path: str | Path) -> Path:
    """Refuse an ``--alert-frames`` folder that cannot be made or written; make it.

    Raises:
        InputError: one line naming the option and the reason.
    """
    try:  # a file where the folder goes is named as such, not as mkdir's "File exists"
        return make_folders(path, what="alert frames")
    except InputError as err:
        raise InputError(f"--alert-frames {err}") from None


@dataclass
class _Shot:
    """One file to write: the frame, where."""

    image: np.ndarray
    path: Path
    evicted: tuple[Path, ...] = ()  # files deleted once this one is written (the bound)
    # Set by the writer's thread (None: not tried yet): an announcement's picture that failed is tried again.
    written: bool | None = None
    tries_again: int = 0  # how many times it was handed to the writer again (`_PictureWriter.again`)


class _PictureWriter(BackgroundSink[_Shot]):
    """The writer's thread: a picture tried again is one picture, counted and logged not written once."""

    def again(self, message: _Shot) -> bool:
        return message.tries_again > 0


class AlertFrames:
    """Writes each announced or confirmed key-step's frame, for every stream of a detector (see the module).

    `for_stream` gives one stream's part: its ``seen`` takes each frame (as the stream's frame observer) and its
    ``send`` each message (as a sink); a key-step message writes the frame seen last.

    Args:
        root: the ``--alert-frames`` folder (made if missing).
        keep: files kept per stream.
        log: where write failures go (bounded; None: stderr).
    """

    def __init__(self, root: str | Path, keep: int = DEFAULT_KEEP, log: Callable[[str], None] | None = None) -> None:
        if keep < 1:
            raise InputError(f"--alert-frames-keep {keep}: keep at least one frame per stream")
        self.root = check_alert_frames_dir(root)
        self.keep = keep
        self._writer = _PictureWriter(self._write, f"alert frames {self.root}", log=log,
                                      failed_as="picture(s) not written")

    def for_stream(self, stream_id: str) -> StreamFrames:
        """The part of one stream (its folder made now)."""
        folder = stream_folder(self.root, stream_id)
        try:
            folder.mkdir(exist_ok=True)
        except OSError as err:
            raise InputError(f"--alert-frames {self.root}: cannot make {folder.name} ({err.strerror or err})") from None
        return StreamFrames(folder, self.keep, self._writer)

    @staticmethod
    def _write(shot: _Shot) -> None:
        try:
            AlertFrames._write_file(shot)
        except BaseException:
            shot.written = False
            raise
        shot.written = True

    @staticmethod
    def _write_file(shot: _Shot) -> None:
        name = f"{shot.path.parent.name}/{shot.path.name}"  # the writer serves every stream's folder
        ok, data = cv2.imencode(".jpg", cv2.cvtColor(shot.image, cv2.COLOR_RGB2BGR),
                                [cv2.IMWRITE_JPEG_QUALITY, JPEG_QUALITY])
        if not ok:
            raise OSError(f"{name}: cannot encode it as a JPEG")
        part = shot.path.with_suffix(".jpg.part")
        try:
            part.write_bytes(data.tobytes())
            part.replace(shot.path)  # a reader never sees half a file
        except OSError as err:
            # A full disk left an empty .part per key-step, run after run; what was not written is said, not the errno.
            with contextlib.suppress(OSError):
                part.unlink(missing_ok=True)
            raise OSError(f"{name}: {write_failure(err, shot.path.parent)}") from None
        for old in shot.evicted:
            old.unlink(missing_ok=True)

    def close(self) -> None:
        """Write what is queued (for at most `streaming.detector.sinks.STOP_WAIT_S`), then stop; when some picture
        was not written, say how many in all (the warnings as they happen stop after a few, and the run ends as if
        complete)."""
        self._writer.close()
        lost = self._writer.lost()  # a picture tried again counts once (`_PictureWriter.again`)
        if lost:
            self._writer.warn(f"alert frames {self.root}: {self._writer.delivered} picture(s) written, {lost} not "
                              "written in all")

    def __enter__(self) -> AlertFrames:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class StreamFrames:
    """One stream's alert frames: a frame observer (`seen`) and a sink (`send`).

    Args:
        folder: the stream's folder.
        keep: files kept in it.
        writer: the thread that encodes and writes.
    """

    def __init__(self, folder: Path, keep: int, writer: BackgroundSink[_Shot]) -> None:
        self.folder = folder
        self.keep = keep
        self._writer = writer
        self._frame: np.ndarray | None = None
        # Files already there from an earlier run count towards the bound, oldest (smallest time) first; a file this
        # class did not name (a photo someone put there) is never counted, so never deleted.
        old = sorted((p for p in folder.glob("*.jpg") if is_frame_file(p)), key=lambda p: int(p.stem))
        self._files: deque[Path] = deque(old)
        # The announcement whose frame was written: (index, step, start) of its onset, None once withdrawn; its
        # picture, and how many more times it may be tried again after a failed write.
        self._announced: tuple[int, int, float] | None = None
        self._announced_shot: _Shot | None = None
        self._tries_left = 0

    def seen(self, frame: Frame, features: np.ndarray, probs: np.ndarray) -> None:
        """Remember the newest frame (the one a message sent during its processing was caused by)."""
        self._frame = frame.image

    def send(self, message: Message) -> None:
        """A key-step message (announced, or confirmed) writes the newest frame under its start time."""
        if self._frame is None or not isinstance(message, KeyStepEvent | KeyStepOnset):
            return
        if isinstance(message, KeyStepOnset):
            announced = (message.index, message.step, message.start)
            if message.withdrawn:
                self._announced = self._announced_shot = None
                return
            # A detector re-sends an onset every 0.5 s while its step lasts: the picture stays the frame at which
            # the step was announced (the early alert's), and each copy would cost a JPEG. A copy tries that frame
            # again when its write failed (a disk full for a moment): the early alert had no picture until the step
            # was confirmed, if ever.
            if announced == self._announced:
                shot = self._announced_shot
                if shot is not None and shot.written is False and self._tries_left > 0:
                    self._tries_left -= 1
                    shot.written = None
                    shot.tries_again += 1
                    self._writer.send(shot)
                return
            self._announced = announced
        name = frame_name(message.start)
        if name is None:  # a start too late to name a file (any peer may send one): no picture, the stream goes on
            return
        path = self.folder / name
        if path not in self._files:
            self._files.append(path)
        evicted = [self._files.popleft() for _ in range(len(self._files) - self.keep)]
        shot = _Shot(self._frame, path, tuple(evicted))
        if isinstance(message, KeyStepOnset):
            self._announced_shot, self._tries_left = shot, ANNOUNCED_RETRIES
        elif self._announced_shot is not None and self._announced_shot.path == path:
            self._announced_shot = None  # confirmed: its picture replaces the announcement's, never tried again
        self._writer.send(shot)  # deleted in the writer's order, after it
