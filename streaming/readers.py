"""Video readers: one small interface, chosen by name or by the ``--video`` spec.

``--video`` forms (`parse_source`):

- ``cam0``, ``0``, ``/dev/video0``: a camera (OpenCV), live;
- ``rtsp://...``, ``http://...``, ``udp://...`` (anything with ``://``): a network stream (OpenCV), live;
- anything else: a video file, read with decord (``reader="auto"`` falls back to OpenCV for formats
  decord cannot open; ``"decord"`` / ``"opencv"`` force one).

Files are sampled at the detector's rate (``fps``): frame ``k`` of the output is the source frame
on screen at ``k / fps`` seconds, and the end of the file ends the stream. With ``realtime`` the file
is paced to the wall clock (a live look), otherwise it is read as fast as the consumer takes it. A file
that cannot be decoded to its end (damaged or truncated) ends the stream early with ``error`` set; both readers
measure the end against the container's header (`early_end`), as decord counts only the frames it finds.

Odd files are refused with one line when they open, never read as an empty success: a file shorter than one
frame at ``fps``, a file that announces more frames than `MAX_SAMPLES` samples or than it has bytes
(`check_announced_frames`, before decord sees it: decord aborts the process on such a header), and a frame-rate
field that is 0, NaN or absurd (outside `MIN_SOURCE_FPS`..`MAX_SOURCE_FPS`; decord then takes the rate from the
frames' own timestamps when those are sane, OpenCV refuses the file). A file the process may not read is
"permission denied".

Live sources never fall behind: a grab thread takes every frame off the source (``grab``: demuxed, and for
compressed streams decoded) but converts to colour (``retrieve``) only the frames the consumer takes; every frame it
grabbed that the consumer never took is counted in ``dropped``. A consumer that is on time gets, at each of its
``fps`` slots, the first frame that arrives in the slot (not one that waited since the slot before); one that is
behind gets the next frame that arrives; so a frame's age when it is delivered is the hand-over, not up to a source
period. A camera or stream that stops delivering
is reopened with bounded exponential backoff (`ReaderConfig.reopen_attempts`), after which the
stream ends with ``error`` set. The tries count until a frame arrives, not until an open succeeds: a source that opens
and then gives nothing (a URL FFmpeg cannot read without seeking, a camera node without an image, an RTSP server that
accepts and never streams) uses them up too. Each reopen is said on stderr (a ``warning:`` line, at most one every
`REOPEN_WARN_EVERY_S`), so a flapping camera is seen. Network streams are opened within ``open_timeout_s``
(`STREAM_OPEN_TIMEOUT_S` by default) and a read waits at most ``stall_timeout_s`` (OpenCV's own limits are 30 s each).

A live source is refused when it does not open (`InputError`), unless the reader is told to retry it
(``retry_first_open``: one source among several, whose others must not wait for it): it is then opened on its grab
thread, and a failed first open is said on a ``warning:`` line and retried as a lost source is.
"""

from __future__ import annotations

import abc
import atexit
import contextlib
import errno
import math
import os
import re
import sys
import threading
import time
import weakref
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Final, Protocol

import cv2
import numpy as np

from graphs.common.errors import InputError, print_warning
from graphs.common.files import not_a_file
from graphs.common.safe_text import count_of
from graphs.common.settings_files import as_written

READER_NAMES: Final = ("auto", "decord", "opencv")
DECODE_BATCH: Final = 32  # frames decord decodes per call; bounds memory, amortises the call
EARLY_END_S: Final = 1.0  # a file whose frames run out this much before its container says is damaged
STREAM_OPEN_TIMEOUT_S: Final = 10.0  # longest a network stream may take to open (OpenCV's default: 30 s)
FFMPEG_QUIET: Final = -8  # FFmpeg's AV_LOG_QUIET
OPENCV_LOG_SILENT: Final = 0  # cv::utils::logging::LOG_LEVEL_SILENT, which OpenCV 4's Python module does not name
MIN_SOURCE_FPS: Final = 0.1  # a frame-rate field below this (a frame every 10 s) is a broken field, not a video
MAX_SOURCE_FPS: Final = 10_000.0  # above the fastest high-speed camera: a broken field
MAX_SAMPLES: Final = 10_000_000  # frames one file may yield (23 days at 5 fps): a bigger count is a broken header
REOPEN_WARN_EVERY_S: Final = 10.0  # at most one reopen warning per live source this often
CAMERA_NUMBER_MAX: Final = 2**31 - 1  # OpenCV takes a camera's number as a C int: a larger one is no camera


def quiet_codec_logs(verbose: bool = False) -> None:
    """Stop OpenCV and the FFmpeg inside OpenCV and inside decord from printing on stderr (process-wide).

    FFmpeg reports every damaged packet and refused connection on stderr itself (a damaged mp4 gave 5086
    lines in ``stream-detect eval``): lines that would break a command's one-line ``error:`` and scroll through
    the live view. What matters reaches the user anyway (a reader's `InputError` or ``error``). Call it before
    OpenCV first opens a video (it reads ``OPENCV_FFMPEG_LOGLEVEL`` once); a value the user set is kept.

    Args:
        verbose: keep the decoders' own logs (``--verbose``: to see why a file does not decode).
    """
    if verbose:
        return
    os.environ.setdefault("OPENCV_FFMPEG_LOGLEVEL", str(FFMPEG_QUIET))
    silence_opencv_log()
    try:
        import decord
    except ImportError:
        return
    decord.logging.set_level(decord.logging.QUIET)


def silence_opencv_log() -> None:
    """Set OpenCV's own log level to silent, in any release pyproject.toml lets in (opencv-python-headless>=4.10).

    OpenCV 5's Python module has the setting only as ``cv2.utils.logging.setLogLevel``; 4.x (4.12 too) only as
    ``cv2.setLogLevel``: a site that keeps OpenCV 4 for another package got an AttributeError traceback from every
    ``stream-detect`` and ``recognition-features`` run.
    """
    opencv_logging = getattr(cv2.utils, "logging", None)
    if opencv_logging is not None:
        opencv_logging.setLogLevel(opencv_logging.LOG_LEVEL_SILENT)
    else:
        getattr(cv2, "setLogLevel")(OPENCV_LOG_SILENT)  # noqa: B009  (OpenCV 5's type stubs lack it)


@contextlib.contextmanager
def _native_stderr_silenced() -> Iterator[None]:
    """Discard what native code writes to file descriptor 2 meanwhile (decord logs failed opens itself)."""
    try:
        saved = os.dup(2)
    except OSError:  # no stderr at all: nothing to silence
        yield
        return
    try:
        with open(os.devnull, "wb") as devnull:
            os.dup2(devnull.fileno(), 2)
        yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)


def _native_message(err: BaseException) -> str:
    """The first line of a native library's error without its ``[hh:mm:ss] file.cc:123:`` log prefixes."""
    lines = str(err).strip().splitlines() or [type(err).__name__]
    line = re.sub(r"^(\[[\d:]+\] \S+:\d+: )+", "", lines[0])
    # A long one is cut at a word, and says so ("Error sending packe" read as the whole reason).
    return line if len(line) <= 120 else line[:120].rsplit(" ", 1)[0] + " ..."


@dataclass(frozen=True)
class ReaderConfig:
    """How to read a source.

    Args:
        fps: frames per second delivered (the detector's rate).
        width: output width in pixels (0 keeps the source size).
        height: output height in pixels (0 keeps the source size).
        reader: ``"auto"``, ``"decord"`` or ``"opencv"`` for files.
        realtime: pace files to the wall clock instead of reading as fast as possible.
        reopen_attempts: reopen tries for a live source that stopped, before giving up.
        reopen_backoff_s: first wait between reopen tries; doubled each time up to ``reopen_backoff_max_s``.
        reopen_backoff_max_s: longest wait between two reopen tries.
        stall_timeout_s: a live source that delivers no frame for this long is reopened.
        open_timeout_s: longest a network stream may take to open (OpenCV's own limit is 30 s).
    """

    fps: float = 30.0
    width: int = 0
    height: int = 0
    reader: str = "auto"
    realtime: bool = False
    reopen_attempts: int = 5
    reopen_backoff_s: float = 0.25
    reopen_backoff_max_s: float = 4.0
    stall_timeout_s: float = 2.0
    open_timeout_s: float = STREAM_OPEN_TIMEOUT_S

    def __post_init__(self) -> None:
        if not (self.fps > 0 and self.fps <= 1000):
            raise InputError(f"ReaderConfig.fps = {self.fps} must be in (0, 1000]")
        if self.width < 0 or self.height < 0 or (self.width == 0) != (self.height == 0):
            raise InputError(f"ReaderConfig.width/height = {self.width}x{self.height}: give both (> 0) or neither")
        if self.reader not in READER_NAMES:
            raise InputError(f"ReaderConfig.reader = {as_written(self.reader)} is not one of {', '.join(READER_NAMES)}")
        if self.reopen_attempts < 0:
            raise InputError(f"ReaderConfig.reopen_attempts = {self.reopen_attempts} must be >= 0")
        if not (self.reopen_backoff_s > 0 and self.reopen_backoff_max_s >= self.reopen_backoff_s):
            raise InputError(
                f"ReaderConfig.reopen_backoff_s = {self.reopen_backoff_s} must be > 0 and <= reopen_backoff_max_s"
            )
        if not self.stall_timeout_s > 0:
            raise InputError(f"ReaderConfig.stall_timeout_s = {self.stall_timeout_s} must be > 0")
        if not self.open_timeout_s > 0:
            raise InputError(f"ReaderConfig.open_timeout_s = {self.open_timeout_s} must be > 0")


@dataclass(frozen=True)
class Frame:
    """One delivered frame.

    Attributes:
        image: ``(H, W, 3)`` uint8, RGB.
        index: output frame number (0, 1, ...).
        time: seconds since the start of the stream (video time for files, wall time for live sources).
        arrived: when the frame arrived, on the reader's clock (``time.monotonic`` unless a test gives another): a
            live source's grab; a paced file frame's due time, or the start of its decoding when read as fast as
            possible. 0: unknown.
    """

    image: np.ndarray
    index: int
    time: float
    arrived: float = 0.0


@dataclass(frozen=True)
class Source:
    """A parsed ``--video`` value: ``kind`` is ``"camera"``, ``"stream"`` or ``"file"``."""

    kind: str
    target: str | int
    spec: str


def parse_source(spec: str) -> Source:
    """Classify a ``--video`` value.

    Args:
        spec: ``cam0``, ``0``, ``/dev/video0``, a URL or a file path.

    Returns:
        The parsed source.
    """
    if m := re.fullmatch(r"(?:cam)?(\d+)", spec):
        return Source("camera", int(m.group(1)), spec)
    if re.fullmatch(r"/dev/video\d+", spec):
        return Source("camera", spec, spec)
    if "://" in spec:
        return Source("stream", spec, spec)
    return Source("file", spec, spec)


def source_identity(spec: str) -> tuple[str, object]:
    """What a ``--video`` value names, so that two spellings of one source compare equal.

    Args:
        spec: ``cam0``, ``0`` and ``/dev/video0`` (one camera), a URL, or a file (any path to it).

    Returns:
        ``("camera", index or device path)``, ``("stream", url)`` or ``("file", absolute path)``.
    """
    source = parse_source(spec)
    if source.kind == "camera" and isinstance(source.target, str):
        number = re.fullmatch(r"/dev/video(\d+)", source.target)
        return ("camera", int(number.group(1))) if number else ("camera", source.target)
    if source.kind == "file":
        return "file", str(Path(spec).resolve())
    return source.kind, source.target


def check_source_rate(spec: str, reported: float, derived: Callable[[], float] | None = None) -> float:
    """The frame rate a file is sampled with: its container's field, or the rate of its frames' timestamps when
    the field is broken (0, NaN, absurd); refused when neither is a frame rate.

    Args:
        spec: the ``--video`` value, named in the error.
        reported: the container's frame-rate field.
        derived: computes the rate from the frames' timestamps (None: the reader has none to offer).

    Returns:
        Frames per second in `MIN_SOURCE_FPS`..`MAX_SOURCE_FPS`.

    Raises:
        InputError: the field is broken and the timestamps do not give a rate either.
    """
    def sane(rate: float) -> bool:
        return math.isfinite(rate) and MIN_SOURCE_FPS <= rate <= MAX_SOURCE_FPS

    if sane(reported):
        return reported
    if derived is not None:
        try:
            rate = derived()
        except Exception:  # a decoder error: no timestamps to go by
            rate = math.nan
        if sane(rate):
            return rate
    raise InputError(f"--video {spec}: its frame-rate field says {reported:g} frames per second, not a rate a video "
                     f"has ({MIN_SOURCE_FPS:g}..{MAX_SOURCE_FPS:g}), and its frames' timestamps do not give one; "
                     "re-encode it (ffmpeg -i IN -r 30 OUT.mp4)")


def check_sampled(spec: str, n_source: int, source_fps: float, fps: float) -> None:
    """Refuse a file that yields no frame at ``fps`` (shorter than one sampling period) or too many to sample.

    Args:
        spec: the ``--video`` value, named in the error.
        n_source: frames in the file.
        source_fps: its frame rate.
        fps: the rate it is sampled at.

    Raises:
        InputError: naming the file, its length and the rate.
    """
    duration = n_source / source_fps
    if duration * fps > MAX_SAMPLES:
        raise InputError(f"--video {spec}: announces {n_source} frames ({duration / 3600:.0f} h at {source_fps:g} "
                         f"fps), more than the {MAX_SAMPLES} frames a file may yield at {fps:g} fps "
                         "(a damaged header?)")
    if math.floor(duration * fps + 1e-9) < 1:
        frames = f"{n_source} frame{'s' if n_source != 1 else ''}"
        raise InputError(f"--video {spec}: {frames} ({duration:.3g} s) is shorter than one frame at {fps:g} frames "
                         "per second: nothing to detect")


IMAGE_SIGNATURES: Final = ((b"\x89PNG\r\n\x1a\n", "a PNG image"), (b"\xff\xd8\xff", "a JPEG image"),
                           (b"GIF87a", "a GIF image"), (b"GIF89a", "a GIF image"),
                           (b"II*\x00", "a TIFF image"), (b"MM\x00*", "a TIFF image"))


def check_not_an_image(spec: str) -> None:
    """Refuse a still image given as a video, whatever its name says: FFmpeg opens a PNG named ``.mp4`` as a video
    of one frame, which eval then scored against 20 s of annotations.

    Args:
        spec: the video file (named in the error as ``--video SPEC``).

    Raises:
        InputError: the file starts with the signature of a still-image format.
    """
    with open(spec, "rb") as handle:
        head = handle.read(12)
    kind = next((name for magic, name in IMAGE_SIGNATURES if head.startswith(magic)), None)
    if kind is None and head[:4] == b"RIFF" and head[8:12] == b"WEBP":
        kind = "a WebP image"
    if kind is None and head[:2] == b"BM" and head[6:10] == bytes(4):  # BMP: "BM", size, 4 reserved zero bytes
        kind = "a BMP image"
    if kind is not None:
        raise InputError(f"--video {spec}: is {kind}, not a video (whatever its name says)")


def container_header(spec: str) -> tuple[float, float]:
    """The frame count and frame rate a file's container announces, read through OpenCV's demuxer (which opens the
    container without decoding). decord counts the frames it finds instead, so only the header still knows how long
    a file cut short was meant to be.

    Args:
        spec: the video file.

    Returns:
        ``(frames, frames per second)`` as the header says (OpenCV's estimate where it does not say); 0, 0 when
        OpenCV cannot open the file. Either may be NaN or absurd in a damaged header.
    """
    capture = cv2.VideoCapture(spec)
    try:
        if not capture.isOpened():
            return 0.0, 0.0
        return float(capture.get(cv2.CAP_PROP_FRAME_COUNT)), float(capture.get(cv2.CAP_PROP_FPS))
    finally:
        capture.release()


EBML_MAGIC: Final = b"\x1a\x45\xdf\xa3"  # the first bytes of a Matroska or WebM file


def length_is_estimate(path: str | Path) -> bool:
    """Whether a file's container gives no frame count, only a duration: Matroska and WebM (OBS, many cameras).

    That duration covers every track, so a complete file whose audio runs on past its video looks cut short by it.
    """
    try:
        with open(path, "rb") as f:
            return f.read(4) == EBML_MAGIC
    except OSError:
        return False


def early_end(spec: str, decoded: int, announced: int, rate: float, estimate: bool = False,
              ended_at: float | None = None) -> tuple[str, str]:
    """What to say of a file whose frames ran out: an error when they ran out well before its container's count.

    The count may be an estimate (duration times rate), so an end within `EARLY_END_S` of it is the file's end. Where
    the container stores no count at all (``estimate``: Matroska, WebM) the end is judged by time, its last frame's
    against the duration (a variable frame rate makes a count from the average rate wrong), and an earlier end is no
    proof of damage: it is a warning, and the stream ends there.

    Args:
        spec: the ``--video`` value, named in the lines.
        decoded: source frames the reader found.
        announced: frames the container announces (0: it does not say).
        rate: its frame rate, to turn `EARLY_END_S` into frames.
        estimate: the count is the container's duration times the rate, not a count it stores.
        ended_at: when the last frame found ends, seconds (None: not known; taken as ``decoded / rate``).

    Returns:
        ``(the reader's error line, a warning line)``, each "" when there is nothing to say.
    """
    if not estimate:
        if announced > 0 and decoded < announced - EARLY_END_S * rate:
            return (f"--video {spec}: cannot decode source frame {decoded} of {announced}, the file is damaged or "
                    "truncated"), ""
        return "", ""
    end = ended_at if ended_at is not None and math.isfinite(ended_at) and ended_at > 0 else decoded / rate
    duration = announced / rate if rate > 0 else 0.0
    if duration > 0 and end < duration - EARLY_END_S:
        return "", (f"--video {spec}: its video ends at {end:.1f} s, before the {duration:.1f} s its container gives "
                    "(a file cut short, or an audio track longer than the video); the stream ends there")
    return "", ""


def usable_header(count: float, rate: float) -> tuple[int, float]:
    """A container's frame count and rate (`container_header`) as a file's end is judged by (`early_end`); ``(0, 0)``
    when its header does not say (NaN, absurd or missing)."""
    if not (math.isfinite(count) and 0 < count < 2**53 and math.isfinite(rate) and rate > 0):
        return 0, 0.0
    return int(count), rate


def check_announced_frames(spec: str) -> tuple[float, float]:
    """Refuse a file whose header announces more frames than it has bytes, before decord opens it.

    decord sizes its frame index from the header: a 6 kB AVI claiming 2^32 frames made it abort the whole process
    (``std::bad_alloc``, SIGABRT, no line). No codec stores a frame in less than a byte, so the claim is checked
    against the file's size, read through OpenCV's demuxer (which opens the container without decoding).

    Args:
        spec: the video file (named in the error as ``--video SPEC``).

    Returns:
        The header as read (`container_header`), for the reader to judge the file's end by without opening it again.

    Raises:
        InputError: the announced frame count exceeds the file's size in bytes.
    """
    size = os.stat(spec).st_size
    announced, rate = container_header(spec)
    if math.isfinite(announced) and announced > size:
        raise InputError(f"--video {spec}: its header announces {announced:.0f} frames, more than a file of {size} "
                         "bytes can hold (a damaged or forged header); not decoded")
    return announced, rate


def sample_indices(n_source: int, source_fps: float, fps: float) -> np.ndarray:
    """Source frame indices that sample a file at ``fps``.

    Output frame ``k`` is at ``k / fps`` seconds; it takes the source frame on screen at that time
    (source frame ``j`` covers ``[j / source_fps, (j + 1) / source_fps)``).

    Args:
        n_source: frames in the file.
        source_fps: the file's frame rate.
        fps: wanted rate.

    Returns:
        int64 ``(K,)`` indices into the file, non-decreasing, all ``< n_source``.
    """
    duration = n_source / source_fps
    k = np.arange(int(np.floor(duration * fps + 1e-9)), dtype=np.float64)
    idx = np.floor(k * source_fps / fps + 1e-6).astype(np.int64)
    return idx[idx < n_source]


def frames_read_again(spec: str, source_fps: float | None, fps: float) -> str | None:
    """The warning on a file whose own frame rate is below the detector's: `sample_indices` then hands some of its
    frames over more than once, and the detector, which learned its steps from frames ``1 / fps`` apart, sees the same
    one again (``recognition-features`` says the same of a folder it extracts; the live run said nothing).

    Args:
        spec: the ``--video`` value.
        source_fps: the file's own rate (None: a live source, which is read as it comes).
        fps: the detector's rate.

    Returns:
        One line without its ``warning:``; None when the file's rate reaches ``fps`` (or is unknown).
    """
    if source_fps is None or source_fps >= fps * (1 - 1e-6):  # a 29.97 fps file at 29.97 is not "below"
        return None
    return (f"--video {spec}: {source_fps:g} frames a second, below the detector's {fps:g}: each frame is read up to "
            f"{math.ceil(fps / source_fps - 1e-6)} times over (the detector learned from frames 1/{fps:g} s apart); a "
            f"detector trained at {source_fps:g} fps or less reads each frame once")


# What a decoder, an allocator or a system call says when the memory ran out (OpenCV's cv::Exception, a GPU's or the
# CPU allocator's RuntimeError, MPS's): the host's fault, never the video's, and no bug of the project.
# The last, "builtins.MemoryError: ...", is how a MemoryError raised inside a TorchScript module comes out of it (a
# torch.jit.Error, whose own words may say nothing of memory).
_NO_MEMORY: Final = ("out of memory", "insufficient memory", "failed to allocate", "cannot allocate memory",
                     "can't allocate memory", "not enough memory", "builtins.memoryerror")


def out_of_memory(err: BaseException) -> bool:
    """Whether ``err`` says the memory ran out: a ``MemoryError``, an ``OSError`` of ENOMEM, or a message that says so
    (`_NO_MEMORY`; an ``OSError``'s text may hold a file's name, whatever words that has: its errno says)."""
    if isinstance(err, OSError):
        return err.errno == errno.ENOMEM
    return isinstance(err, MemoryError) or any(words in str(err).lower() for words in _NO_MEMORY)


def source_fault(err: BaseException, decoder: bool = False) -> bool:
    """Whether ``err``, raised while a reader read or converted a frame, is the source's own fault (a damaged or
    truncated file, a file or a stream gone): said as an error naming it (``--video X: ...``, exit status 2). Anything
    else, the memory run out or an exception type no decoder raises (a bug of the project), is a failure of the run
    that read it, not a mistake in its input.

    Args:
        err: what the reader raised.
        decoder: raised by a decoder's own call (decord's, which raises plain RuntimeErrors too); elsewhere a
            RuntimeError is nobody's but ours.
    """
    if isinstance(err, InputError):
        return True
    if out_of_memory(err):
        return False
    if isinstance(err, OSError):
        return True
    decords = type(err).__module__.startswith("decord")  # its DECORDError, without importing decord to name it
    return isinstance(err, cv2.error) or decords or (decoder and isinstance(err, RuntimeError))


class VideoReader(abc.ABC):
    """The reader interface: iterate frames until the source ends.

    Attributes:
        frames: frames delivered so far.
        dropped: frames the source produced that were never delivered (live sources only).
        missed: the consumer's frame slots (one every 1/fps s from its first read) that got no frame: it fell behind,
            or the source stalled (live sources only; a file waits for its consumer).
        error: why the source ended early, naming it (empty while it is fine and when it ended normally);
            set when `read` has returned None.
        duration: seconds of video a file's container announces (None for live sources, or when unknown).
        source_fps: a file's own frame rate, the one it is sampled from (None for live sources): above it, ``fps``
            delivers some frames more than once.
        warn: told of what the reader warns about as it reads (a Matroska file's early end, a camera's reopens),
            called on the thread that reads; default: a ``warning:`` line on stderr. A service sets its own log:
            a line written straight to a stderr that takes nothing (a full pipe) held the reading thread, and with
            it the stream's end.
    """

    name: str = ""

    def __init__(self, source: Source, config: ReaderConfig) -> None:
        self.source = source
        self.config = config
        self.frames = 0
        self.dropped = 0
        self.missed = 0
        self.error = ""
        self.duration: float | None = None
        self.source_fps: float | None = None
        self.warn: Callable[[str], None] = print_warning

    @abc.abstractmethod
    def read(self) -> Frame | None:
        """The next frame, or None when the source has ended."""

    def close(self) -> None:  # noqa: B027 - optional hook; most readers hold nothing to release
        """Release the source."""

    def interrupt(self) -> None:  # noqa: B027 - optional hook; a file's read returns within a frame period anyway
        """Make a `read` blocked in another thread return None soon (a reader thread being stopped); thread-safe.

        Unlike `close`, it releases nothing: the thread that reads closes the reader once its `read` has returned.
        """

    def __iter__(self) -> Iterator[Frame]:
        while (frame := self.read()) is not None:
            yield frame

    def __enter__(self) -> VideoReader:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _resize(self, rgb: np.ndarray) -> np.ndarray:
        if self.config.width and (rgb.shape[1], rgb.shape[0]) != (self.config.width, self.config.height):
            return cv2.resize(rgb, (self.config.width, self.config.height), interpolation=cv2.INTER_AREA)
        return rgb


class _FileReader(VideoReader):
    """Shared pacing for file readers: frame ``k`` is delivered at ``t0 + k / fps`` when realtime; and the judgement
    of where a file's frames ran out (`early_end`)."""

    def __init__(self, source: Source, config: ReaderConfig, clock: Callable[[], float]) -> None:
        super().__init__(source, config)
        self.clock = clock
        self._t0: float | None = None

    def _end_error(self, decoded: int, announced: int, rate: float) -> str:
        """The error line to end with when the file's ``decoded`` frames ran out (`early_end`); a warning, where the
        container gives only a duration, goes to `warn`."""
        estimate = length_is_estimate(str(self.source.target))
        error, warning = early_end(self.source.spec, decoded, announced, rate, estimate,
                                   self._last_frame_end() if estimate else None)
        if warning:
            self.warn(warning)
        return error

    def _last_frame_end(self) -> float | None:
        """When the last frame found ends, seconds; None where the reader cannot say."""
        return None

    def _pace(self, k: int, started: float) -> float:
        """Wait until frame ``k`` is due (realtime only); returns when it arrived (`Frame.arrived`).

        Args:
            k: the output frame number.
            started: when its `read` began (the clock's seconds).
        """
        if not self.config.realtime:
            return started
        if self._t0 is None:
            self._t0 = started
        due = self._t0 + k / self.config.fps
        wait = due - self.clock()
        if wait > 0:
            time.sleep(wait)
        return max(due, started)


class DecordReader(_FileReader):
    """Video files through decord, decoding `DECODE_BATCH` sampled frames per call.

    The first batch is decoded when the reader opens, so a file decord opens but cannot decode (damage
    at its start, frames of a few pixels) is refused there and ``reader="auto"`` falls back to OpenCV.
    """

    name = "decord"

    def __init__(self, source: Source, config: ReaderConfig, clock: Callable[[], float] = time.monotonic,
                 header: tuple[float, float] | None = None) -> None:
        """``header``: the container's frame count and rate if already read (`check_announced_frames`)."""
        super().__init__(source, config, clock)
        path = str(source.target)
        try:
            import decord
        except ImportError:  # no wheel on some platforms: "auto" then falls back to OpenCV
            raise InputError(f"--video {path}: the decord reader is not installed (pip install decord)") from None
        if not Path(path).is_file():
            raise InputError(f"--video {path}: file not found")
        size = {"width": config.width, "height": config.height} if config.width else {}
        try:
            with _native_stderr_silenced():  # the exception says why; decord's own log line would be a second one
                self._vr = decord.VideoReader(path, ctx=decord.cpu(0), num_threads=1, **size)
            n, reported = len(self._vr), float(self._vr.get_avg_fps())
        except Exception as err:  # decord raises its own DECORDError or RuntimeError on unknown formats
            raise InputError(f"--video {path}: decord cannot open it ({_native_message(err)})") from None
        if n == 0:
            raise InputError(f"--video {path}: no frames")
        native = check_source_rate(source.spec, reported, lambda: self._timestamp_rate(n))
        check_sampled(source.spec, n, native, config.fps)
        self._indices = sample_indices(n, native, config.fps)
        self.duration = n / native
        self.source_fps = native
        self._found, self._header, self._end_checked = n, self._header_count(header), False
        self._buffer = np.zeros((0, 0, 0, 3), dtype=np.uint8)
        if len(self._indices):
            try:
                self._buffer = self._decode(0)
            except Exception as err:  # decord's DECORDError
                raise InputError(f"--video {path}: decord cannot decode it ({_native_message(err)})") from None

    def _timestamp_rate(self, n: int) -> float:
        """Frames per second from the first and last frames' presentation times (the container's rate is broken)."""
        if n < 2:
            return math.nan
        starts = self._vr.get_frame_timestamp([0, n - 1])[:, 0]  # (2,) seconds
        return (n - 1) / float(starts[1] - starts[0]) if starts[1] > starts[0] else math.nan

    def _header_count(self, header: tuple[float, float] | None) -> tuple[int, float]:
        """The frame count and rate the container announces (``header``, or read now), ``(0, 0)`` when its header
        does not say.

        decord counts the frames it finds, so a file cut short (a copy or a recording that stopped) looks complete
        to it; only the header still says how long the file was written. OpenCV's reader finds out at the cut.
        """
        return usable_header(*(header if header is not None else container_header(str(self.source.target))))

    def _ran_out(self) -> None:
        """The sampled frames ran out: fine near the container's frame count, a damaged file well before it."""
        if self._end_checked:
            return
        self._end_checked = True
        self.error = self.error or self._end_error(self._found, *self._header)

    def _last_frame_end(self) -> float | None:
        try:
            return float(self._vr.get_frame_timestamp([self._found - 1])[0, 1])
        except Exception:  # decord's DECORDError: no timestamps; the count stands in
            return None

    def _decode(self, k: int) -> np.ndarray:
        """The `DECODE_BATCH` sampled frames from output frame ``k`` on: ``(B, H, W, 3)`` RGB."""
        return self._vr.get_batch(self._indices[k : k + DECODE_BATCH].tolist()).asnumpy()

    def read(self) -> Frame | None:
        started = self.clock()
        k = self.frames
        if k >= len(self._indices):
            self._ran_out()
            return None
        offset = k % DECODE_BATCH
        if offset == 0 and k > 0:
            try:
                self._buffer = self._decode(k)
            except Exception as err:  # decord's DECORDError on a damaged frame
                if not source_fault(err, decoder=True):  # memory run out, a bug: no damage of the file's
                    raise
                chunk = self._indices[k : k + DECODE_BATCH]
                self.error = (
                    f"--video {self.source.spec}: cannot decode source frames {chunk[0]}-{chunk[-1]} "
                    f"of {len(self._vr)}, the file is damaged ({_native_message(err)})"
                )
                self._indices = self._indices[:k]  # ended: later calls return None too
                return None
        arrived = self._pace(k, started)
        self.frames += 1
        return Frame(self._buffer[offset], k, k / self.config.fps, arrived)

    def close(self) -> None:
        self._vr = None


class OpenCVFileReader(_FileReader):
    """Video files through OpenCV; skipped frames are only grabbed (demuxed), never converted."""

    name = "opencv"

    def __init__(self, source: Source, config: ReaderConfig, clock: Callable[[], float] = time.monotonic) -> None:
        super().__init__(source, config, clock)
        path = str(source.target)
        if not Path(path).is_file():
            raise InputError(f"--video {path}: file not found")
        self._cap = cv2.VideoCapture(path)
        if not self._cap.isOpened():
            raise InputError(f"--video {path}: OpenCV cannot open it (not a video, or an unsupported format)")
        count = float(self._cap.get(cv2.CAP_PROP_FRAME_COUNT))
        n = int(count) if math.isfinite(count) and 0 < count < 2**53 else 0  # 0: the container does not say
        native = check_source_rate(source.spec, float(self._cap.get(cv2.CAP_PROP_FPS)))
        if n > 0:
            check_sampled(source.spec, n, native, config.fps)
        # The container's frame count may be approximate; sample generously and stop at the real end.
        self._indices = sample_indices(n if n > 0 else int(native * 36_000), native, config.fps)
        self._src_pos = -1
        self._announced = n
        self._native = native
        self.source_fps = native
        self.duration = n / native if n > 0 else None

    def read(self) -> Frame | None:
        started = self.clock()
        k = self.frames
        if k >= len(self._indices):
            return None
        target = int(self._indices[k])
        while self._src_pos < target:
            if not self._cap.grab():
                self._ended()
                return None
            self._src_pos += 1
        ok, bgr = self._cap.retrieve()
        if not ok:
            self._ended()
            return None
        arrived = self._pace(k, started)
        self.frames += 1
        return Frame(self._resize(cv2.cvtColor(bgr, cv2.COLOR_BGR2RGB)), k, k / self.config.fps, arrived)

    def close(self) -> None:
        self._cap.release()

    def _last_frame_end(self) -> float | None:
        # Where the last frame decoded starts (0 when the backend does not say), and one frame on: where it ends.
        position = float(self._cap.get(cv2.CAP_PROP_POS_MSEC)) / 1000
        return position + 1 / self._native if position > 0 else None

    def _ended(self) -> None:
        """The frames ran out: fine near the container's frame count, a damaged file well before it."""
        self._indices = self._indices[: self.frames]  # ended: later calls return None too
        decoded = self._src_pos + 1
        self.error = self._end_error(decoded, self._announced, self._native)
        if not self.error and self.frames == 0:  # a container that did not say its length, held less than a sample
            self.error = (f"--video {self.source.spec}: {decoded} frames, shorter than one frame at "
                          f"{self.config.fps:g} frames per second: nothing to detect")


def open_live_capture(target: str | int, config: ReaderConfig) -> cv2.VideoCapture:
    """Open a camera, or a network stream with bounded waits (FFmpeg backend).

    Args:
        target: camera index or path, or a stream URL.
        config: ``open_timeout_s`` bounds the open of a stream, ``stall_timeout_s`` each of its reads.

    Returns:
        The capture (check ``isOpened()``).
    """
    if isinstance(target, str) and "://" in target and cv2.videoio_registry.hasBackend(cv2.CAP_FFMPEG):
        params = [
            cv2.CAP_PROP_OPEN_TIMEOUT_MSEC, int(config.open_timeout_s * 1000),
            cv2.CAP_PROP_READ_TIMEOUT_MSEC, int(config.stall_timeout_s * 1000),
        ]  # fmt: skip
        return cv2.VideoCapture(target, cv2.CAP_FFMPEG, params)
    return cv2.VideoCapture(target)


def camera_hint(target: str | int, dev: Path = Path("/dev")) -> str:
    """What a camera OpenCV would not open is on Linux, where camera ``N`` is the node ``/dev/videoN``, said as
    what to do: a bare "cannot open camera" left the user to guess between no camera, the wrong number, a node the
    user may not open and a camera another program holds. Empty elsewhere: other platforms have no node to look at.

    Args:
        target: the camera index or ``/dev/videoN`` path, as `parse_source` gives it.
        dev: the device folder (a parameter so that tests can name one).

    Returns:
        `` (...)`` to append to the error line, or ``""``.
    """
    if not sys.platform.startswith("linux") or not dev.is_dir():
        return ""
    node = dev / f"video{target}" if isinstance(target, int) else Path(target)
    if not node.exists():
        try:
            present = sorted((p for p in dev.glob("video*") if p.name[5:].isdigit()), key=lambda p: int(p.name[5:]))
        except OSError:
            present = []
        if not present:
            return f" (no {node}: this machine shows no camera; is one plugged in, and does the kernel see it?)"
        first = present[0].name[5:]
        return (f" (no {node}; cameras here: {', '.join(str(p) for p in present[:8])}"
                f"{' ...' if len(present) > 8 else ''}: --video cam{first} is the first)")
    if not os.access(node, os.R_OK | os.W_OK):
        import grp  # Unix only: here on Linux alone

        try:
            group = f"group '{grp.getgrgid(node.stat().st_gid).gr_name}'"
        except (KeyError, OSError):
            group = "group that owns it"
        return f" ({node}: permission denied; add the user to the {group} and log in again)"
    return (f" ({node} is there but did not open: another program may be using it, or it is a node without an "
            f"image, as a camera's second node is: try the next /dev/videoN)")


# Live readers not yet closed: the interpreter's exit stops their grab threads first (`_stop_grab_threads`). A lock,
# since a reader may be opened or closed on another thread while the exit handler lists them.
_OPEN_LIVE_READERS: Final[weakref.WeakSet[LiveReader]] = weakref.WeakSet()
_OPEN_LIVE_LOCK: Final = threading.Lock()
EXIT_WAIT_MAX_S: Final = 60.0  # the longest the exit waits for grab threads (a stall timeout may be infinite)


@atexit.register
def _stop_grab_threads() -> None:
    """At exit, stop the grab thread of every live reader never closed and wait for it, at most as long as its
    longest blocking call: a network stream's open (``open_timeout_s``, at least `STREAM_OPEN_TIMEOUT_S` is waited) or
    read (``stall_timeout_s``), both bounded by the FFmpeg options `open_live_capture` sets; a camera's read returns
    with its next frame, or after V4L2's own 10 s timeout. Never longer than `EXIT_WAIT_MAX_S`.

    The grab thread is a daemon (a read can block that long, and a forgotten reader must not keep the process alive),
    but a daemon thread that comes back from OpenCV while the interpreter finalises is ended by ``pthread_exit``, whose
    unwinding through OpenCV's C++ frames aborts the process ("terminate called without an active exception", exit
    134). A camera's grab thread is always in OpenCV, so a reader left open aborted every exit. Exit handlers run
    before the finalisation that ends daemon threads.
    """
    with _OPEN_LIVE_LOCK:
        readers = list(_OPEN_LIVE_READERS)
    for reader in readers:
        reader.interrupt()
    longest = max([STREAM_OPEN_TIMEOUT_S, *(max(r.config.open_timeout_s, r.config.stall_timeout_s) for r in readers)])
    deadline = time.monotonic() + min(longest + 1.0, EXIT_WAIT_MAX_S)
    for reader in readers:
        reader.join_grab_thread(max(0.0, deadline - time.monotonic()))


class LiveCapture(Protocol):
    """What `LiveReader` asks of a capture: the part of ``cv2.VideoCapture`` it calls, so that a test or a benchmark
    can hand in its own camera."""

    def isOpened(self) -> bool:  # noqa: N802 - the cv2.VideoCapture interface
        """Whether the source is open."""

    def grab(self) -> bool:
        """Take the next frame off the source, without converting it."""

    def retrieve(self) -> tuple[bool, np.ndarray]:
        """Convert the frame last grabbed (BGR)."""

    def release(self) -> None:
        """Close the source."""


class _NotOpened:
    """The capture of a live reader whose grab thread has not opened its source yet (`LiveCapture`)."""

    def isOpened(self) -> bool:  # noqa: N802 - the cv2.VideoCapture interface
        """Never open."""
        return False

    def grab(self) -> bool:
        """No frame."""
        return False

    def retrieve(self) -> tuple[bool, np.ndarray]:
        """No frame."""
        return False, np.zeros((0, 0, 3), np.uint8)

    def release(self) -> None:
        """Nothing to release."""


_NOT_OPENED: Final = _NotOpened()


class LiveReader(VideoReader):
    """Cameras and network streams through OpenCV: a grab thread takes every frame off the source and converts to
    colour only the one a waiting consumer will take (at 5 fps from a 30 fps camera, one in six).

    The grab thread owns the capture (it grabs, retrieves, reopens and finally releases it), so `close` never releases
    a capture in the middle of a read.

    Attributes:
        grabbed: frames taken off the source (every frame the camera sent while the reader ran).
        retrieved: frames converted to colour: one per delivered frame, at most one more (a consumer that gave up).

    Args:
        source: a ``camera`` or ``stream`` source.
        config: rate, size and reopen policy.
        open_capture: opens the source (a constructor argument so tests can hand in any capture;
            default: `open_live_capture` with ``config``).
        clock: monotonic clock.
        warn: told of reopens (rate-limited: `REOPEN_WARN_EVERY_S`); default: a ``warning:`` line on stderr.
        retry_first_open: open the source on the grab thread, the constructor returning at once, and retry a first
            open that fails as a lost source is retried (with a warning), the error set once the tries are spent;
            False: open it here and refuse it (`InputError`) if it does not open.

    Raises:
        InputError: the source does not open (without ``retry_first_open``), or names no camera there can be.
    """

    name = "opencv-live"

    def __init__(
        self,
        source: Source,
        config: ReaderConfig,
        open_capture: Callable[[str | int], LiveCapture] | None = None,
        clock: Callable[[], float] = time.monotonic,
        warn: Callable[[str], None] = print_warning,
        retry_first_open: bool = False,
    ) -> None:
        super().__init__(source, config)
        self._open = open_capture or (lambda target: open_live_capture(target, config))
        self.clock = clock
        self.warn = warn
        self.reopens = 0  # reopen tries in all
        # Since the last frame grabbed (the grab thread's own): the reopen tries, and the opens that succeeded (the
        # first open counts while no frame came). The tries are spent by a source that opens and gives nothing too.
        self._tries = 0
        self._opened = 1
        self._warned_at = -math.inf  # when a reopen was last said (`_warn_reopen`)
        self._unsaid = 0  # reopens since then not said
        self._unopened = ""  # why the first open failed, while no later one has succeeded
        self._cap: LiveCapture = _NOT_OPENED
        # A number that can name no camera is a typo, refused now in the same words however the source opens (the
        # open waits on the grab thread with ``retry_first_open``; without it OpenCV's own words were "Bad argument").
        if isinstance(source.target, int) and source.target > CAMERA_NUMBER_MAX:
            raise InputError(f"--video {source.spec}: cannot open camera (camera numbers stop at {CAMERA_NUMBER_MAX})")
        if retry_first_open:
            self._opened = 0
        else:
            cap, why = self._first_open()
            if cap is None:
                raise InputError(f"--video {source.spec}: {why}")
            self._cap = cap
        self.grabbed = 0
        self.retrieved = 0
        self._lock = threading.Condition()
        self._latest: np.ndarray | None = None
        self._latest_id = 0  # the newest retrieved frame's number among the grabbed ones
        self._latest_at = 0.0  # when it arrived (clock seconds)
        self._taken_id = 0
        # The consumer's next frame is the first one arriving from then on (the next slot's start; at first any frame).
        self._want_after = -math.inf
        self._stop = threading.Event()
        self._ended = False
        self._failure: Exception | None = None  # what ended the grab thread that is no fault of the source
        self._t0 = self.clock()
        self._next_due = self._t0
        self._first_read: float | None = None  # when the consumer first asked for a frame (slots count from there)
        self._thread = threading.Thread(target=self._grab_loop, name=f"grab-{source.spec}", daemon=True)
        self._thread.start()
        with _OPEN_LIVE_LOCK:
            _OPEN_LIVE_READERS.add(self)

    def _first_open(self) -> tuple[LiveCapture | None, str]:
        """Open the source: ``(capture, "")``, or ``(None, why)`` when it does not open (``cannot open camera
        (...)``, with what to look at)."""
        what = "camera" if self.source.kind == "camera" else "stream"
        try:
            cap = self._open(self.source.target)
        except cv2.error as err:  # e.g. a camera index beyond a C long
            return None, f"cannot open {what} ({_native_message(err)})"
        if not cap.isOpened():
            cap.release()
            why = f" (refused, not a video, or no answer within {self.config.open_timeout_s:g} s)" \
                if what == "stream" else camera_hint(self.source.target)
            return None, f"cannot open {what}{why}"
        return cap, ""

    def _open_on_grab_thread(self) -> bool:
        """The first open of a reader told to retry it: False when the stream ends (the tries spent, or stopped)."""
        cap, why = self._first_open()
        if cap is not None:
            self._cap, self._opened = cap, 1  # counted as the constructor's open is: a source that gives no frame
            return True
        if self._stop.is_set():  # stopped while it opened (Ctrl-C): no retry, and no line after the run's last one
            return False
        self._unopened = why
        return self._reopen(why, "trying again")

    def _grab_loop(self) -> None:
        try:
            if self._cap is _NOT_OPENED and not self._open_on_grab_thread():
                return
            last_frame = self.clock()
            while not self._stop.is_set():
                if self._cap.grab():
                    last_frame = self.clock()
                    self._tries = self._opened = 0  # the source works: a later stall gets the whole reopen budget
                    with self._lock:
                        self.grabbed += 1
                        number = self.grabbed
                        wanted = last_frame >= self._want_after and (
                            self._latest_id == self._taken_id or self._latest_at < self._want_after)
                    if not wanted:  # the consumer's next frame is retrieved already or still to come: not converted
                        continue
                    ok, bgr = self._cap.retrieve()
                    if ok and bgr is not None:
                        with self._lock:
                            self.retrieved += 1
                            self._latest = bgr
                            self._latest_id = number
                            self._latest_at = last_frame
                            self._lock.notify_all()
                        continue
                if self.clock() - last_frame < self.config.stall_timeout_s and self._cap.isOpened():
                    time.sleep(0.01)
                    continue
                if not self._reopen():
                    return
                last_frame = self.clock()
        except Exception as err:  # cv2.error from a backend: end the stream, never leave read() waiting
            if source_fault(err):
                self.error = f"--video {self.source.spec}: {(str(err).strip().splitlines() or [repr(err)])[-1][:160]}"
            else:  # memory run out, a bug: `read` raises it, for the run to say as its own failure, not the source's
                self._failure = err
        finally:
            self._cap.release()
            with self._lock:
                self._ended = True
                self._lock.notify_all()

    def _reopen(self, why: str = "", action: str = "reopening it") -> bool:
        """Reopen with bounded exponential backoff; False once `reopen_attempts` tries were made since the last frame.

        A try whose open succeeds but whose source then gives no frame is spent like one whose open fails: a source
        that opens and stalls is given up after as many tries, never reopened for ever.

        Args:
            why: why it is reopened, for the warning (default: a stall, or the source closed).
            action: what the warning says is done.
        """
        if not why:
            why = f"no frame for {self.config.stall_timeout_s:g} s" if self._cap.isOpened() else "the source closed"
        self._cap.release()
        while self._tries < self.config.reopen_attempts and not self._stop.is_set():
            self._warn_reopen(why, action)
            wait = min(self.config.reopen_backoff_s * 2**self._tries, self.config.reopen_backoff_max_s)
            if self._stop.wait(wait):
                return False
            self._tries += 1
            self.reopens += 1
            cap = self._open(self.source.target)
            if cap.isOpened():
                self._opened += 1
                self._cap = cap
                self._unopened = ""
                return True
            cap.release()
            why = "it did not open"
        if not self._stop.is_set():  # stopped: the stream ends as stopped, not lost
            self.error = self._lost_error()
        return False

    def _warn_reopen(self, why: str, action: str = "reopening it") -> None:
        """Say that the source is being reopened: the first time at once, then at most every `REOPEN_WARN_EVERY_S`
        (a flapping camera is seen, and does not flood the log)."""
        now = self.clock()
        if now - self._warned_at < REOPEN_WARN_EVERY_S:
            self._unsaid += 1
            return
        unsaid = f"; {count_of(self._unsaid, 'reopen')} since the last such line" if self._unsaid else ""
        self._warned_at, self._unsaid = now, 0
        self.warn(f"--video {self.source.spec}: {why}; {action} (try {self._tries + 1} of "
                  f"{self.config.reopen_attempts}{unsaid})")

    def _lost_error(self) -> str:
        """The error line of a source given up: lost (no open succeeded), or opened but giving no frame."""
        spec, tries = self.source.spec, self.config.reopen_attempts
        if self._unopened and self._opened == 0:  # never opened: said as its refusal would have been
            return f"--video {spec}: {self._unopened}, {tries} reopen attempts failed"
        if self._opened == 0:
            return f"--video {spec}: source lost, {tries} reopen attempts failed"
        before = f"gave {count_of(self.grabbed, 'frame')}, then " if self.grabbed else ""
        return (f"--video {spec}: {before}opened {count_of(self._opened, 'time')} but gave no frame ({tries} reopen "
                "attempts): it sends no image, or cannot be read as a stream (an mp4 served without Range support)")

    def read(self) -> Frame | None:
        # Deliver at most `fps` frames per second: on time, the first frame that arrives in the next slot (one that
        # arrived before has aged up to a source period); behind, the one retrieved for the slot if it is younger than
        # a slot, else the next frame that arrives. Only that frame is converted to colour.
        now = self.clock()
        if self._first_read is None:
            # The slots count from here, not from when the reader was opened: a frame loop starts its cameras' reads
            # spread over one slot (`streaming.detector.loop.stagger_s`), and slots counted from the opening would
            # line every camera's frames up again from the second one on.
            self._first_read = self._next_due = now
        with self._lock:
            stale = self._latest_id == self._taken_id or self._latest_at < now - 1 / self.config.fps
            if self._next_due <= now and stale:
                self._want_after = now
            while (
                (self._latest_id == self._taken_id or self._latest_at < self._want_after)
                and not self._ended
                and not self._stop.is_set()
            ):
                self._lock.wait(0.1)
            # Ended or stopped: an untaken older frame is still delivered, unless the source was given up after it
            # stalled. That frame came before the stall and its reopen attempts, seconds ago, and delivered now it
            # showed a stream its checker had marked lost live again, with a picture of before the loss.
            given_up = bool(self.error) and self.clock() - self._latest_at >= self.config.stall_timeout_s
            if self._latest_id == self._taken_id or (self._ended and given_up):
                self.dropped = self.grabbed - self.frames  # the frames grabbed since the last one taken, too
                if self._failure is not None:
                    raise self._failure
                return None
            self.dropped += self._latest_id - self._taken_id - 1
            self._taken_id = self._latest_id
            bgr, arrived = self._latest, self._latest_at
            self._next_due = max(self._next_due + 1.0 / self.config.fps, self.clock() - 1.0 / self.config.fps)
            self._want_after = self._next_due
        assert bgr is not None  # a frame was taken, so one was stored
        k = self.frames
        self.frames += 1
        slots = int((self.clock() - self._first_read) * self.config.fps) + 1  # slots begun since the first read
        self.missed = max(self.missed, slots - 1 - self.frames)  # the current slot may still be served
        return Frame(self._resize(cv2.cvtColor(bgr, cv2.COLOR_BGR2RGB)), k, self.clock() - self._t0, arrived)

    def interrupt(self) -> None:
        """Stop delivering: a `read` waiting for a frame returns None within its 0.1 s wait (the grab thread ends)."""
        self._stop.set()

    def close(self) -> None:
        """Stop the grab thread; it releases the capture once its current read or open returns (the exit waits for
        it if that takes longer than 2 s, `_stop_grab_threads`)."""
        self._stop.set()
        self.join_grab_thread(2.0)

    def join_grab_thread(self, timeout: float) -> None:
        """Wait up to ``timeout`` seconds for the grab thread to end (once stopped); forgotten by the exit handler once
        it has."""
        self._thread.join(timeout=timeout)
        if not self._thread.is_alive():
            with _OPEN_LIVE_LOCK:
                _OPEN_LIVE_READERS.discard(self)


def check_video_file(spec: str) -> None:
    """Refuse (one line naming ``--video``) a video file that is not there, not a file, or not readable: cheap, so
    a command says it before any model loads."""
    why = not_a_file(spec)
    if why == "not found":
        raise InputError(f"--video {spec}: file not found (and not a camera like cam0 or a stream URL)")
    if why is not None:  # a link loop or a link to nothing: no typo of a camera or URL, so no such hint
        raise InputError(f"--video {spec}: {why}, expected a video file")
    if not os.access(spec, os.R_OK):  # the decoders would only say "cannot open", as for a file of another kind
        raise InputError(f"--video {spec}: permission denied, cannot read the video file")


def open_reader(spec: str, config: ReaderConfig, warn: Callable[[str], None] = print_warning,
                retry_first_open: bool = False) -> VideoReader:
    """Open the reader a ``--video`` value asks for.

    Args:
        spec: camera, URL or file (see the module docstring).
        config: rate, size, reader name and reopen policy.
        warn: where the reader's warnings go (`VideoReader.warn`).
        retry_first_open: a camera or stream is opened on its reader's grab thread and, if it does not open, retried
            as a lost one is (`LiveReader`); a file is refused all the same.

    Returns:
        An open reader; `InputError` (one line naming the source) if it cannot be opened.
    """
    source = parse_source(spec)
    if source.kind != "file":
        return LiveReader(source, config, warn=warn, retry_first_open=retry_first_open)
    check_video_file(spec)
    check_not_an_image(spec)
    header = check_announced_frames(spec)
    reader: VideoReader
    if config.reader == "opencv":
        reader = OpenCVFileReader(source, config)
    else:
        try:
            reader = DecordReader(source, config, header=header)
        except InputError:
            if config.reader == "decord":
                raise
            reader = OpenCVFileReader(source, config)
    reader.warn = warn
    return reader


def named_error(message: str, spec: str, name: str) -> str:
    """A reader's error line, which names its source as ``--video SPEC``, naming it as ``name`` instead: a file that
    no ``--video`` named (found in a ``--videos`` folder) is named in the terms of the command that read it.

    Args:
        message: the reader's error (`InputError` text or ``VideoReader.error``).
        spec: the source as the reader was given it.
        name: how the command names the file.

    Returns:
        The message with its source renamed (unchanged if it does not start with the source).
    """
    prefix = f"--video {spec}"
    return name + message[len(prefix) :] if message.startswith(prefix) else message


def open_named(path: str | Path, config: ReaderConfig, name: str) -> VideoReader:
    """`open_reader` for a video file that no ``--video`` named: its errors name the file as ``name``.

    Args:
        path: the video file.
        config: rate, reader and pacing.
        name: how errors name the file (`named_error`).

    Returns:
        The open reader.
    """
    try:
        return open_reader(str(path), config)
    except InputError as err:
        raise InputError(named_error(str(err), str(path), name)) from None


def check_first_frame(path: str | Path, config: ReaderConfig, name: str) -> float | None:
    """Open a video file and decode its first frame, so that a damaged or unreadable file is refused before a long
    run reaches it (its other frames are decoded when the run does).

    Args:
        path: the video file.
        config: rate and reader, as the run will read it.
        name: how errors name the file (`named_error`).

    Returns:
        The file's own frame rate (`VideoReader.source_fps`), for `frames_read_again`.

    Raises:
        InputError: the file cannot be opened, or yields no frame at the rate.
    """
    with open_named(path, config, name) as reader:
        if reader.read() is None:
            why = reader.error or f"--video {path}: no frame at {config.fps:g} fps"
            raise InputError(named_error(why, str(path), name))
        return reader.source_fps

