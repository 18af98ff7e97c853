"""Does the done head read the table, or count the steps it saw? Measured on validation videos played out of order.

Usage::

    python benchmarks/done_head_scene.py --features runs/hard/features \\
        --detectors runs/hard/detector-seed0.pt,runs/hard/detector-seed1.pt [--draws 10]

The probabilistic checker asks the done head, at the start of each step, whether each pre-condition has been done.
On a correct execution two cues answer alike: the table (the objects a done step leaves) and the memory of the steps
the detector recognised. On a real mistake they part wherever the detector missed or invented a step, and the table
is the one to trust. This script separates them on training data only: each detector's own validation videos
(``evidence.videos`` of its checkpoint) are reassembled from their key-step pieces in ``--draws`` random orders
(`recognition.augment.order_positions`), so a piece keeps the table it was filmed on while the order of the actions
changes. At the frame before every key-step start, for every key-step, the done head's output is compared with the
*table's* answer (the step was done before that frame in the recording):

- ``agree``: pairs where the table and the played order give the same answer; accuracy at 0.5;
- ``disagree``: pairs where they differ; accuracy at 0.5 against the table (1: reads the table; 0: counts steps);
- ``AP``: average precision of the done outputs over all pairs, against the table.

A piece boundary is a jump of the table that real video never shows, so this measures the done head, not the
alerts; `benchmarks/validation_mistakes.py` scores alerts on the same reassembled videos, with the played order as
the truth.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import torch

from graphs.common.command_line import ArgumentParser
from graphs.common.errors import InputError, exit_on_input_error
from graphs.common.options import seed_option
from graphs.common.settings_files import COUNT, bounded_option
from recognition.augment import order_positions
from recognition.checkpoint import load_detector
from recognition.feature_folders import FeatureConfig, load_video
from recognition.metrics import average_precision
from recognition.model import done_targets, output_probabilities
from recognition.motion import model_inputs


def pairs_at_step_starts(labels: np.ndarray, background: Sequence[int] = (0,)) -> np.ndarray:
    """The frames just before each key-step run begins (the moments the checker reads the done head), ``(S,)``."""
    key = ~np.isin(labels, np.asarray(background))
    starts = np.flatnonzero(key & np.r_[True, labels[1:] != labels[:-1]])
    return starts[starts > 0] - 1


def scene_reading(
    done: np.ndarray, table: np.ndarray, played: np.ndarray, steps: Sequence[int]
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Split done-head outputs into the pairs where the table and the played order agree and where they differ.

    Args:
        done: ``(S, C)`` done-head probabilities at the chosen frames.
        table: ``(S, C)`` 0/1, done in the recording before that frame.
        played: ``(S, C)`` 0/1, done in the played order before that frame.
        steps: the key-step classes to count.

    Returns:
        ``(right (N,), agree (N,), truth (N,))`` over every frame and step: whether the output at 0.5 matches the
        table, whether table and order agree there, and the table's answer.
    """
    cols = list(steps)
    right = ((done[:, cols] > 0.5) == (table[:, cols] > 0.5)).ravel()
    agree = (table[:, cols] == played[:, cols]).ravel()
    return right, agree, table[:, cols].ravel() > 0.5


def measure(detector: Path, features: Path, draws: int, seed: int) -> dict[str, float]:
    """The three figures of one detector on its own validation videos."""
    model, checkpoint = load_detector(detector)
    model.eval()
    if checkpoint.evidence is None or not checkpoint.evidence.videos:
        raise InputError(f"{detector}: no validation videos recorded (trained without a validation split)")
    if not model.config.done_head:
        raise InputError(f"{detector}: this detector has no done head")
    classes = model.config.num_classes
    background = tuple(c for c, s in enumerate(checkpoint.class_step_ids) if s is None)
    steps = [c for c in range(classes) if c not in background]
    config = FeatureConfig(rgb=f"rgb_{checkpoint.feature_extractor}", extractor=checkpoint.feature_extractor)
    rng = np.random.default_rng(seed)
    rights, agrees, truths, scores = [], [], [], []
    for name in checkpoint.evidence.videos:
        video = load_video(features, name, config)
        labels = video.targets.argmax(axis=1)
        table = done_targets(video.targets, background)
        inputs = model_inputs(video.features, model.config.motion_lag)
        for _ in range(draws):
            rows = order_positions(labels, [len(labels)], rng, 1.0, background)
            with torch.inference_mode():  # motion inputs, if any, as recorded: each piece keeps its own change
                logits, _ = model(torch.from_numpy(inputs[rows])[None])
            done = output_probabilities(logits[0], classes).numpy()[:, classes:]
            at = pairs_at_step_starts(labels[rows], background)
            right, agree, truth = scene_reading(done[at], table[rows][at], done_targets(video.targets[rows],
                                                                                           background)[at], steps)
            rights.append(right)
            agrees.append(agree)
            truths.append(truth)
            scores.append(done[at][:, steps].ravel())
    right, agree, truth = np.concatenate(rights), np.concatenate(agrees), np.concatenate(truths)
    ap = average_precision(np.concatenate(scores)[:, None], truth[:, None])
    return {"agree": float(right[agree].mean()), "disagree": float(right[~agree].mean()),
            "agree_pairs": int(agree.sum()), "disagree_pairs": int((~agree).sum()), "ap": float(np.ravel(ap)[0])}


@exit_on_input_error
def main(argv: Sequence[str] | None = None) -> int:
    """Print the figures of each detector and their mean."""
    parser = ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--features", required=True, help="the feature folder the detectors were trained on")
    parser.add_argument("--detectors", required=True, help="checkpoints, comma-separated")
    parser.add_argument("--draws", type=bounded_option(COUNT), default=10,
                        help="random orders per validation video (default 10)")
    parser.add_argument("--seed", type=seed_option, default=0, help="seed of the orders (default 0)")
    args = parser.parse_args(argv)
    rows = []
    try:
        for path in [Path(p) for p in args.detectors.split(",") if p]:
            rows.append(measure(path, Path(args.features), args.draws, args.seed))
            r = rows[-1]
            print(f"{path.name:28} agree {100 * r['agree']:5.1f} % ({r['agree_pairs']} pairs)  "
                  f"disagree {100 * r['disagree']:5.1f} % ({r['disagree_pairs']} pairs)  AP {100 * r['ap']:5.1f}")
    except InputError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    if len(rows) > 1:
        mean = {k: float(np.mean([r[k] for r in rows])) for k in ("agree", "disagree", "ap")}
        print(f"{'mean':28} agree {100 * mean['agree']:5.1f} %{'':13}disagree {100 * mean['disagree']:5.1f} %"
              f"{'':14}AP {100 * mean['ap']:5.1f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
