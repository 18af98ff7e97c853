"""What the system saw, drawn over the video: ``--annotate-out FILE.mp4`` and ``--preview``.

Each frame the detector reads gets a dark band at the top with the key-step it sees now and its probability, and the
steps confirmed so far; an alert shows as a red band at the bottom from the frame at which it was raised, for
`ALERT_SHOW_S` seconds, naming the step and its missing pre-conditions (a retracted early alert turns grey and says
so). `draw_overlay` is the pure drawing; `OverlayWriter` writes the frames to an MP4 file (atomically: the file appears
complete or not at all) and, with ``preview``, shows them in an OpenCV window. A live session ends only when it is
stopped (Ctrl-C, SIGTERM), so a caller that says the stop ended the session (`OverlayWriter.stopped`) gets the frames
shown until then as the file; a run that fails, or a stop no caller vouched for, leaves no file.

``--preview`` needs a display and an OpenCV built with a GUI. The project depends on ``opencv-python-headless``,
which has none; `check_preview` refuses with one line that says what to install (``opencv-python``).
"""

from __future__ import annotations

import math
import os
import sys
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager, ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType

import cv2
import numpy as np

from graphs.common.errors import InputError
from graphs.common.files import atomic_path, check_output
from recognition.checkpoint import DetectorCheckpoint
from streaming.local_checker import CheckerLink
from streaming.messages import Alert, Message, Retraction, StepEvent
from streaming.readers import Frame, container_header

ALERT_SHOW_S = 3.0  # an alert's red band stays this long after it was raised
ALERT_RED = (0, 0, 220)  # BGR
RETRACTED_GREY = (110, 110, 110)
BAND = (25, 25, 25)
WINDOW = "stream-detect"


@dataclass
class OverlayState:
    """What the overlay shows: the step seen now, the steps done, and the alerts with the video time they came."""

    names: dict[int, str] = field(default_factory=dict)
    current: tuple[str, float] | None = None  # step name and probability; None: background
    done: list[str] = field(default_factory=list)  # each step once, in the order first done
    alerts: list[tuple[float, Alert]] = field(default_factory=list)
    retracted: dict[str, Retraction] = field(default_factory=dict)

    def apply(self, message: Message, now: float) -> None:
        """Fold a checker message in (key-steps, alerts, retractions), at video time ``now``."""
        if isinstance(message, StepEvent):
            # Done is a set of steps, in the order first done, as the checker's status and the view list it: a step
            # recognised twice filled the band with "lay_photo, open_box, lay_photo, open_box".
            if message.step_name not in self.done:
                self.done.append(message.step_name)
        elif isinstance(message, Alert) and all(a.alert_id != message.alert_id for _, a in self.alerts):
            self.alerts.append((now, message))
        elif isinstance(message, Retraction):
            self.retracted[message.alert_id] = message


MARGIN = 6  # pixels left of the text, and kept free right of it
MAX_LINES = 3  # a band grows to at most this many lines of text
STATUS_SHARE = 4  # the top band's lines take at most a 1/STATUS_SHARE of the frame's height (one line at least)


def _scale(width: int) -> float:
    return max(0.35, width / 900)


def _line_height(width: int) -> int:
    """Pixels from one line of text to the next at the text scale of a frame ``width`` pixels wide."""
    return cv2.getTextSize("Mg", cv2.FONT_HERSHEY_SIMPLEX, _scale(width), 1)[0][1] * 2


def status_lines(height: int, width: int) -> int:
    """The most lines the top band (the step seen now, the steps done) takes on a ``height`` x ``width`` frame: on a
    160x120 frame its three lines, and an alert's two below, covered half the picture."""
    return max(1, min(MAX_LINES, height // STATUS_SHARE // _line_height(width)))


def _lines(text: str, width: int, max_lines: int = MAX_LINES) -> list[str]:
    """``text`` wrapped at its spaces to lines that fit ``width`` pixels at the frame's text scale (on a 160-pixel
    frame "MISTAKE: attach_shade before attach_pole" was cut after "attach"). At most ``max_lines``: what does not
    fit them is cut, and the last line ends in "..." to say so."""
    scale, room = _scale(width), width - 2 * MARGIN

    def fits(line: str) -> bool:
        return cv2.getTextSize(line, cv2.FONT_HERSHEY_SIMPLEX, scale, 1)[0][0] <= room

    lines: list[str] = []
    for word in (piece for whole in text.split(" ") for piece in _pieces(whole, fits)):
        if lines and fits(f"{lines[-1]} {word}"):
            lines[-1] = f"{lines[-1]} {word}"
        elif len(lines) < max_lines:
            lines.append(word)
        else:  # no room left: the last line keeps what fits of itself, then "..."
            last = lines[-1]
            while last and not fits(f"{last} ..."):
                last = last[:-1]
            lines[-1] = f"{last.rstrip()} ..."
            break
    return lines


def _pieces(word: str, fits: Callable[[str], bool]) -> list[str]:
    """``word`` as it fits a line: whole, or, when too long for one, cut after its underscores (step names are
    ``fill_the_electric_kettle``), a part longer than a line cut where the line ends."""
    if fits(word):
        return [word]
    parts = [p + "_" for p in word.split("_")[:-1]] + [word.split("_")[-1]]
    pieces: list[str] = []
    for part in filter(None, parts):
        while part:
            if pieces and fits(pieces[-1] + part):
                pieces[-1] += part
                break
            cut = next((n for n in range(len(part), 0, -1) if fits(part[:n])), 1)
            pieces.append(part[:cut])
            part = part[cut:]
    return pieces


def _band(img: np.ndarray, text: str, colour: tuple[int, int, int], top: bool, max_lines: int = MAX_LINES) -> None:
    """Fill a band at the top or bottom of ``img`` with ``colour`` and write ``text`` in it, as many lines as it
    takes up to ``max_lines`` (the band is at least `band_height` high)."""
    h, w = img.shape[:2]
    lines = _lines(text, w, max_lines)
    scale = _scale(w)
    line_h = _line_height(w)
    height = min(h, max(band_height(h), line_h * len(lines) + line_h // 3))
    rows = slice(0, height) if top else slice(h - height, h)
    img[rows] = colour
    first = rows.start + (height - line_h * len(lines)) // 2 + line_h * 3 // 4
    for k, line in enumerate(lines):
        cv2.putText(img, line, (MARGIN, first + k * line_h), cv2.FONT_HERSHEY_SIMPLEX, scale, (255, 255, 255), 1,
                    cv2.LINE_AA)


def band_height(height: int) -> int:
    """Height in pixels of the top band and of the alert band of a frame ``height`` pixels high (the least: a band
    whose text takes more lines grows)."""
    return max(14, height // 8)


def draw_overlay(bgr: np.ndarray, state: OverlayState, now: float) -> np.ndarray:
    """One annotated frame.

    Args:
        bgr: ``(H, W, 3)`` uint8 frame in OpenCV's BGR order (left unchanged).
        state: what to show.
        now: the frame's video time in seconds (alerts raised in the last `ALERT_SHOW_S` seconds are shown).

    Returns:
        A new ``(H, W, 3)`` uint8 BGR frame.
    """
    out = bgr.copy()
    seen = "-" if state.current is None else f"{state.current[0]} {state.current[1]:.2f}"
    _band(out, f"now: {seen}   done: {', '.join(state.done[-4:]) or '-'}", BAND, top=True,
          max_lines=status_lines(*out.shape[:2]))
    showing = [(t, a) for t, a in state.alerts if t <= now < t + ALERT_SHOW_S]
    if showing:
        _, alert = showing[-1]
        withdrawn = alert.alert_id in state.retracted
        needs = ", ".join(alert.missing_names) or "?"
        what = f"retracted: {alert.step_name}" if withdrawn else f"MISTAKE: {alert.step_name} before {needs}"
        _band(out, what, RETRACTED_GREY if withdrawn else ALERT_RED, top=False)
    return out


def drawing_options(annotate_out: bool, preview: bool) -> str:
    """The drawing options given, as the subject of a refusal (``--annotate-out and --preview: draw``), or ``""``:
    a source without frames (a feature file) names only what the user asked it to draw."""
    given = [name for name, asked in (("--annotate-out", annotate_out), ("--preview", preview)) if asked]
    return f"{' and '.join(given)}: draw{'s' if len(given) == 1 else ''}" if given else ""


def check_preview() -> None:
    """Refuse ``--preview`` where no window can open: no display, or an OpenCV without a GUI (the headless wheel).

    Raises:
        InputError: one line naming what is missing and what to do.
    """
    if sys.platform.startswith("linux") and not (os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY")):
        raise InputError("--preview: no display (DISPLAY is not set); use --annotate-out FILE.mp4 and watch the file")
    gui = [line for line in cv2.getBuildInformation().splitlines() if line.strip().startswith("GUI:")]
    if not gui or gui[0].split(":", 1)[1].strip().upper() in ("", "NONE"):
        raise InputError("--preview: this OpenCV has no GUI (opencv-python-headless); run "
                         "'pip install opencv-python' in this environment for a window, or use --annotate-out FILE.mp4")


class OverlayWriter(AbstractContextManager["OverlayWriter"]):
    """Writes annotated frames to an MP4 file and/or shows them in a window.

    Args:
        path: the ``.mp4`` to write (None: preview only); checked on construction.
        fps: frame rate of the frames given.
        preview: also show each frame in an OpenCV window (`check_preview` first).
        inputs: files the run reads (the video drawn over): refused as ``path``.
    """

    def __init__(self, path: str | Path | None, fps: float, preview: bool = False,
                 inputs: Sequence[str | Path] = ()) -> None:
        if path is not None:
            path = check_output(path, "annotated video", inputs=inputs, option="--annotate-out")
            if path.suffix.lower() != ".mp4":
                raise InputError(f"--annotate-out {path}: must end in .mp4")
        if preview:
            check_preview()
        self.path = None if path is None else Path(path)
        self.fps = fps
        self.preview = preview
        self.state = OverlayState()
        self.frames = 0
        self._stack = ExitStack()
        self._tmp: Path | None = None
        self._writer: cv2.VideoWriter | None = None
        self._stopped = False
        self.kept = False  # the file was written although the block was left by an interrupt

    def __enter__(self) -> OverlayWriter:
        if self.path is not None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._tmp = self._stack.enter_context(_atomic(self.path))
        return self

    def frame(self, rgb: np.ndarray, now: float) -> None:
        """Draw and write (or show) one frame.

        Args:
            rgb: ``(H, W, 3)`` uint8 RGB frame, as the readers deliver it.
            now: its video time in seconds.
        """
        out = draw_overlay(cv2.cvtColor(rgb, cv2.COLOR_RGB2BGR), self.state, now)
        if self._tmp is not None:
            if self._writer is None:
                size = (out.shape[1], out.shape[0])
                self._writer = cv2.VideoWriter(str(self._tmp), cv2.VideoWriter.fourcc(*"mp4v"), self.fps, size)
                if not self._writer.isOpened():
                    raise InputError(f"--annotate-out {self.path}: OpenCV cannot write an mp4v video here")
            self._writer.write(out)
        if self.preview:
            cv2.imshow(WINDOW, out)
            cv2.waitKey(1)
        self.frames += 1

    def stopped(self) -> None:
        """Say that a stop (Ctrl-C, SIGTERM) ended the session and no more frames will come: leaving the block by that
        interrupt then writes the file with the frames given so far, instead of discarding it as after a failure.

        Call it only once whatever calls `frame` has finished: the file is closed on leaving the block.
        """
        self._stopped = True

    def __exit__(
        self, kind: type[BaseException] | None, err: BaseException | None, tb: TracebackType | None
    ) -> None:
        if self._writer is not None:
            self._writer.release()
        if self.preview:
            cv2.destroyAllWindows()
        # Only the stop itself: an error raised while the stop was handled (the last frame not drawn) is a failure.
        self.kept = self._stopped and self._writer is not None and kind is not None and \
            issubclass(kind, KeyboardInterrupt)
        if (kind is None or self.kept) and self._writer is not None and self._tmp is not None:
            # OpenCV's writer says nothing of a write that failed (a full disk): a file cut short would otherwise
            # take the place of the output, and of an earlier good video there.
            announced = container_header(str(self._tmp))[0]  # 0 when it cannot be opened
            written = int(announced) if math.isfinite(announced) and announced > 0 else 0
            if written != self.frames:
                failure = InputError(f"--annotate-out {self.path}: the video was not written whole ({written} of "
                                     f"{self.frames} frames readable: a full disk?); nothing was written there")
                self.kept = False
                self._stack.__exit__(InputError, failure, None)
                raise failure
        if self.kept:
            self._stack.__exit__(None, None, None)  # committed; the interrupt goes on once the block is left
        else:
            self._stack.__exit__(kind, err, tb)


def _atomic(path: Path) -> AbstractContextManager[Path]:
    return atomic_path(path, suffix=".mp4", what="annotated video")


class FrameAnnotator:
    """Draws each frame a detector reads with what the checker had said by the end of that frame.

    Give `seen` as the detector's ``on_frame`` (or call it from there). A frame is drawn when the next one arrives (or
    at `finish`), once the key-steps and alerts it caused have come back from the ``link``.

    Args:
        overlay: the open writer.
        link: the in-process checker the detector also publishes to.
        checkpoint: the detector's description (class names, rate).
    """

    def __init__(self, overlay: OverlayWriter, link: CheckerLink, checkpoint: DetectorCheckpoint) -> None:
        self.overlay = overlay
        self.link = link
        self.steps = checkpoint.class_step_ids
        self.names = checkpoint.class_names
        self.period = 1.0 / checkpoint.fps
        self._held: tuple[Frame, np.ndarray] | None = None

    def seen(self, frame: Frame, features: np.ndarray, probs: np.ndarray) -> None:
        """The detector's ``on_frame``: draw the frame before this one, hold this one."""
        self.finish()
        self._held = (frame, probs)
        self.link.now = frame.time + self.period  # what this frame causes is known once it is over

    def finish(self) -> None:
        """Draw the frame held, if any (call it once the stream has ended)."""
        if self._held is None:
            return
        frame, probs = self._held
        self._held = None
        for t, message in self.link.take():
            self.overlay.state.apply(message, t)
        best = int(probs.argmax())
        self.overlay.state.current = None if self.steps[best] is None else (self.names[best], float(probs[best]))
        self.overlay.frame(frame.image, frame.time + self.period)  # what is known once the frame is over
