"""The backbone under ONNX Runtime on a CPU: the features torch computes, for every backbone, batch size and thread
count a run may ask for, so that a detector trained on either runs on the other."""

from __future__ import annotations

import sys
import threading
from pathlib import Path

import numpy as np
import pytest
import torch
from skimage import data

from graphs.common.errors import InputError
from streaming.extractors import EfficientNetLiteExtractor, make_extractor


def _photos(height: int, width: int) -> np.ndarray:
    """Two real photographs at one size, as a batch (uint8 RGB)."""
    import cv2

    return np.stack([cv2.resize(p, (width, height), interpolation=cv2.INTER_AREA)
                     for p in (data.chelsea(), data.coffee())])  # fmt: skip


@pytest.mark.parametrize("name", ["efficientnet-lite0", "efficientnet-lite0-grid", "efficientnet-lite2"])
def test_onnx_runtime_features_agree_with_torch_features(name: str) -> None:
    fast = make_extractor(name, device="cpu")
    assert isinstance(fast, EfficientNetLiteExtractor) and fast.backbone.runtime == "onnxruntime"
    reference = EfficientNetLiteExtractor("cpu", name, onnx_runtime=False)
    assert reference.backbone.runtime == "torch"
    frames = _photos(300, 400)
    got, expected = fast(frames), reference(frames)
    assert got.shape == expected.shape == (2, fast.dim) and got.dtype == np.float32
    np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-4)


def test_every_batch_size_and_thread_count_gives_each_frame_its_own_features() -> None:
    extractor = make_extractor("efficientnet-lite0", device="cpu")
    frames = np.random.default_rng(3).integers(0, 256, size=(5, 120, 160, 3), dtype=np.uint8)
    alone = np.concatenate([extractor(frames[k : k + 1]) for k in range(5)])
    before = torch.get_num_threads()
    try:
        for threads in (1, 2):
            torch.set_num_threads(threads)
            np.testing.assert_allclose(extractor(frames), alone, rtol=1e-4, atol=1e-4)
    finally:
        torch.set_num_threads(before)
    # One session per thread count, made when first asked for.
    assert {1, 2} <= set(extractor.backbone.feature_maps._sessions)  # type: ignore[attr-defined]


def test_feature_workers_may_share_one_extractor() -> None:
    # The frame loop's workers call one extractor from several threads at once.
    extractor = make_extractor("efficientnet-lite0", device="cpu")
    frames = np.random.default_rng(4).integers(0, 256, size=(4, 96, 128, 3), dtype=np.uint8)
    expected = extractor(frames)
    results: list[np.ndarray] = []
    lock = threading.Lock()

    def work() -> None:
        for _ in range(3):
            out = extractor(frames)
            with lock:
                results.append(out)

    threads = [threading.Thread(target=work) for _ in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert len(results) == 9
    for out in results:
        np.testing.assert_allclose(out, expected, rtol=1e-5, atol=1e-5)


def test_a_missing_onnxruntime_is_one_line_naming_it(monkeypatch: pytest.MonkeyPatch) -> None:
    # A core dependency, but an old editable install or a damaged environment may lack it: one error, no traceback.
    monkeypatch.setitem(sys.modules, "onnxruntime", None)  # import onnxruntime now raises ImportError
    monkeypatch.delitem(sys.modules, "streaming.onnx_backbone", raising=False)
    with pytest.raises(InputError) as missing:
        EfficientNetLiteExtractor("cpu")
    assert str(missing.value) == ("the EfficientNet-Lite extractors need the package onnxruntime on a CPU (onnxruntime "
                                  "is missing; pip install mistake-detection installs it, or pip install -e . in a "
                                  "clone)")  # an installed copy has no checkout for pip install -e .
    assert EfficientNetLiteExtractor("cpu", onnx_runtime=False).backbone.runtime == "torch"


def test_an_onnxruntime_that_does_not_import_is_told_apart_from_a_missing_one(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # onnxruntime 1.17 or 1.18 once pip has moved numpy to 2 (opencv-python-headless 5 needs it): the package is there
    # and its import fails. The line said "None is missing; pip install -e . installs it", which changed nothing.
    (tmp_path / "onnxruntime").mkdir()
    broken_init = 'raise ImportError("numpy.core.multiarray failed to import")\n'
    (tmp_path / "onnxruntime" / "__init__.py").write_text(broken_init)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "onnxruntime", raising=False)
    monkeypatch.delitem(sys.modules, "streaming.onnx_backbone", raising=False)
    with pytest.raises(InputError) as broken:
        EfficientNetLiteExtractor("cpu")
    assert str(broken.value).startswith("the EfficientNet-Lite extractors on a CPU: onnxruntime is installed but does "
                                        "not import (numpy.core.multiarray failed to import); pip install --upgrade ")
