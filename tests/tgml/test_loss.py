"""The vectorised TGML loss equals the TGML formula (docs/method.md) computed position by position."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from tests.tgml.helpers import last_occurrence
from tgml.learners.do.model import DirectOptimization, wrap
from tgml.learners.do.train import build_training_set
from tgml.loss import tgml_loss
from tgml.sequences import first_occurrence, observed_rows, pack, random_dedup_mask


def reference_loss(z: torch.Tensor, sequences: list[list[int]], contrast: list[int], beta: float) -> torch.Tensor:
    """The TGML loss written literally: one term per position t of <β, S, y…, E, γ>, positions S..E."""
    eps = 1e-6
    total = z.new_zeros(())
    for seq in sequences:
        for t in range(1, len(seq) - 1):
            seen = seq[:t]
            unseen = [h for h in contrast if h not in seen]
            # A tensor start, so that the sums are tensors (seen is never empty: the start adds nothing).
            numerator = sum((z[seq[t], j] + eps for j in seen), z.new_zeros(()))
            denominator = sum((z[h, j] + eps for h in unseen for j in seen), z.new_zeros(()))
            total = total - (torch.log(numerator) - beta * torch.log(denominator))
    return total


def random_sequences(rng: np.random.Generator, n: int, count: int, repeats: bool) -> list[list[int]]:
    out = []
    for _ in range(count):
        length = int(rng.integers(1, n + 1))
        seq = rng.permutation(n)[:length].tolist()
        if repeats:
            seq += rng.choice(seq, size=int(rng.integers(0, 4))).tolist()
            rng.shuffle(seq)
        out.append(seq)
    return out


def relative(a: torch.Tensor, b: torch.Tensor) -> float:
    return float((a - b).abs().max() / b.abs().max().clamp_min(1e-30))


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("beta", [0.005, 0.5])
def test_vectorised_loss_and_gradients_match_per_position_reference(seed: int, beta: float) -> None:
    rng = np.random.default_rng(seed)
    n = int(rng.integers(3, 9))
    sequences = [wrap(first_occurrence(s), n) for s in random_sequences(rng, n, 6, repeats=True)]
    model = DirectOptimization(n, torch.Generator().manual_seed(seed)).double()
    with torch.no_grad():
        model.scores.normal_(0, 2, generator=torch.Generator().manual_seed(seed))  # far from uniform
    packed = pack(sequences)
    rows_at = np.r_[False, packed.sequence[1:-1] == packed.sequence[:-2], False]
    rows_at &= np.r_[packed.sequence[:-1] == packed.sequence[1:], False]
    rows = observed_rows(packed, np.ones(len(packed.steps), bool), rows_at, n + 4)

    _, fast = model(torch.from_numpy(rows.observed).double(), torch.from_numpy(rows.targets), beta=beta)
    (fast_grad,) = torch.autograd.grad(fast, model.scores)
    slow = reference_loss(model.adjacency(), sequences, list(range(1, n + 3)), beta)
    (slow_grad,) = torch.autograd.grad(slow, model.scores)

    assert relative(fast.detach(), slow.detach()) < 1e-6
    assert relative(fast_grad, slow_grad) < 1e-6


def test_augmented_training_set_gives_the_loss_of_its_three_parts() -> None:
    rng = np.random.default_rng(5)
    n = 6
    raw = random_sequences(rng, n, 8, repeats=True)
    ids = list(range(100, 100 + n))
    data = build_training_set([[ids[k] for k in s] for s in raw], ids, augment=True)
    assert data.dynamic is not None
    keep = random_dedup_mask(data.dynamic, np.random.default_rng(3))
    dyn = observed_rows(data.dynamic, keep, data.dynamic_rows_at, n + 4)
    observed = torch.from_numpy(np.concatenate([data.fixed.observed, dyn.observed])).double()
    targets = torch.from_numpy(np.concatenate([data.fixed.targets, dyn.targets]))
    weights = torch.from_numpy(np.concatenate([data.fixed_weights, np.ones(len(dyn.targets), np.float32)])).double()

    model = DirectOptimization(n, torch.Generator().manual_seed(1)).double()
    _, fast = model(observed, targets, weights, beta=0.005)

    # Part (c) as the same coins produce it, sequence by sequence.
    kept = data.dynamic.steps[keep]
    bounds = np.flatnonzero(np.diff(data.dynamic.sequence[keep])) + 1
    part_c_repeating = [part.tolist() for part in np.split(kept, bounds)]
    no_repeat = [s for s in raw if len(set(s)) == len(s)]
    sequences = (
        [wrap(first_occurrence(s), n) for s in raw]
        + [wrap(last_occurrence(s), n) for s in raw]
        + [wrap(s, n) for s in no_repeat]
        + part_c_repeating
    )
    slow = reference_loss(model.adjacency(), sequences, list(range(1, n + 3)), 0.005)
    assert relative(fast.detach(), slow.detach()) < 1e-6


def test_loss_is_finite_when_the_graph_has_exact_zeros() -> None:
    # A graph with exact zeros (masked entries) must not produce log(0): eps keeps the loss finite.
    z = torch.zeros(4, 4)
    observed = torch.tensor([[1.0, 0, 0, 0], [1.0, 1, 0, 0]])
    loss = tgml_loss(z, observed, torch.tensor([1, 2]), torch.tensor([0.0, 1, 1, 0]), beta=0.005)
    assert torch.isfinite(loss)
