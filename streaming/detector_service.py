"""The detector's old address, kept while modules written against it move to `streaming.detector` (its package:
config, loading, loop, streams, publisher, sinks, wiring). New code imports from `streaming.detector`."""

from streaming.detector.config import DetectorConfig, StreamSource
from streaming.detector.loading import (
    OpenedStream,
    OpenedStreams,
    check_detector_matches_graph,
    check_measured_rates,
    live_segmenter_config,
    load_detector_for_stream,
    open_stream,
    open_streams,
    print_warning,
    stream_ids_for,
)
from streaming.detector.loop import Detector, FrameLoop
from streaming.detector.publisher import EventPublisher
from streaming.detector.streams import DetectorStats, DetectorStream, StreamWatcher
from streaming.detector.wiring import publishing_detector, run_detector, run_detectors

__all__ = [
    "Detector", "DetectorConfig", "DetectorStats", "DetectorStream", "EventPublisher", "FrameLoop", "OpenedStream",
    "OpenedStreams", "StreamSource", "StreamWatcher", "check_detector_matches_graph", "check_measured_rates",
    "live_segmenter_config", "load_detector_for_stream", "open_stream", "open_streams", "print_warning",
    "publishing_detector", "run_detector", "run_detectors", "stream_ids_for",
]
