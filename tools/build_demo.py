"""Rebuild the demo artefacts bundled in ``streaming/demo/``: ``demo_graph.json`` and ``demo_detector.pt``.

Usage::

    python tools/build_demo.py [--out streaming/demo] [--work /tmp/demo-build] [--only graph|detector]

A training tool, kept out of the ``streaming`` package: ``stream-detect`` only reads what it writes.

1. Graph: `N_GRAPH_EXECUTIONS` correct executions of the demo procedure are sampled (random
   linear extensions of its partial order), written in the datasets' annotation format
   (``demo_annotations.json``), and the task graph is learned from it as ``tgml train`` does by
   default (the noisy-AND learner, which keeps both pre-conditions of ``pour_water``).
2. Detector: executions in random orders (so the detector learns to see steps, not to expect an
   order) are rendered to MP4 with OpenCV and labelled in the same annotation format; then the user's own path
   runs on them: ``recognition-features`` (``efficientnet-lite0`` features at `DEMO_FPS`) and
   ``recognition-train``'s trainer with ``demo_detector.toml``. The segmenter settings that suit the demo's step
   lengths (`DEMO_SEGMENTER`) are stored in the checkpoint's ``info``.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
from rich.console import Console
from rich.progress import Progress

from graphs.common.command_line import ArgumentParser, plain_summary
from graphs.common.errors import exit_on_input_error
from graphs.common.files import check_output, write_text
from graphs.task_graph import save_graph
from recognition.checkpoint import load_detector, save_detector
from recognition.train import run_training
from streaming.demo.paths import DEMO_DIR
from streaming.demo.procedure import SCENARIO, STEP_IDS, annotation_file, sample_correct_order
from streaming.demo.synthetic_video import RenderConfig, segments_of, timeline, write_video
from streaming.offline.features import FeatureExtractionConfig, extract_feature_folder
from tgml.learners.registry import DEFAULT_LEARNER, learner
from tgml.learners.result import learn_from_annotations

N_GRAPH_EXECUTIONS = 40
N_TRAIN_VIDEOS = 12
N_TEST_VIDEOS = 3
GRAPH_SEED = 7
EXTRACTOR = "efficientnet-lite0"
# Features per second of the demo detector: a demo key-step (2.5-3.5 s) spans 12-17 of them, and on 2 CPU cores
# the backbone keeps this rate live with room to spare (benchmarks/stream_latency.py).
DEMO_FPS = 5.0
# Demo key-steps last 2.5-3.5 s: a run under 0.3 s (one frame at 5 fps) is a cross-fade artefact, never a step.
DEMO_SEGMENTER = {"min_run": 0.3, "min_duration": 0.6, "max_delay": 2.0}


def build_graph(out: Path) -> Path:
    """Sample correct executions, write their annotation file, learn the demo graph with TGML.

    Args:
        out: folder receiving ``demo_annotations.json`` and ``demo_graph.json``.

    Returns:
        The graph file written.
    """
    rng = np.random.default_rng(GRAPH_SEED)
    config = RenderConfig()
    executions = {}
    for k in range(N_GRAPH_EXECUTIONS):
        order = sample_correct_order(rng)
        executions[f"demo_{k:03d}"] = segments_of(timeline(order, rng, config), config.fps)
    annotations_path = out / "demo_annotations.json"  # shipped: `tgml train` can be re-run on it by hand
    write_text(annotations_path, json.dumps(annotation_file(executions)), "demo annotations")
    entry = learner(DEFAULT_LEARNER)  # as `tgml train`
    result = learn_from_annotations(entry.learn, annotations_path, SCENARIO, entry.config(None), progress=True)
    path = out / "demo_graph.json"
    save_graph(result.graph, path)
    return path


def build_features(work: Path, console: Console) -> Path:
    """Render labelled training/test videos, then extract them as ``recognition-features`` does.

    Args:
        work: scratch folder (videos, their annotation file and the feature folder go below it).
        console: for progress.

    Returns:
        The feature folder.
    """
    config = RenderConfig()
    rng = np.random.default_rng(123)
    names = [f"train_{k:02d}" for k in range(N_TRAIN_VIDEOS)] + [f"test_{k:02d}" for k in range(N_TEST_VIDEOS)]
    executions = {}
    with Progress(console=console) as bar:
        for k, name in enumerate(bar.track(names, description="rendering demo videos")):
            order = tuple(int(s) for s in rng.permutation(STEP_IDS))  # any order: see steps, not orders
            executions[name] = write_video(work / "videos" / f"{name}.mp4", order, seed=k, config=config)
    labels = work / "detector_annotations.json"
    write_text(labels, json.dumps(annotation_file(executions)), "detector annotations")
    features = FeatureExtractionConfig(
        videos=str(work / "videos"),
        annotations=str(labels),
        out=str(work / "features"),
        extractor=EXTRACTOR,
        fps=DEMO_FPS,
        test_videos=tuple(names[N_TRAIN_VIDEOS:]),
    )
    return extract_feature_folder(features).folder


def build_detector(out: Path, work: Path, console: Console) -> Path:
    """Train the demo detector with the project's MiniROAD trainer.

    Args:
        out: folder receiving ``demo_detector.pt``.
        work: scratch folder.
        console: for progress and the results table.

    Returns:
        The checkpoint written.
    """
    features = build_features(work, console)
    path = out / "demo_detector.pt"
    run_training(features, DEMO_DIR / "demo_detector.toml", path, console=console)
    add_segmenter_settings(path, DEMO_SEGMENTER)
    return path


def add_segmenter_settings(path: Path, settings: dict[str, float]) -> None:
    """Record in a checkpoint's ``info`` how its output should be segmented (read by the live detector).

    Args:
        path: detector checkpoint, rewritten in place.
        settings: `recognition.segmenter.SegmenterConfig` fields other than ``fps``.
    """
    model, ckpt = load_detector(path)
    info = {**ckpt.info, "segmenter": dict(settings)}
    save_detector(path, model, ckpt.class_names, ckpt.class_step_ids, ckpt.feature_extractor, ckpt.fps, info,
                  ckpt.scenario or SCENARIO, ckpt.evidence)


@exit_on_input_error
def main(argv: list[str] | None = None) -> int:
    """Entry point (see the module docstring)."""
    parser = ArgumentParser(prog="python tools/build_demo.py", description=plain_summary(__doc__))
    parser.add_argument("--out", default=str(DEMO_DIR), help="where the demo graph and detector go")
    parser.add_argument("--work", default="/tmp/demo-build", help="scratch folder for videos and features")
    parser.add_argument("--only", choices=("graph", "detector"), help="rebuild one of the two")
    args = parser.parse_args(argv)
    console = Console(stderr=True)
    # Both folders are checked before the first video is rendered: a bad path must not cost minutes of work.
    out = check_output(args.out, "output folder", folder=True, option="--out")
    work = check_output(args.work, "scratch folder", folder=True, option="--work")
    if args.only in (None, "graph"):
        console.print(f"graph written to {build_graph(out)}")
    if args.only in (None, "detector"):
        console.print(f"detector written to {build_detector(out, work, console)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
