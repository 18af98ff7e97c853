"""Fixed batch sizes: the backbone sees only the sizes warmed at start-up, and the padding changes no feature."""

from __future__ import annotations

import threading
from pathlib import Path

import numpy as np
import pytest
import zmq

from graphs.common.errors import InputError
from streaming.demo.paths import default_demo_paths
from streaming.detector import DetectorConfig, PipelineConfig, build_pipeline, load_detector_for_stream
from streaming.detector.batching import BatchedExtractor, Buckets, default_batch_sizes
from streaming.detector.loading import LoadedParts
from streaming.detector.sinks import Sink
from streaming.detector.streams import FrameObserver
from streaming.extractors import EfficientNetLiteExtractor, LightExtractor
from streaming.messages import Message
from streaming.readers import Frame, ReaderConfig, VideoReader, open_reader
from tests.streaming.helpers import write_noise_video

_, DETECTOR = default_demo_paths()


def test_a_batch_is_cut_into_passes_of_the_fixed_sizes_the_last_one_padded() -> None:
    buckets = Buckets((4, 1, 2))
    assert buckets.sizes == (1, 2, 4)
    assert buckets.passes(3) == [(0, 3, 4)]
    assert buckets.passes(9) == [(0, 4, 4), (4, 4, 4), (8, 1, 1)]
    assert buckets.passes(6) == [(0, 4, 4), (4, 2, 2)]
    with pytest.raises(InputError, match="batch sizes"):
        Buckets(())


def test_on_a_cpu_no_frame_is_ever_padding_and_on_a_gpu_the_sizes_are_powers_of_two() -> None:
    light = LightExtractor()
    assert default_batch_sizes(light, 12, on_gpu=False) == (1, 2, 3, 4)  # the CPU pass size: nothing padded
    assert default_batch_sizes(light, 1, on_gpu=False) == (1,)
    light.pass_size = 256
    assert default_batch_sizes(light, 64, on_gpu=True) == (1, 2, 4, 8, 16, 32, 64)
    assert default_batch_sizes(light, 5, on_gpu=True) == (1, 2, 4, 8)
    assert default_batch_sizes(light, 1000, on_gpu=True)[-1] == 256


def test_padding_and_preparing_frames_in_the_reader_change_no_feature() -> None:
    extractor = EfficientNetLiteExtractor("cpu")
    rng = np.random.default_rng(0)
    frames = rng.integers(0, 255, (3, 120, 160, 3), dtype=np.uint8)
    alone = np.concatenate([extractor(f[None]) for f in frames])
    batched = BatchedExtractor(extractor, Buckets((1, 4)))
    batched.warm()
    prepared = np.stack([batched.prepare(f) for f in frames])  # what the reader threads hand over
    assert prepared.shape == (3, 224, 224, 3)
    np.testing.assert_allclose(batched(prepared), alone, rtol=1e-4, atol=1e-4)
    assert batched.late_shapes == 0  # three frames ran as a padded pass of four, a size warmed at start-up


def test_a_size_the_warm_up_did_not_cover_is_counted() -> None:
    batched = BatchedExtractor(LightExtractor(), Buckets((1, 2)))
    batched.warm()
    batched(np.zeros((2, 32, 32, 3), dtype=np.uint8))
    assert batched.late_shapes == 0
    batched.buckets = Buckets((1, 2, 3))  # a size nobody warmed
    batched(np.zeros((3, 32, 32, 3), dtype=np.uint8))
    assert batched.late_shapes == 1 and batched.seen - batched.warmed == {(3,)}


class _Count:
    """A sink that keeps what it is sent."""

    def __init__(self) -> None:
        self.messages: list[Message] = []

    def send(self, message: Message) -> None:
        self.messages.append(message)


def test_cameras_of_different_sizes_in_one_loop_meet_no_batch_shape_after_start_up(tmp_path: Path) -> None:
    model, checkpoint, extractor = load_detector_for_stream(DETECTOR, None)
    sizes = [(64, 48), (80, 60), (96, 72), (64, 48), (80, 60)]
    readers: list[VideoReader] = [
        open_reader(str(write_noise_video(tmp_path / f"cam{k}.mp4", frames=40, size=size)), ReaderConfig(fps=5.0))
        for k, size in enumerate(sizes)
    ]
    sinks: dict[str, _Count] = {}

    def sink(stream_id: str) -> Sink:
        return sinks.setdefault(stream_id, _Count())

    parts = LoadedParts(None, model, checkpoint, extractor)
    config = PipelineConfig(detector=DetectorConfig(), stream_ids=tuple(f"cam{k}" for k in range(5)), publish=False)
    with build_pipeline(config, parts=parts, readers=readers, sinks=[sink], ctx=zmq.Context.instance()) as pipeline:
        stats = pipeline.run(threading.Event())
        assert pipeline.loop.batches.buckets.sizes == (1, 2, 3, 4)
        assert pipeline.loop.batches.warmed == {(1, 224, 224), (2, 224, 224), (3, 224, 224), (4, 224, 224)}
        assert pipeline.late_shapes == 0
    frames = [s.frames for s in stats]
    assert frames[0] > 1 and frames == frames[:1] * 5 and not any(s.error for s in stats)
    assert all(len(sinks[f"cam{k}"].messages) > 0 for k in range(5))


class _Broken:
    """A sink with a defect: it raises on every message."""

    def send(self, message: Message) -> None:
        raise ValueError("a defect in this sink")


def test_a_sink_that_raises_stops_no_stream_and_the_next_sink_gets_every_message(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    model, checkpoint, extractor = load_detector_for_stream(DETECTOR, None)
    readers: list[VideoReader] = [
        open_reader(str(write_noise_video(tmp_path / f"cam{k}.mp4", frames=40)), ReaderConfig(fps=5.0))
        for k in range(2)
    ]
    kept: dict[str, _Count] = {}
    parts = LoadedParts(None, model, checkpoint, extractor)
    config = PipelineConfig(detector=DetectorConfig(), stream_ids=("cam0", "cam1"), publish=False)
    with build_pipeline(config, parts=parts, readers=readers, ctx=zmq.Context.instance(),
                        sinks=[lambda sid: _Broken(), lambda sid: kept.setdefault(sid, _Count())]) as pipeline:
        stats = pipeline.run(threading.Event())
    assert all(s.frames > 1 and not s.error for s in stats)
    for sid in ("cam0", "cam1"):  # every heartbeat, the last one (ended) included, reached the sink after
        assert any(getattr(m, "ended", False) for m in kept[sid].messages)
    warnings = [line for line in capsys.readouterr().err.splitlines() if "_Broken failed" in line]
    assert len(warnings) == 2 and all(line.startswith("warning: ") for line in warnings)  # once per stream


def test_the_probabilities_a_frame_observer_holds_stay_those_of_its_frame(tmp_path: Path) -> None:
    # The overlay holds each frame's probabilities until the next frame arrives: they were a view of the stepper's
    # buffer, so every annotated frame showed the next frame's step and confidence (or, with several cameras, a row
    # of another camera's).
    model, checkpoint, extractor = load_detector_for_stream(DETECTOR, None)
    readers: list[VideoReader] = [
        open_reader(str(write_noise_video(tmp_path / f"cam{k}.mp4", frames=90)), ReaderConfig(fps=5.0))
        for k in range(2)
    ]
    held: list[tuple[np.ndarray, np.ndarray]] = []  # (the array handed over, a copy made then)

    def observer(stream_id: str) -> FrameObserver:
        def seen(frame: Frame, features: np.ndarray, probs: np.ndarray) -> None:
            held.append((probs, probs.copy()))
        return seen

    parts = LoadedParts(None, model, checkpoint, extractor)
    config = PipelineConfig(detector=DetectorConfig(), stream_ids=("cam0", "cam1"), publish=False)
    with build_pipeline(config, parts=parts, readers=readers, sinks=[lambda sid: _Count()], observers=[observer],
                        ctx=zmq.Context.instance()) as pipeline:
        stats = pipeline.run(threading.Event())
    assert sum(s.frames for s in stats) == len(held) > 20
    assert all(np.array_equal(given, then) for given, then in held)


def test_a_stream_s_end_is_told_without_holding_up_the_other_streams(tmp_path: Path) -> None:
    # The end line was written with the loop's output lock held: a slow or blocked stderr stalled every worker, so
    # the streams still running published nothing meanwhile.
    model, checkpoint, extractor = load_detector_for_stream(DETECTOR, None)
    readers: list[VideoReader] = [
        open_reader(str(write_noise_video(tmp_path / f"cam{k}.mp4", frames=frames)), ReaderConfig(fps=5.0))
        for k, frames in enumerate((30, 150))  # 30 fps: 5 and 25 frames read at 5 fps
    ]
    parts = LoadedParts(None, model, checkpoint, extractor)
    config = PipelineConfig(detector=DetectorConfig(), stream_ids=("cam0", "cam1"), publish=False)
    told: list[tuple[str, bool]] = []
    with build_pipeline(config, parts=parts, readers=readers, sinks=[lambda sid: _Count()],
                        ctx=zmq.Context.instance()) as pipeline:
        stats = pipeline.run(threading.Event(), lambda stream: told.append((stream.stream_id,
                                                                            pipeline.loop._out.locked())))
    assert [sid for sid, _ in told] == ["cam0", "cam1"] and not any(held for _, held in told), told
    assert all(s.frames > 1 and not s.error for s in stats), stats
