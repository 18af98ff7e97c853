"""Settings of a noisy-AND TGML training run (`NoisyAndConfig`), validated on construction.

Torch-free, like `tgml.train_config`, so settings files can be checked before any training starts.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Final

from graphs.errors import InputError
from graphs.options import SEED_RULE, is_seed
from graphs.settings_files import check_field_types, check_values, field_names, learner_config, load_config_file
from tgml.train_config import TrainConfig

METHOD_NAME: Final = "noisy-and"


@dataclass(frozen=True)
class NoisyAndConfig:
    """Settings of one noisy-AND training run (see `tgml.noisy_and_loss` for the model).

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

    def __post_init__(self) -> None:
        check_field_types(self)
        checks = [
            ("edge_cost", math.isfinite(self.edge_cost) and self.edge_cost >= 0, "a finite number >= 0"),
            ("noise", 0 <= self.noise < 1, "a number in [0, 1)"),
            ("cut", 0 < self.cut < 1, "a number in (0, 1)"),
            ("epochs", self.epochs >= 1, "an integer >= 1"),
            ("lr", math.isfinite(self.lr) and self.lr > 0, "a finite number > 0"),
            ("seed", is_seed(self.seed), SEED_RULE),
        ]
        check_values(self, checks)

    def replace(self, **changes: Any) -> NoisyAndConfig:
        """A copy with some fields changed (validated again)."""
        return NoisyAndConfig(**{**asdict(self), **changes})


SETTING_KEYS: Final = field_names(NoisyAndConfig) - {"seed"}


def noisy_and_config(settings: Mapping[str, Any], seed: int, epochs: int | None = None) -> NoisyAndConfig:
    """The config of a ``[noisy-and]`` settings table (its keys are `SETTING_KEYS`; `learner_config`)."""
    return learner_config(NoisyAndConfig, "noisy-and", SETTING_KEYS, settings, seed, epochs)


def load_noisy_and_config(path: str | Path, base: NoisyAndConfig | None = None, **overrides: Any) -> NoisyAndConfig:
    """Read a settings file of `NoisyAndConfig` fields (e.g. ``configs/noisy-and-epic-tent-o.toml``), apply overrides.

    Args:
        path: TOML (or YAML) file with top-level keys named like the fields.
        base: values of the fields the file does not set (default: the defaults).
        overrides: field values that win over the file (None values are ignored).

    Returns:
        The validated config; errors name the file.
    """
    return load_config_file(NoisyAndConfig, path, asdict(base or NoisyAndConfig()), overrides)


# Settings only one of the two learners has (flags of `tgml train`, or keys of its --config file).
DO_ONLY_SETTINGS: Final = field_names(TrainConfig) - field_names(NoisyAndConfig)
NOISY_AND_ONLY_SETTINGS: Final = field_names(NoisyAndConfig) - field_names(TrainConfig)
LEARNER_METHODS: Final = (METHOD_NAME, "do")


def resolve_method(method: str | None, given: Iterable[str]) -> str:
    """The learner of a ``tgml train`` run: the one asked for, else the one the given settings belong to.

    Without an explicit method, a Direct Optimization setting (``beta``, ``augment``, ``early_stop``...) selects
    ``do``, so DO command lines keep working; otherwise the noisy-AND learner is used.

    Args:
        method: ``"noisy-and"``, ``"do"`` or None.
        given: names of the settings given (flags and config-file keys).

    Returns:
        ``"noisy-and"`` or ``"do"``.
    """
    given = set(given)
    do_only = sorted(given & DO_ONLY_SETTINGS)
    and_only = sorted(given & NOISY_AND_ONLY_SETTINGS)
    if method is not None and method not in LEARNER_METHODS:
        raise InputError(f"method {method!r}: expected one of {', '.join(LEARNER_METHODS)}")
    if method == "do" and and_only:
        raise InputError(f"setting {and_only[0]!r} belongs to the {METHOD_NAME} learner, not to --method do")
    if method == METHOD_NAME and do_only:
        raise InputError(f"setting {do_only[0]!r} belongs to Direct Optimization: use --method do")
    if method is not None:
        return method
    if do_only and and_only:
        raise InputError(f"settings {do_only[0]!r} (Direct Optimization) and {and_only[0]!r} ({METHOD_NAME}) "
                         "belong to different learners")
    return "do" if do_only else METHOD_NAME
