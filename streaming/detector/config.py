"""Settings of the detector: what one stream is called and where it publishes (`DetectorConfig`), and what it reads
(`StreamSource`), both checked on construction so that a mistake is one ``error:`` line before any model loads."""

from __future__ import annotations

from dataclasses import dataclass, field

from graphs.common.errors import InputError
from graphs.common.options import check_threads
from graphs.common.safe_text import unknown_name
from graphs.common.settings_files import as_written
from recognition.segmenter import SegmenterOverrides
from streaming.alert_modes import DEFAULT_ALERT_ON, check_alert_on
from streaming.curve_keys import CurveClient
from streaming.devices import DEVICES
from streaming.messages import STREAM_ID_RULE, is_stream_id
from streaming.readers import ReaderConfig
from streaming.transport import CONNECT_WAIT_S, DEFAULT_EVENTS_ENDPOINT, HEARTBEAT_S, check_endpoint


@dataclass(frozen=True)
class DetectorConfig:
    """Settings of one detector stream.

    Args:
        stream_id: name of the stream on the wire (1-64 of ``[A-Za-z0-9_.:-]``).
        connect: the checker's events endpoint.
        heartbeat_s: seconds between heartbeats.
        threads: on a CPU, the frame loop's workers, each extracting features on one core side by side
            (`streaming.detector.loop`); on a GPU, torch's intra-op threads.
        max_frames: stop after this many frames (0: until the source ends).
        connect_wait_s: `run_detector` refuses to start if the checker does not answer within this long.
        alert_on: ``"onset"`` (the default): announce each key-step provisionally too (`KeyStepOnset`), so that the
            checker can alert before it ends; ``"end"``: publish confirmed key-steps only.
        segmenter: command-line changes to the checkpoint's segmenter settings.
        once: send each key-step the first time it is confirmed only (``--once``): a step confirmed or announced
            again later in the stream is not sent, for procedures whose steps are each done once (a recipe's);
            `tgml bench-live` measures it as its ``once`` segmenter variants, which each fold takes or not.
        curve: this detector's CURVE keys and the checker's public key (``--curve-server``, ``--curve-secret``);
            None: no CURVE (a checker on loopback, or one started with ``--insecure``).
        default_rates: a checkpoint without measured miss and false-detection rates sends evidence calibrated with
            `recognition.evidence.DEFAULT_MISS_RATE` and `DEFAULT_FALSE_RATE` (``--default-rates``); without it, such
            a checkpoint sends no evidence.
        batch_sizes: the batch sizes the backbone ever sees (`streaming.detector.batching.Buckets`); a batch of
            frames is cut into passes of these sizes, the last one padded. Every size is run once at start-up, before
            the first frame is read. Empty (the default): chosen from the device and the number of streams.
    """

    stream_id: str = "cam0"
    connect: str = DEFAULT_EVENTS_ENDPOINT
    heartbeat_s: float = HEARTBEAT_S
    threads: int = 1
    max_frames: int = 0
    connect_wait_s: float = CONNECT_WAIT_S
    alert_on: str = DEFAULT_ALERT_ON
    segmenter: SegmenterOverrides = field(default_factory=SegmenterOverrides)
    once: bool = False
    curve: CurveClient | None = None
    default_rates: bool = False
    batch_sizes: tuple[int, ...] = ()

    def __post_init__(self) -> None:
        check_alert_on(self.alert_on)
        if not is_stream_id(self.stream_id):
            raise InputError(f"--stream-id {self.stream_id!r}: use {STREAM_ID_RULE}")
        check_threads(self.threads)
        check_endpoint(self.connect, "--connect", peer=True)
        if not self.heartbeat_s > 0:
            raise InputError(f"DetectorConfig.heartbeat_s = {self.heartbeat_s} must be > 0")
        if self.max_frames < 0:
            raise InputError(f"DetectorConfig.max_frames = {self.max_frames} must be >= 0")
        if any(not isinstance(b, int) or b < 1 for b in self.batch_sizes):
            raise InputError(f"DetectorConfig.batch_sizes = {self.batch_sizes} must be positive whole numbers")
        if not self.connect_wait_s > 0:
            raise InputError(f"DetectorConfig.connect_wait_s = {self.connect_wait_s} must be > 0")


@dataclass(frozen=True)
class StreamSource:
    """What one detector stream reads, as the command line names it (checked by `open_stream`).

    Args:
        video: the ``--video`` value: ``demo`` / ``demo:<name>``, a camera, a URL or a file.
        graph: task graph file; the detector's key-step classes must be exactly its key-steps.
        detector: detector checkpoint file.
        backbone: TorchScript backbone file, for detectors trained on its features.
        reader: how to read the video; its ``fps`` is replaced by the detector's rate.
        device: where the extractor and the detector run: ``"auto"`` (CUDA when torch sees one), ``"cpu"``, ``"cuda"``.
        ignore_names: run even if the detector and the graph name the steps differently (``--ignore-names``).
    """

    video: str
    graph: str
    detector: str
    backbone: str | None = None
    reader: ReaderConfig = field(default_factory=lambda: ReaderConfig(realtime=True))
    device: str = "auto"
    ignore_names: bool = False

    def __post_init__(self) -> None:
        for name in ("video", "graph", "detector"):
            value = getattr(self, name)
            if not isinstance(value, str) or not value:
                raise InputError(f"StreamSource.{name} = {as_written(value)} must name a source or a file")
        if self.device not in DEVICES:
            raise InputError(unknown_name("--device", self.device, DEVICES, None))
