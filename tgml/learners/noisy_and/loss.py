"""The noisy-AND TGML likelihood: every pre-condition of a step must be done before the step can be done.

Model. ``θ[i, j] = sigmoid(A[i, j])`` is the probability that key-step ``j`` is a pre-condition of key-step ``i``
(edges are independent; ``A`` is the free score matrix, its diagonal unused). An execution is generated one step at
a time: among the steps of the execution still to do, ``C_t``, a step is *ready* when all its pre-conditions are in
the history ``J_t``, and the next step is drawn uniformly from the ready ones. The probability that ``h`` is ready
is a product over the steps not yet done (noisy-AND)::

    ready_t(h) = Π_{j ∉ J_t} (1 − θ[h, j])        log ready_t(h) = Σ_j (1 − M[t, j]) · log(1 − θ[h, j])

with ``M`` the 0/1 observed-before matrix of the DO loss, so ``log ready = (1 − M) · log(1 − θ)ᵀ`` is one matrix
product for all positions at once. Given that ``y_t`` is ready, the other candidates are ready independently, so
``E[#ready | y_t ready] = 1 + Σ_{h ∈ C_t, h ≠ y_t} ready_t(h)`` and, by Jensen's inequality (``1/x`` is convex),
the probability of the observed step is bounded below by::

    P(y_t | J_t) ≥ ready_t(y_t) / (1 + Σ_{h ∈ C_t \\ {y_t}} ready_t(h))

A noise rate ``ρ`` mixes in a uniform choice among the steps still to do (a swapped or slipped step), so a single
violation costs ``log ρ/|C_t|`` instead of ruling an edge out::

    P_ρ(y_t | J_t) = (1 − ρ) · P(y_t | J_t) + ρ / |C_t|

The loss is the negative log-posterior per training execution, with an edge cost ``λ`` in nats per edge (a
sparsity prior: ``λ`` is the prior log-odds against an edge, so an edge must raise the log-likelihood of the whole
training set by ``λ`` to be worth keeping)::

    L = − (1/D) [ Σ_t w_t log P_ρ(y_t | J_t) − λ Σ_{i ≠ j} θ[i, j] ]

This is the TGML factorisation ``P(y) = Π_t P(y_t | J_t)`` with the same numerator / contrast structure; DO's
numerator ``Σ_{j ∈ J_t} Z[y_t, j]`` is a *sum* over a row-softmax (the row's mass is shared between
pre-conditions, an OR), where here the readiness is a *product* of independent edge terms (an AND), so a step with
several pre-conditions keeps all of them.
"""

from __future__ import annotations

import math

import torch
from torch.nn import functional


def log_not_required_of_scores(scores: torch.Tensor) -> torch.Tensor:
    """``log(1 − θ)`` with ``θ = sigmoid(A)`` and the diagonal forced to ``θ = 0``: ``−softplus(A)`` off the diagonal.

    The training form, differentiable and exact for any score; from edge probabilities (a learned graph's weights)
    it is `graphs.procedure_queries.log_not_required`.

    Args:
        scores: ``(n, n)`` free scores ``A``.

    Returns:
        ``(n, n)`` log-probabilities that ``j`` is *not* a pre-condition of ``i`` (0 on the diagonal).
    """
    off_diagonal = 1.0 - torch.eye(scores.shape[0], dtype=scores.dtype, device=scores.device)
    return -functional.softplus(scores) * off_diagonal


def edge_probabilities(scores: torch.Tensor) -> torch.Tensor:
    """``θ = sigmoid(A)`` with a zero diagonal (a step is never its own pre-condition). ``(n, n)``."""
    off_diagonal = 1.0 - torch.eye(scores.shape[0], dtype=scores.dtype, device=scores.device)
    return torch.sigmoid(scores) * off_diagonal


def log_readiness(log_free: torch.Tensor, unseen: torch.Tensor) -> torch.Tensor:
    """``log ready_t(h) = Σ_j U[t, j] · log(1 − θ[h, j])`` for every position and step (one matrix product).

    Args:
        log_free: ``(n, n)`` ``log(1 − θ)`` (`log_not_required_of_scores`).
        unseen: ``(T, n)`` 0/1 ``U = 1 − M``: steps not done before each position.

    Returns:
        ``(T, n)`` log-probabilities (<= 0) that each step is ready at each position.
    """
    return unseen @ log_free.T  # (T, n)


def step_log_likelihood(
    log_ready: torch.Tensor, targets: torch.Tensor, candidates: torch.Tensor, noise: float
) -> torch.Tensor:
    """``log P_ρ(y_t | J_t) = log[(1 − ρ) · ready(y_t) / (1 + Σ_{h ∈ C_t, h ≠ y_t} ready(h)) + ρ / |C_t|]``.

    Args:
        log_ready: ``(T, n)`` `log_readiness`.
        targets: int64 ``(T,)`` the step ``y_t`` done at each position.
        candidates: ``(T, n)`` 0/1 ``C_t``: steps of the execution not yet done (``y_t`` included).
        noise: ``ρ`` in [0, 1).

    Returns:
        ``(T,)`` log-probabilities of the observed steps.
    """
    rows = torch.arange(targets.shape[0], device=targets.device)
    others = candidates.clone()
    others[rows, targets] = 0.0
    own = log_ready[rows, targets]  # (T,)
    # log ready <= 0, so exp() stays in (0, 1]: the sum cannot overflow and needs no logsumexp.
    competitors = torch.log1p((others * log_ready.exp()).sum(dim=1))  # (T,)
    log_model = own - competitors
    if noise == 0.0:
        return log_model
    uniform = math.log(noise) - torch.log(candidates.sum(dim=1))  # (T,)
    return torch.logaddexp(math.log1p(-noise) + log_model, uniform)


def noisy_and_loss(
    scores: torch.Tensor,
    unseen: torch.Tensor,
    targets: torch.Tensor,
    candidates: torch.Tensor,
    weights: torch.Tensor,
    n_executions: int,
    noise: float,
    edge_cost: float,
) -> torch.Tensor:
    """``L = − (1/D) [Σ_t w_t log P_ρ(y_t | J_t) − λ Σ_{i≠j} θ[i, j]]`` (module docstring).

    Args:
        scores: ``(n, n)`` free scores ``A``.
        unseen: ``(T, n)`` 0/1 steps not done before each position.
        targets: int64 ``(T,)`` step done at each position.
        candidates: ``(T, n)`` 0/1 steps of the execution still to do (target included).
        weights: ``(T,)`` multiplicity of each (merged) row.
        n_executions: ``D``, training executions.
        noise: ``ρ``.
        edge_cost: ``λ`` in nats per edge.

    Returns:
        Scalar loss.
    """
    log_ready = log_readiness(log_not_required_of_scores(scores), unseen)
    log_likelihood = (weights * step_log_likelihood(log_ready, targets, candidates, noise)).sum()
    return -(log_likelihood - edge_cost * edge_probabilities(scores).sum()) / n_executions
