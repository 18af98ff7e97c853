"""The stages of the live path whose latencies are reported, and the window that averages them per stream.

A frame's way from the camera to an alert, in consecutive stages (each the time a frame or message spends in it):

- ``decode``: from the frame's arrival at the reader (a live source's grab; a file frame's due time, or the start of
  its decoding when read as fast as possible) to the model loop taking it: conversion, resizing and the wait for the
  model;
- ``features``: the feature extractor (on the whole batch the frame went in with);
- ``detector``: the MiniROAD step (likewise);
- ``segmenter``: the online segmenter and the detector's evidence (not sending what they confirmed);
- ``hop``: a detector message from its ``timestamp`` to the checker applying it (the wire and the checker's queue);
- ``alert_out``: from the checker receiving what caused an alert (or a retraction) to the alert leaving it.

The first four are measured in the detector and travel in its heartbeats (their means since the previous one), the
last two in the checker; the checker's `Status` carries all six per stream (``<stage>_ms``), as the metrics endpoint
carries their histograms (`streaming.metrics`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Final

DETECTOR_STAGES: Final = ("decode", "features", "detector", "segmenter")
CHECKER_STAGES: Final = ("hop", "alert_out")
STAGES: Final = DETECTOR_STAGES + CHECKER_STAGES


def latency_field(stage: str) -> str:
    """The message field that carries a stage's latency in milliseconds (``decode`` -> ``decode_ms``)."""
    return f"{stage}_ms"


class StageWindow:
    """Each stage's seconds summed since the last `take`, so that a heartbeat reports their means.

    Args:
        stages: the stages it accepts.
        observe: also called with ``(stage, seconds)`` for every value (a metrics histogram); None: nothing.
    """

    def __init__(
        self, stages: tuple[str, ...] = DETECTOR_STAGES, observe: Callable[[str, float], None] | None = None
    ) -> None:
        self.stages = stages
        self.observe = observe
        self._sums = dict.fromkeys(stages, 0.0)
        self._counts = dict.fromkeys(stages, 0)

    def add(self, stage: str, seconds: float) -> None:
        """Count one frame's time in a stage (a negative time, from clocks that disagree, counts as 0)."""
        seconds = max(seconds, 0.0)
        self._sums[stage] += seconds
        self._counts[stage] += 1
        if self.observe is not None:
            self.observe(stage, seconds)

    def take(self) -> dict[str, float]:
        """The mean milliseconds of each stage since the last call (0 for a stage without a value), and start over.

        Returns:
            Message field name (`latency_field`) -> mean milliseconds.
        """
        means = {latency_field(s): (1000.0 * self._sums[s] / self._counts[s] if self._counts[s] else 0.0)
                 for s in self.stages}  # fmt: skip
        self._sums = dict.fromkeys(self.stages, 0.0)
        self._counts = dict.fromkeys(self.stages, 0)
        return means
