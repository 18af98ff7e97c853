"""Settings of a noisy-AND TGML training run (`NoisyAndConfig`), validated on construction.

Torch-free, like `tgml.learners.do.config`, so settings files can be checked before any training starts.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import ClassVar, Final

from graphs.common.options import MAX_EDGE_COST
from graphs.common.settings_files import EPOCHS, LEARNING_RATE, SEED, SHARE, Bound, check_settings

METHOD_NAME: Final = "noisy-and"


@dataclass(frozen=True)
class NoisyAndConfig:
    """Settings of one noisy-AND training run (see `tgml.learners.noisy_and.loss` for the model).

    Attributes:
        edge_cost: prior cost of an edge in nats (the prior log-odds against an edge): an edge is kept only if
            it raises the log-likelihood of the whole training set by more than this. 0 = plain maximum
            likelihood.
        noise: probability ``ρ`` that a position of an execution is a random choice among the steps still to do
            (a swapped step, a recognition slip) instead of a step whose pre-conditions are all done.
        cut: an edge ``j -> i`` enters the binary graph when ``θ[i, j] >= cut``: ``j`` must block ``i``
            almost always, not merely usually.
        epochs: full-batch Adam epochs.
        lr: Adam learning rate.
        seed: seeds the small random jitter of the initial scores.
        relaxed: apply the "relaxed" post-processing rule (a step whose pre-conditions are START and one other
            keeps START only), as the PREGO benchmark does for DO.
    """

    edge_cost: float = 0.0
    noise: float = 0.01
    cut: float = 0.9
    epochs: int = 150
    lr: float = 0.2
    seed: int = 42
    relaxed: bool = False

    # What each number may be (`check_settings`, docs/method.md's table).
    BOUNDS: ClassVar[Mapping[str, Bound]] = {
        "edge_cost": Bound(0, MAX_EDGE_COST), "noise": SHARE, "cut": Bound(0, 1, open_low=True, open_high=True),
        "epochs": EPOCHS, "lr": LEARNING_RATE, "seed": SEED,
    }

    def __post_init__(self) -> None:
        check_settings(self)
