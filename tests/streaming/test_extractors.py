"""Feature extractors: the built-in one separates scenes, a TorchScript backbone plugs in, bad choices are refused."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from graphs.common.errors import InputError
from streaming.demo.paths import default_demo_paths
from streaming.demo.synthetic_video import RenderConfig, render_frames
from streaming.extractors import LightExtractor, TorchScriptExtractor, grid_means, make_extractor


def test_grid_means_average_each_cell() -> None:
    values = np.arange(16, dtype=np.float32).reshape(1, 4, 4, 1)
    cells = grid_means(values, 2)[0, :, :, 0]
    assert cells.tolist() == [[2.5, 4.5], [10.5, 12.5]]


def test_light_features_separate_demo_steps_more_than_noise() -> None:
    extractor = LightExtractor()
    config = RenderConfig(step_s=(1.0, 1.0), pause_s=(0.5, 0.5), fade_s=0.0)
    frames, labels = render_frames((1, 2), seed=3, config=config)
    images = np.stack(list(frames))  # (T, H, W, 3)
    feats = extractor(images)
    assert feats.shape == (len(labels), extractor.dim) and feats.dtype == np.float32
    a, b = feats[labels == 1], feats[labels == 2]
    within = np.linalg.norm(a - a.mean(0), axis=1).mean()
    between = np.linalg.norm(a.mean(0) - b.mean(0))
    assert between > 5 * within


def test_frames_too_small_for_the_grid_are_refused() -> None:
    # Below 7x7 pixels a grid cell of the halved frame is empty: the features were NaN (with numpy warnings)
    # and the run ended with "segmenter: frame 0 has empty or non-finite probabilities".
    extractor = LightExtractor()
    with pytest.raises(InputError, match="light-v1 features need frames of at least 7x7 px, got 4x6"):
        extractor(np.zeros((1, 6, 4, 3), dtype=np.uint8))
    assert np.isfinite(extractor(np.zeros((1, 7, 7, 3), dtype=np.uint8))).all()


def test_batch_and_single_frame_agree() -> None:
    images = np.random.default_rng(0).integers(0, 256, size=(3, 240, 320, 3), dtype=np.uint8)
    extractor = LightExtractor()
    assert np.allclose(extractor(images)[1], extractor(images[1:2])[0])


class _Backbone(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x.mean(dim=(2, 3))  # (B, 3)


@pytest.mark.filterwarnings("ignore:`torch.jit.script` is deprecated:DeprecationWarning")
def test_torchscript_backbone_is_loaded_and_probed(tmp_path: Path) -> None:
    path = tmp_path / "backbone.pt"
    torch.jit.script(_Backbone()).save(str(path))
    extractor = make_extractor("torchscript", path)
    assert isinstance(extractor, TorchScriptExtractor) and extractor.dim == 3
    out = extractor(np.full((2, 48, 64, 3), 255, dtype=np.uint8))
    expected = (1.0 - np.array([0.485, 0.456, 0.406])) / np.array([0.229, 0.224, 0.225])
    assert out.shape == (2, 3) and np.allclose(out[0], expected, atol=1e-4)


class _Failing(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x.view(7, -1, 13)  # fails for any batch of 224x224 frames


class _Unbatched(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x[0].mean(dim=(1, 2))  # (3,): the batch dimension is gone


class _Named(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> dict[str, torch.Tensor]:
        return {"features": x.mean(dim=(2, 3))}


class _Complex(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x.mean(dim=(2, 3)).to(torch.complex64)


class _NoWidth(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x.mean(dim=(2, 3))[:, :0]


@pytest.mark.filterwarnings("ignore:`torch.jit.script` is deprecated:DeprecationWarning")
@pytest.mark.parametrize(
    ("module", "reason"),
    [(_Failing, "fails on a .* shape '\\[7, -1, 13\\]' is invalid"), (_Unbatched, "output has shape \\(3,\\)"),
     (_Named, "fails on a .*the output is a dict, not a tensor"),
     # Made real in silence (torch's warning aside), and features of no width were taken as a backbone's.
     (_Complex, "fails on a .*the output is a tensor of complex numbers \\(torch.complex64\\), not real features"),
     (_NoWidth, "output has shape \\(2, 0\\), expected \\(batch, features\\)")],
    ids=["raises", "unbatched", "dict", "complex", "no-width"],
)
def test_backbone_that_does_not_work_is_refused_when_loaded(module: type, reason: str, tmp_path: Path) -> None:
    # The probe raised the module's own RuntimeError/AttributeError (a traceback), and its (batch, features)
    # check could never fire: outputs were flattened to (B, -1) before it looked.
    path = tmp_path / "backbone.pt"
    torch.jit.script(module()).save(str(path))
    with pytest.raises(InputError, match=f"--backbone {path}: {reason}"):
        make_extractor("torchscript", path)


def test_wrong_extractor_choices_are_refused(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="--backbone"):
        make_extractor("torchscript", None)
    with pytest.raises(InputError, match="known"):
        make_extractor("tsn-resnet50", None)
    bad = tmp_path / "bad.pt"
    bad.write_bytes(b"not torchscript")
    with pytest.raises(InputError, match="bad.pt"):
        make_extractor("torchscript", bad)


@pytest.mark.filterwarnings("ignore:`torch.jit.script` is deprecated:DeprecationWarning")
def test_a_backbone_that_is_no_torchscript_file_says_so_without_torchs_zip_reader(tmp_path: Path) -> None:
    # torch's text, cut at 100 characters: "(PytorchStreamReader failed locating file constants.pkl: file not found.
    # This is an interna", for the detector checkpoint given as --backbone as for a damaged file.
    _, detector = default_demo_paths()
    weights = tmp_path / "weights.pt"
    torch.save({"w": torch.zeros(3)}, weights)
    cut = tmp_path / "cut.pt"
    torch.jit.script(_Backbone()).save(str(cut))
    cut.write_bytes(cut.read_bytes()[: cut.stat().st_size // 2])
    saved = ("written by torch.save (weights, or a detector checkpoint: that one goes to --detector), not a "
             "TorchScript module: save the backbone with torch.jit.save")
    other = "not a TorchScript file (torch.jit.save writes them): another kind of file, or a damaged copy"
    for path, why in ((detector, saved), (weights, saved), (cut, other)):
        with pytest.raises(InputError) as err:
            make_extractor("torchscript", path)
        assert str(err.value) == f"--backbone {path}: {why}"


def test_a_backbone_that_is_not_a_regular_file_is_named_for_what_it_is(tmp_path: Path) -> None:
    # A folder, a FIFO and /dev/zero were all "file not found" (the FIFO is never opened for a blocking read).
    import os

    os.mkfifo(tmp_path / "fifo.pt")
    for path, what in ((tmp_path, "is a folder"), (tmp_path / "fifo.pt", "is a FIFO (named pipe), not a regular file"),
                       (Path("/dev/zero"), "is a character device, not a regular file"),
                       (tmp_path / "missing.pt", "TorchScript backbone file not found")):
        with pytest.raises(InputError) as err:
            make_extractor("torchscript", path)
        assert str(err.value).startswith(f"--backbone {path}: {what}"), str(err.value)


class _InfiniteWhenBright(torch.nn.Module):
    """Finite on the blank probe, infinite on a bright frame: a division by zero in the user's model."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        bright = (x.mean(dim=(1, 2, 3)) > 0.0).float()[:, None]
        return torch.ones(x.shape[0], 4) / (1.0 - bright)


class _FailsWhenBright(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if bool(x.mean() > 0.0):
            raise RuntimeError("index out of range in self")
        return x.mean(dim=(2, 3))


@pytest.mark.filterwarnings("ignore:`torch.jit.script` is deprecated:DeprecationWarning")
@pytest.mark.parametrize(("module", "reason"), [(_InfiniteWhenBright, "NaN or infinity (frame 1 of a batch of 2)"),
                                                (_FailsWhenBright, "fails on a batch of 2 frame(s)")])
def test_a_backbone_that_goes_wrong_on_a_frame_is_named(module: type, reason: str, tmp_path: Path) -> None:
    # Loading probes a blank batch only; what the backbone does on a later frame is checked on every batch, so a
    # stream stops with the backbone named instead of a detector error frames later.
    path = tmp_path / "backbone.pt"
    torch.jit.script(module()).save(str(path))
    extractor = make_extractor("torchscript", path)
    frames = np.zeros((2, 48, 64, 3), dtype=np.uint8)
    frames[1] = 255
    with pytest.raises(InputError, match="backbone") as refusal:
        extractor(frames)
    assert str(path) in str(refusal.value) and reason in str(refusal.value)
