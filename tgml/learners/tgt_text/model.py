"""The Task Graph Transformer (TGT) of Seminara et al., *Differentiable Task Graph Learning*, NeurIPS 2024.

Instead of learning the score matrix ``A`` directly (Direct Optimization), TGT predicts it from an embedding of
each key-step: a transformer encoder contextualises the step embeddings together with learned embeddings of the
auxiliary nodes (``β, S`` before the steps, ``E, γ`` after them: the reference node layout of docs/method.md), and
a relation head scores every ordered node pair ``(i, j)``; the masked row softmax of those scores is ``Z``, trained
with the TGML loss. A *distinctiveness* term keeps the encoded nodes apart: each node must recognise itself among
all nodes by scaled cosine similarity (a cross-entropy with the identity as labels), so that the encoder cannot
collapse similar step texts into one vector and give them the same pre-conditions.

Sized for a CPU: step embeddings are projected to a small width, and the relation head is a two-layer perceptron on
the pair ``[h_i, h_j]`` (its first layer computed as ``W_a h_i + W_b h_j``, so all ``N²`` pairs cost two ``N × d``
products and a broadcast sum).
"""

from __future__ import annotations

import numpy as np
import torch
from torch import nn
from torch.nn import functional as F

from tgml.learners.do.model import blocked_entries, contrast_nodes

AUXILIARY_BEFORE = 2  # β and S
AUXILIARY_AFTER = 2  # E and γ


def distinctiveness_loss(nodes: torch.Tensor, scale: float) -> torch.Tensor:
    """Each node must pick itself out of all nodes by scaled cosine similarity (Seminara et al. 2024, TGT).

    ``L_D = Σ_i −log softmax_j(s · cos(h_i, h_j))[i]``: the cross-entropy with identity labels, summed over nodes.

    Args:
        nodes: ``(N, d)`` encoded node vectors.
        scale: ``s``, the inverse temperature of the similarities.

    Returns:
        Scalar loss.
    """
    unit = F.normalize(nodes, p=2, dim=-1)
    logits = scale * (unit @ unit.T)  # (N, N)
    return F.cross_entropy(logits, torch.arange(nodes.shape[0], device=nodes.device), reduction="sum")


class TaskGraphTransformer(nn.Module):
    """Step text embeddings -> weighted task graph ``Z`` in the reference layout (``N = n + 4`` nodes).

    Args:
        text_dim: width of the step embeddings.
        n_steps: number of key-steps ``n``.
        width: model width the embeddings are projected to.
        heads: attention heads of the encoder.
        layers: encoder layers.
        feedforward: hidden width of the encoder's feed-forward block.
        relation_hidden: hidden width of the relation head.
        dropout: dropout of the encoder (training only).
    """

    blocked: torch.Tensor  # (N, N) bool: entries masked before the softmax (docs/method.md reference layout)
    contrast: torch.Tensor  # (N,) float 0/1: nodes the contrastive term ranges over

    def __init__(self, text_dim: int, n_steps: int, width: int = 64, heads: int = 4, layers: int = 1,
                 feedforward: int = 128, relation_hidden: int = 64, dropout: float = 0.1) -> None:
        super().__init__()
        self.n_steps = n_steps
        self.project = nn.Linear(text_dim, width)
        self.before = nn.Parameter(0.02 * torch.randn(AUXILIARY_BEFORE, width))  # β, S
        self.after = nn.Parameter(0.02 * torch.randn(AUXILIARY_AFTER, width))  # E, γ
        layer = nn.TransformerEncoderLayer(width, heads, feedforward, dropout, batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)
        self.row_part = nn.Linear(width, relation_hidden)  # W_a h_i + b: the dependent step i
        self.column_part = nn.Linear(width, relation_hidden, bias=False)  # W_b h_j: its candidate pre-condition j
        self.score = nn.Linear(relation_hidden, 1)
        self.register_buffer("blocked", blocked_entries(n_steps))
        self.register_buffer("contrast", contrast_nodes(n_steps))

    def encode(self, text: torch.Tensor) -> torch.Tensor:
        """Contextualised node vectors ``(N, width)`` in the order ``β, S, K_1..K_n, E, γ``.

        Args:
            text: ``(n, text_dim)`` step embeddings in matrix order.
        """
        nodes = torch.cat([self.before, self.project(text), self.after])  # (N, width)
        return self.encoder(nodes.unsqueeze(0)).squeeze(0)

    def scores(self, nodes: torch.Tensor) -> torch.Tensor:
        """Relation head: ``A[i, j] = w · relu(W_a h_i + W_b h_j + b) + c`` for every pair at once. ``(N, N)``."""
        hidden = torch.relu(self.row_part(nodes)[:, None, :] + self.column_part(nodes)[None, :, :])  # (N, N, H)
        return self.score(hidden).squeeze(-1)

    def adjacency(self, nodes: torch.Tensor) -> torch.Tensor:
        """``Z``: row softmax of the scores over the allowed entries; the fully masked β row is all zeros."""
        logits = self.scores(nodes).masked_fill(self.blocked, float("-inf"))
        live = ~self.blocked.all(dim=1, keepdim=True)  # (N, 1)
        # A fully masked row would give NaN: give it finite logits, then zero it.
        return torch.softmax(logits.masked_fill(~live, 0.0), dim=1) * live

    def forward(self, text: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """``(Z (N, N), encoded nodes (N, width))`` of the step embeddings ``(n, text_dim)``."""
        nodes = self.encode(text)
        return self.adjacency(nodes), nodes

    @torch.no_grad()
    def graph_weights(self, text: torch.Tensor) -> np.ndarray:
        """The ``(n+2)×(n+2)`` weighted task graph (order S, K_1..K_n, E) as float64 numpy, in eval mode."""
        was_training = self.training
        self.eval()
        z, _ = self(text)
        self.train(was_training)
        return z[1:-1, 1:-1].double().numpy().copy()
