"""The detector: video in, key-step messages out, for one camera or many in one process.

Its rooms, one concern each (drawn in docs/architecture.md):

- `config`: `DetectorConfig` (one stream"s settings) and `StreamSource` (what it reads);
- `loading`: what is loaded and checked before the first frame (graph, checkpoint, extractor, videos, stream ids);
- `batching`: the fixed batch sizes, their warm-up and the count of shapes first seen late; the float16 check;
- `loop`: `FrameLoop`, the one frame loop (reader threads, batched features, one MiniROAD step for all streams);
- `streams`: `DetectorStream`, one stream"s segmenter, statistics and heartbeats;
- `publisher`: `EventPublisher`, what one stream puts on the wire;
- `sinks`: the `Sink` protocol (one ``send(message)``), fan-out, JSON lines, background sinks; `webhook` and
  `alert_frames` are two of them;
- `registry`: the tables from a name to an extractor, a checker or a sink;
- `wiring`: `build_pipeline`, the one place every command puts a detector together.

The names below load on first use (`graphs.common.lazy_exports`): the view imports the sink protocol without torch.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from graphs.common.lazy_exports import lazy_exports

if TYPE_CHECKING:
    from streaming.detector.config import DetectorConfig, StreamSource
    from streaming.detector.loading import (
        LoadedParts,
        OpenedStream,
        OpenedStreams,
        check_measured_rates,
        detector_for_graph,
        evidence_reporter,
        live_segmenter_config,
        load_detector_for_stream,
        load_parts,
        name_differences,
        open_stream,
        open_streams,
        open_videos,
        print_warning,
        procedure_summary,
        segmenter_config_of,
        stream_ids_for,
    )
    from streaming.detector.loop import FINAL_GAP_S, FINAL_REPEATS, FrameLoop
    from streaming.detector.publisher import EVIDENCE_DECIMALS, EventPublisher
    from streaming.detector.streams import DetectorStats, DetectorStream, StreamWatcher
    from streaming.detector.wiring import (
        Pipeline,
        PipelineConfig,
        build_pipeline,
        checker_publisher,
        run_detector,
        run_detectors,
    )

__all__ = [
    "DetectorConfig",
    "DetectorStats",
    "DetectorStream",
    "EVIDENCE_DECIMALS",
    "EventPublisher",
    "FINAL_GAP_S",
    "FINAL_REPEATS",
    "FrameLoop",
    "LoadedParts",
    "OpenedStream",
    "OpenedStreams",
    "Pipeline",
    "PipelineConfig",
    "StreamSource",
    "StreamWatcher",
    "build_pipeline",
    "check_measured_rates",
    "checker_publisher",
    "detector_for_graph",
    "evidence_reporter",
    "live_segmenter_config",
    "load_detector_for_stream",
    "load_parts",
    "name_differences",
    "open_stream",
    "open_streams",
    "open_videos",
    "print_warning",
    "procedure_summary",
    "run_detector",
    "run_detectors",
    "segmenter_config_of",
    "stream_ids_for",
]
__getattr__ = lazy_exports(__name__, {
    "streaming.detector.config": (
        "DetectorConfig", "StreamSource",
    ),
    "streaming.detector.loading": (
        "LoadedParts", "OpenedStream", "OpenedStreams", "check_measured_rates", "detector_for_graph",
        "evidence_reporter", "live_segmenter_config", "load_detector_for_stream", "load_parts", "name_differences",
        "open_stream", "open_streams", "open_videos", "print_warning", "procedure_summary", "segmenter_config_of",
        "stream_ids_for",
    ),
    "streaming.detector.loop": (
        "FINAL_GAP_S", "FINAL_REPEATS", "FrameLoop",
    ),
    "streaming.detector.publisher": (
        "EVIDENCE_DECIMALS", "EventPublisher",
    ),
    "streaming.detector.streams": (
        "DetectorStats", "DetectorStream", "StreamWatcher",
    ),
    "streaming.detector.wiring": (
        "Pipeline", "PipelineConfig", "build_pipeline", "checker_publisher", "run_detector",
        "run_detectors",
    ),
})
