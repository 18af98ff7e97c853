"""Settings of a TGT-text training run (`TgtTextConfig`), validated on construction.

Torch-free, like `tgml.learners.noisy_and.config`, so settings files and benchmark tables can be checked before any
training starts (and without the ``text`` extra).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, fields
from typing import Final

from graphs.common.errors import InputError
from graphs.common.options import EPOCHS_RULE, LEARNING_RATE_RULE, MAX_EPOCHS, SEED_RULE, is_learning_rate, is_seed
from graphs.common.settings_files import as_written, check_field_types, check_values
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

    def __post_init__(self) -> None:
        check_field_types(self)
        finite = all(math.isfinite(getattr(self, f.name)) for f in fields(self) if str(f.type) == "float")
        checks = [
            ("epochs", 1 <= self.epochs <= MAX_EPOCHS, EPOCHS_RULE),
            ("lr", finite and is_learning_rate(self.lr), LEARNING_RATE_RULE),
            ("width", self.width >= 1, "an integer >= 1"),
            ("heads", self.heads >= 1 and self.width % self.heads == 0, "an integer >= 1 that divides width"),
            ("layers", self.layers >= 1, "an integer >= 1"),
            ("feedforward", self.feedforward >= 1, "an integer >= 1"),
            ("relation_hidden", self.relation_hidden >= 1, "an integer >= 1"),
            ("dropout", 0 <= self.dropout < 1, "a number in [0, 1)"),
            ("beta_start", finite and self.beta_start >= 0, "a finite number >= 0"),
            ("beta_end", finite and self.beta_end >= 0, "a finite number >= 0"),
            ("beta_updates", self.beta_updates >= 0, "an integer >= 0"),
            ("distinctiveness", finite and self.distinctiveness >= 0, "a finite number >= 0"),
            ("similarity_scale", finite and self.similarity_scale > 0, "a finite number > 0"),
            ("encoder", bool(self.encoder.strip()), "a model name or folder"),
            ("seed", is_seed(self.seed), SEED_RULE),
        ]
        check_values(self, checks)
        if self.edge_threshold not in EDGE_THRESHOLDS:
            expected = ", ".join(as_written(k) for k in EDGE_THRESHOLDS)
            raise InputError(f"TgtTextConfig.edge_threshold = {as_written(self.edge_threshold)}"
                             f": expected one of {expected}")

    def threshold_steps(self, n_steps: int) -> int:
        """The ``n`` of the ``1/n`` edge threshold for a taxonomy of ``n_steps`` key-steps."""
        return n_steps + EDGE_THRESHOLDS[self.edge_threshold]
