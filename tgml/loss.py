"""The TGML loss (Seminara et al. 2024; docs/method.md), vectorised over every position of every sequence.

With ``M`` the 0/1 "observed-before" matrix (one row per position, ``M[t, j] = 1`` iff ``j ∈ J_t``) and
``F = M Zᵀ`` (``F[t, h] = Σ_j Z[h, j] M[t, j]``)::

    L = − Σ_t w_t ( log F[t, y_t]  −  β · log Σ_h c_h (1 − M[t, h]) F[t, h] )

where ``c`` selects the nodes allowed in ``J̄_t`` and ``w_t`` counts how many times a row occurs in the
training set (identical rows are merged). ``eps`` is added to ``Z`` before the products so no log sees 0.
"""

from __future__ import annotations

import torch

EPS = 1e-6


def tgml_loss(
    z: torch.Tensor,
    observed: torch.Tensor,
    targets: torch.Tensor,
    contrast: torch.Tensor,
    beta: float,
    weights: torch.Tensor | None = None,
    eps: float = EPS,
) -> torch.Tensor:
    """Negative TGML log-likelihood of all rows at once (docs/method.md, vectorised form).

    Args:
        z: ``(N, N)`` row-normalised adjacency; ``z[i, j]`` = weight of "j is a pre-condition of i".
        observed: ``(T, N)`` 0/1 matrix ``M`` of nodes seen before each position.
        targets: int64 ``(T,)`` node ``y_t`` at each position.
        contrast: ``(N,)`` 0/1 (or bool) nodes that may belong to ``J̄_t`` (real nodes S..E).
        beta: weight of the contrastive term.
        weights: optional ``(T,)`` row multiplicities (default 1).
        eps: added to ``z`` before the logs.

    Returns:
        Scalar loss (summed over rows).
    """
    f = observed @ (z + eps).T  # (T, N): f[t, h] = Σ_j z[h, j] M[t, j]
    numerator = f.gather(1, targets[:, None]).squeeze(1)  # (T,)
    unseen = (1.0 - observed) * contrast.to(observed.dtype)  # (T, N) indicator of J̄_t
    denominator = (unseen * f).sum(dim=1)  # (T,)
    per_row = torch.log(numerator) - beta * torch.log(denominator)  # (T,)
    if weights is not None:
        per_row = per_row * weights
    return -per_row.sum()
