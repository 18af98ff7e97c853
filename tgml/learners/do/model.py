"""Direct Optimization (DO) of a task graph: the adjacency scores are the parameters (docs/method.md).

Node layout of the published reference (needed to reproduce its figures): ``N = n + 4`` nodes
``β, S, K_1..K_n, E, γ``; every training sequence is ``<β, S, y…, E, γ>`` and contributes loss terms at
S..E. ``Z = softmax(A)`` row-wise over the entries the mask allows; after training the ``S..E`` block is the
``(n+2)×(n+2)`` task graph.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch
from torch import nn

from tgml.loss import tgml_loss

BETA_NODE = 0
START_NODE = 1


def n_nodes(n_steps: int) -> int:
    """Number of nodes ``N = n + 4`` of the reference layout."""
    return n_steps + 4


def blocked_entries(n_steps: int) -> torch.Tensor:
    """Entries of ``A`` masked to −∞ before the softmax (the reference node layout, docs/method.md).

    Args:
        n_steps: number of key-steps ``n``.

    Returns:
        bool ``(N, N)``: row β; row S except ``S → β``; columns E and γ (nothing depends on them); row γ
        except ``γ → E``; the diagonal.
    """
    size = n_nodes(n_steps)
    end, gamma = size - 2, size - 1
    blocked = torch.zeros(size, size, dtype=torch.bool)
    blocked[:, end:] = True
    blocked[BETA_NODE] = True
    blocked[START_NODE] = True
    blocked[START_NODE, BETA_NODE] = False
    blocked[gamma] = True
    blocked[gamma, end] = False
    blocked.fill_diagonal_(True)
    return blocked


def contrast_nodes(n_steps: int) -> torch.Tensor:
    """Nodes that may be in ``J̄_t``: S, K_1..K_n, E (not β, not γ). float ``(N,)``."""
    size = n_nodes(n_steps)
    contrast = torch.ones(size)
    contrast[BETA_NODE] = 0.0
    contrast[size - 1] = 0.0
    return contrast


def wrap(step_indices: np.ndarray | Sequence[int], n_steps: int) -> list[int]:
    """``<β, S, y…, E, γ>`` for a sequence of key-step positions ``0..n-1`` (taxonomy order)."""
    return [BETA_NODE, START_NODE, *(int(i) + 2 for i in step_indices), n_steps + 2, n_steps + 3]


class DirectOptimization(nn.Module):
    """The DO model: a free score matrix ``A`` whose masked row-softmax is the weighted task graph.

    Args:
        n_steps: number of key-steps ``n`` of the taxonomy.
        generator: torch generator for the uniform [0, 1) initialisation (seeded by the trainer).
    """

    blocked: torch.Tensor  # (N, N) bool: entries masked to -inf (docs/method.md, "Node layout of the reference")
    live_rows: torch.Tensor  # (N, 1) bool: rows with at least one allowed entry
    contrast: torch.Tensor  # (N,) float 0/1: nodes the contrastive term ranges over

    def __init__(self, n_steps: int, generator: torch.Generator | None = None) -> None:
        super().__init__()
        self.n_steps = n_steps
        size = n_nodes(n_steps)
        self.scores = nn.Parameter(torch.rand(size, size, generator=generator))  # A: (N, N)
        blocked = blocked_entries(n_steps)
        self.register_buffer("blocked", blocked)
        self.register_buffer("live_rows", (~blocked).any(dim=1, keepdim=True))  # (N, 1); row β has no entry
        self.register_buffer("contrast", contrast_nodes(n_steps))

    def adjacency(self) -> torch.Tensor:
        """``Z = softmax(A)`` row-wise over allowed entries; a fully masked row is all zeros. ``(N, N)``."""
        # A fully masked row would give NaN; give it finite logits, then zero it.
        logits = self.scores.masked_fill(self.blocked & self.live_rows, float("-inf"))
        return torch.softmax(logits, dim=1) * self.live_rows

    def forward(
        self,
        observed: torch.Tensor | None = None,
        targets: torch.Tensor | None = None,
        weights: torch.Tensor | None = None,
        beta: float = 0.005,
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """The weighted graph and, given loss rows, the TGML loss.

        Args:
            observed: ``(T, N)`` observed-before matrix ``M`` (reference layout).
            targets: int64 ``(T,)`` node at each row.
            weights: optional ``(T,)`` row multiplicities.
            beta: contrastive weight.

        Returns:
            ``(Z, loss)``: ``Z`` is ``(N, N)``; ``loss`` is None without rows.
        """
        z = self.adjacency()
        if observed is None or targets is None:
            return z, None
        return z, tgml_loss(z, observed, targets, self.contrast, beta, weights)

    @torch.no_grad()
    def graph_weights(self) -> np.ndarray:
        """The ``(n+2)×(n+2)`` weighted task graph (order S, K_1..K_n, E) as float64 numpy."""
        return self.adjacency()[1:-1, 1:-1].double().numpy().copy()
