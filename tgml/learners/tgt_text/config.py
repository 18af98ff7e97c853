"""Settings of a TGT-text training run (`TgtTextConfig`), validated on construction.

Torch-free, like `tgml.learners.noisy_and.config`, so settings files and benchmark tables can be checked before any
training starts (and without the ``text`` extra).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import ClassVar, Final

from graphs.common.options import MAX_EPOCHS
from graphs.common.settings_files import (
    EPOCHS,
    LEARNING_RATE,
    LOSS_WEIGHT,
    SEED,
    SHARE,
    WIDTH,
    Bound,
    check_settings,
    check_values,
)
from tgml.learners.do.config import EDGE_THRESHOLDS
from tgml.text_embeddings import DEFAULT_ENCODER

METHOD_NAME: Final = "tgt-text"


@dataclass(frozen=True)
class TgtTextConfig:
    """Settings of one TGT-text training run, validated on construction.

    Attributes:
        epochs: full-batch Adam epochs (no early stopping: the last epoch's graph is kept, as in the paper).
        lr: Adam learning rate.
        width: model width the step embeddings are projected to.
        heads: attention heads of the encoder (must divide ``width``).
        layers: transformer encoder layers.
        feedforward: hidden width of the encoder's feed-forward block.
        relation_hidden: hidden width of the pair relation head.
        dropout: encoder dropout during training.
        beta_start: contrastive weight ``β`` at the first epoch (the paper: 1.0).
        beta_end: the value ``β`` is moved towards (the paper: 0.05).
        beta_updates: how many times ``β`` moves during training (the paper: every 100 of 3000 epochs, 30).
        distinctiveness: weight of the distinctiveness term (0 turns it off).
        similarity_scale: inverse temperature of its cosine similarities (the paper: e^0.9).
        edge_threshold: weight cut of the post-processing, as for DO (``"1/n"``, ``"1/(n+2)"``, ``"1/N"``).
        relaxed: apply the relaxed post-processing rule.
        encoder: sentence encoder: ``"all-MiniLM-L6-v2"`` (the ``text`` extra) or a sentence-transformers folder.
        seed: seeds the initialisation and dropout.
    """

    epochs: int = 500
    lr: float = 0.001
    width: int = 64
    heads: int = 4
    layers: int = 1
    feedforward: int = 128
    relation_hidden: int = 64
    dropout: float = 0.1
    beta_start: float = 1.0
    beta_end: float = 0.05
    beta_updates: int = 30
    distinctiveness: float = 1.0
    similarity_scale: float = math.exp(0.9)
    edge_threshold: str = "1/(n+2)"
    relaxed: bool = False
    encoder: str = DEFAULT_ENCODER
    seed: int = 42

    # What each number (and choice) may be (`check_settings`, docs/method.md's table). The paper's model has one
    # layer; 64 is far beyond what its few dozen step names can train (9223372036854775807 hung).
    BOUNDS: ClassVar[Mapping[str, Bound | tuple[str, ...]]] = {
        "epochs": EPOCHS, "lr": LEARNING_RATE, "width": WIDTH, "heads": WIDTH, "layers": Bound(1, 64),
        "feedforward": WIDTH, "relation_hidden": WIDTH, "dropout": SHARE, "beta_start": LOSS_WEIGHT,
        "beta_end": LOSS_WEIGHT, "beta_updates": Bound(0, MAX_EPOCHS), "distinctiveness": LOSS_WEIGHT,
        # An inverse temperature of cosines in [-1, 1] (e^0.9 in the paper); the cross-entropy is stable at any scale,
        # but past 100 the softmax is one-hot and the loss trains nothing.
        "similarity_scale": Bound(0, 100, open_low=True), "edge_threshold": tuple(EDGE_THRESHOLDS), "seed": SEED,
    }

    def __post_init__(self) -> None:
        check_settings(self)
        check_values(self, [
            ("heads", self.width % self.heads == 0, "an integer >= 1 that divides width"),
            ("encoder", bool(self.encoder.strip()), "a model name or folder"),
        ])

    def threshold_steps(self, n_steps: int) -> int:
        """The ``n`` of the ``1/n`` edge threshold for a taxonomy of ``n_steps`` key-steps."""
        return n_steps + EDGE_THRESHOLDS[self.edge_threshold]
