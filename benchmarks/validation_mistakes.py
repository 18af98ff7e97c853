"""Do the alerts fail on recognition or on checking? Order mistakes simulated on each detector's validation videos.

Usage::

    python benchmarks/validation_mistakes.py --features runs/hard/features --graph runs/hard/graph.json \\
        --annotations hard/labels.json --detectors runs/hard/detector-seed0.pt,runs/hard/detector-seed1.pt

Training data only: every detector's own validation videos (``info.validation_videos`` of its checkpoint: training
videos its weights never learned from). Each is checked as it was recorded (a correct execution), and in up to
``--variants`` mistaken versions: one key-step moved to just before one of its pre-conditions under ``--graph``, its
feature frames moved with it, the idle gaps left in place. Every version runs through the live chain from its
features (the detector's ``step``, the online segmenter with the checkpoint's settings, ``--alert-on onset``, the
checker through the wire encoding) and is scored as ``stream-detect eval`` scores a video (graph rule), for the
binary checker and the probabilistic one at each ``--thresholds`` value (the detector runs once per version, its
messages replayed through each checker, as ``stream-detect eval`` does).

Printed, per checker setting: versions, mistakes to find, alerts, correct ones, precision / recall / F1, false alarms
per version, alert latency median. Read beside ``stream-detect eval`` on held-out videos: figures that are good here
and poor there say that the checker works and the detector does not recognise the held-out videos as it does these
(a moved step keeps the look it had in its correct place: a real out-of-order step may look different, and this
simulation cannot show that). A detector with motion inputs (``motion_lag``) gets them computed over the video as
recorded, and each moved piece keeps its own: the change its frames showed, not a jump at the cut that no camera
would film. The detector steps with `MiniROAD.step`, which computes what the live stepper does.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch

from graphs.checker_settings import CheckerSettings
from graphs.common.command_line import ArgumentParser
from graphs.common.errors import InputError, exit_on_input_error
from graphs.common.files import read_json
from graphs.common.options import seed_option
from graphs.common.settings_files import Bound, bounded_option
from graphs.task_graph import TaskGraph, load_graph
from recognition.checkpoint import DetectorCheckpoint, load_detector
from recognition.model import MiniROAD
from recognition.motion import model_inputs
from recognition.segmenter import SegmenterOverrides
from streaming.checker.core import CheckerCore
from streaming.detector import (
    DetectorConfig,
    DetectorStream,
    EventPublisher,
    evidence_reporter,
    live_segmenter_config,
)
from streaming.local_checker import CheckerLink
from streaming.offline.eval_run import STREAM_ID, DetectorRecord, EvalVideo, check_record
from streaming.offline.eval_scores import AnnotatedSegment, VideoScores, score_video, total
from streaming.readers import Frame

Segment = tuple[int, int, int]  # step, first frame, end frame (exclusive)


class _NoReader:
    """The stream's reader, for its statistics only: the frames come from a feature file."""

    dropped = 0
    error = None
    frames = 0


THRESHOLD = Bound(0, 1, open_low=True, open_high=True)  # an alert threshold of 0 or 1 alerts always or never


def mistaken_orders(steps: Sequence[int], graph: TaskGraph) -> list[list[int]]:
    """Orders of the segment indices with one step moved to just before the first of its pre-conditions done earlier."""
    orders = []
    for i, step in enumerate(steps):
        before = next((j for j in range(i) if steps[j] in graph.preconditions(step)), None)
        if before is not None:
            order = [k for k in range(len(steps)) if k != i]
            order.insert(before, i)
            orders.append(order)
    return orders


def reassemble(features: np.ndarray, segments: Sequence[Segment], order: Sequence[int], fps: float
               ) -> tuple[np.ndarray, tuple[AnnotatedSegment, ...]]:
    """The video's feature rows with its segments in ``order`` and its gaps in place, and the annotation it gets."""
    gaps, previous = [], 0
    for _, first, end in segments:
        gaps.append(features[previous:first])
        previous = end
    parts, annotated, t = [], [], 0
    for slot, k in enumerate(order):
        parts.append(gaps[slot])
        t += len(gaps[slot])
        step, first, end = segments[k]
        parts.append(features[first:end])
        annotated.append(AnnotatedSegment(step, t / fps, (t + end - first) / fps, False))
        t += end - first
    parts.append(features[previous:])
    return np.concatenate(parts), tuple(annotated)


def record_features(model: MiniROAD, checkpoint: DetectorCheckpoint, graph: TaskGraph, inputs: np.ndarray,
                    name: str) -> DetectorRecord:
    """The live detector chain from the model's input rows (`recognition.motion.model_inputs`): what it published,
    with video times (as `stream-detect eval` records a video, then replays it through each checker with
    `check_record`)."""
    link = CheckerLink(CheckerCore(graph))  # its answers are not used: `check_record` asks each checker afresh
    config = DetectorConfig(stream_id=STREAM_ID, alert_on="onset")
    segmenter = live_segmenter_config(checkpoint, SegmenterOverrides(), "onset")
    evidence = evidence_reporter(checkpoint, segmenter, False)
    events = EventPublisher(link, STREAM_ID, clock=lambda: 0.0, evidence=evidence)
    reader: Any = _NoReader()
    stream = DetectorStream(reader, checkpoint, events, config, segmenter, clock=lambda: 0.0)
    state = model.init_state()
    stream.start()
    width = checkpoint.config.input_dim
    for t, row in enumerate(inputs):
        with torch.inference_mode():
            out, state = model.step(torch.from_numpy(row)[None], state)
        link.now = (t + 1) / checkpoint.fps
        stream.deliver(Frame(np.zeros((1, 1, 3), np.uint8), t, t / checkpoint.fps), row[:width], out[0].numpy())
    stream.flush()
    stream.settle()
    stream.last_heartbeat()
    return DetectorRecord(name, len(inputs), tuple(link.sent))


@exit_on_input_error
def main(argv: list[str] | None = None) -> int:
    p = ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    p.add_argument("--features", type=Path, required=True, help="the recognition-features folder")
    p.add_argument("--graph", type=Path, required=True)
    p.add_argument("--annotations", type=Path, required=True, help="the labels the features were extracted with")
    p.add_argument("--detectors", required=True, help="comma-separated checkpoints trained on that folder")
    p.add_argument("--thresholds", type=bounded_option(THRESHOLD, integer=False, listed=True),
                   default=[0.2, 0.3, 0.5, 0.7], help="probabilistic checker's alert thresholds")
    p.add_argument("--variants", type=bounded_option(Bound(0, 1000)), default=3,
                   help="mistaken versions per validation video (at most)")
    p.add_argument("--seed", type=seed_option, default=0, help="which mistaken versions are drawn")
    args = p.parse_args(argv)
    try:
        graph = load_graph(args.graph)
        labels = read_json(args.annotations, "annotation file")["annotations"]
        settings = [("binary", CheckerSettings("binary"))] + [
            (f"probabilistic {t}", CheckerSettings("probabilistic", float(t))) for t in args.thresholds]
        scores: dict[str, list[VideoScores]] = {name: [] for name, _ in settings}
        rng = np.random.default_rng(args.seed)
        for detector in args.detectors.split(","):
            model, checkpoint = load_detector(detector)
            fps = checkpoint.fps
            for video in checkpoint.info.get("validation_videos", []):
                features = np.load(args.features / f"rgb_{checkpoint.feature_extractor}" / f"{video}.npy")
                inputs = model_inputs(features, checkpoint.config.motion_lag)  # over the video as recorded
                segments = [(s["step_id"], round(s["start_time"] * fps), round(s["end_time"] * fps))
                            for s in labels[video]["segments"]]
                wrong = mistaken_orders([s for s, _, _ in segments], graph)
                picked = rng.permutation(len(wrong))[: args.variants]
                for order in [list(range(len(segments)))] + [wrong[k] for k in picked]:
                    rows, annotated = reassemble(inputs, segments, order, fps)
                    record = record_features(model, checkpoint, graph, rows, video)
                    version = EvalVideo(video, Path(f"{video}.npy"), annotated)
                    for name, checking in settings:
                        scores[name].append(score_video(check_record(record, version, graph, checking), graph))
    except (InputError, OSError, KeyError, ValueError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    print(f"{'checker':24s} {'versions':>8s} {'mistakes':>8s} {'alerts':>6s} {'correct':>7s} {'P':>6s} {'R':>6s} "
          f"{'F1':>6s} {'FA/ver':>6s} {'lat med s':>9s}")
    for name, _ in settings:
        summed, n = total(scores[name]), len(scores[name])
        g = summed.mistakes["graph"]
        pct = ["-" if x is None else f"{100 * x:.1f}" for x in (g.precision, g.recall, g.f1)]
        latency = f"{np.median(summed.latencies):.2f}" if summed.latencies else "-"
        fa = f"{(g.alerts - g.correct) / n:.2f}" if n else "-"
        print(f"{name:24s} {n:8d} {g.mistakes:8d} {g.alerts:6d} {g.correct:7d} {pct[0]:>6s} {pct[1]:>6s} {pct[2]:>6s} "
              f"{fa:>6s} {latency:>9s}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
