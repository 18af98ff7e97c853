"""Fixtures of the recognition tests: a small synthetic MiniROAD feature folder."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch


def write_feature_folder(
    root: Path,
    n_train: int = 12,
    n_test: int = 4,
    n_classes: int = 5,
    dim: int = 24,
    frames: int = 240,
    noise: float = 2.0,
    seed: int = 0,
) -> Path:
    """Write ``rgb_synth/``, ``target_perframe/`` and ``split.json`` under ``root``.

    Videos alternate background (1-4 s) and key-step segments (2-10 s) at 4 feature frames per
    second; each class has its own mean feature vector and every frame adds Gaussian noise of std
    ``noise`` (2.0: one frame alone is often misclassified, the temporal model has to integrate).
    """
    rng = np.random.default_rng(seed)
    means = rng.normal(0.0, 1.0, size=(n_classes, dim)).astype(np.float32)
    (root / "rgb_synth").mkdir(parents=True, exist_ok=True)
    (root / "target_perframe").mkdir(exist_ok=True)
    names = [f"video_{i:02d}" for i in range(n_train + n_test)]
    for name in names:
        labels: list[int] = []
        while len(labels) < frames:
            step = int(rng.integers(1, n_classes))
            labels += [0] * int(rng.integers(4, 16)) + [step] * int(rng.integers(8, 40))
        label_arr = np.array(labels[:frames])
        feats = means[label_arr] + rng.normal(0.0, noise, size=(frames, dim)).astype(np.float32)
        np.save(root / "rgb_synth" / f"{name}.npy", feats)
        np.save(root / "target_perframe" / f"{name}.npy", np.eye(n_classes, dtype=np.float32)[label_arr])
    split = {
        "train": names[:n_train],
        "test": names[n_train:],
        "class_names": ["background", *(f"step_{c}" for c in range(1, n_classes))],
        "class_step_ids": [None, *range(10, 10 + n_classes - 1)],
        "fps": 4.0,
        "feature_extractor": "synthetic",
    }
    (root / "split.json").write_text(json.dumps(split))
    return root


SMALL_CONFIG = """
[features]
rgb = "rgb_synth"

[model]
embed_dim = 32
hidden_dim = 32
dropout = 0.1

[train]
window = 32
batch_size = 8
lr = 3e-3
epochs = 8
seed = 0
threads = 1
"""


@pytest.fixture(autouse=True)
def _few_threads() -> None:
    # The machine is shared: small models gain nothing from many threads.
    torch.set_num_threads(1)


@pytest.fixture
def feature_folder(tmp_path: Path) -> Path:
    """A fresh synthetic feature folder (tests may break it)."""
    return write_feature_folder(tmp_path / "features")


@pytest.fixture
def small_config(tmp_path: Path) -> Path:
    """A training config with small sizes that trains in seconds on one CPU thread."""
    path = tmp_path / "small.toml"
    path.write_text(SMALL_CONFIG)
    return path
