"""What the detector's validation videos say about how far its detections can be trusted, stored in the checkpoint.

`calibrate_evidence` is called once by `recognition.train.run_training`, after training and before the checkpoint is
written, with the kept model's causal per-frame probabilities on every validation video. Its result goes into the
checkpoint's ``evidence`` field (`recognition.checkpoint.DetectorCheckpoint.evidence`), where the live checker reads
it.

Placeholder: the lead engineer fills this module with the probabilistic checker's calibration (per-step miss and
false-detection rates measured on the validation split, issue 23 section 2). Until then it measures nothing and the
checkpoint holds no evidence.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from recognition.segmenter import SegmenterConfig


def calibrate_evidence(
    validation: Mapping[str, tuple[np.ndarray, np.ndarray]],
    class_step_ids: Sequence[int | None],
    fps: float,
    segmenter: SegmenterConfig,
) -> dict[str, Any] | None:
    """Measure the detector's reliability on its validation videos (placeholder: the lead fills it).

    Args:
        validation: video name -> ``(probs (T, C), targets (T, C))``: the kept model's causal per-frame class
            probabilities (GRU from zeros at the video's first frame, as live) and the one-hot targets.
        class_step_ids: task-graph step id per class, None for background.
        fps: feature frames per second.
        segmenter: the segmenter settings the checkpoint will run with.

    Returns:
        A JSON-able dict of finite numbers, strings, lists and objects saved as the checkpoint's ``evidence``, or
        None when nothing was measured (no validation split, or this placeholder).
    """
    return None
