"""A backbone's convolutional stages run by ONNX Runtime on a CPU: the same network and weights, about twice as fast.

Why: on a CPU the backbone is almost all of what a camera costs (issue 33: twelve cameras at 5 features a second on
two cores need well under 30 ms of CPU a frame, decoding included). Measured on the 2-core development machine of
2026-11-29 (AMD EPYC with AVX-512), one thread, EfficientNet-Lite0's convolutional stages cost 13.5-20 ms a frame in
torch's eager kernels (batch 1 to 8; larger batches spill the caches) and 8.6-9.4 ms under ONNX Runtime (its graph
optimiser fuses each convolution with its activation and runs them in a blocked channel layout); the features agree
within 5e-6 (`tests/streaming/test_onnx_backbone.py` holds them to 1e-4 on real photographs), so a detector trained
on either runs on the other unchanged. Tried before on an earlier, AVX2-only machine and dropped: channels-last
torch, frozen TorchScript, ``torch.compile`` (no faster) and int8 quantisation (features too far from float32's);
docs/live-pipeline.md has the figures.

The network is exported once when it is loaded (``torch.onnx``, about 0.4 s for Lite0) to a model held in memory:
nothing is written to disk or downloaded. Torch's thread count stays the caller's to set (``--threads``, or one per
feature worker): a session is made the first time a count is asked for and kept, so that a run's thread count is the
same under either runtime. Sessions are safe to call from several threads at once, as the frame loop's workers do.
"""

from __future__ import annotations

import io
import threading
import warnings
from typing import Any, Final, cast

import onnxruntime
import torch
from torch import Tensor, nn

# Its own warnings and notes would land in the user's terminal and the live view; errors still reach them as
# exceptions. (What onnxruntime may print while it is imported comes before this line can quiet it.)
onnxruntime.set_default_logger_severity(3)

OPSET: Final = 17
INPUT: Final = "frames"
OUTPUT: Final = "maps"


class _FeatureMaps(nn.Module):
    """What is exported: the network's convolutional stages, normalised frames in, the last feature map out."""

    def __init__(self, net: nn.Module) -> None:
        super().__init__()
        self.net: Any = net  # the library's network (untyped): ``extract_features`` is its method, not a submodule

    def forward(self, x: Tensor) -> Tensor:
        return cast(Tensor, self.net.extract_features(x))


def export_feature_maps(net: nn.Module, size: int) -> bytes:
    """The ONNX model of ``net.extract_features`` for any batch size.

    Args:
        net: a network with ``extract_features`` (``(B, 3, size, size)`` float32 to ``(B, C, h, w)``), in eval mode.
        size: its input side.

    Returns:
        The serialised model.
    """
    buffer = io.BytesIO()
    with warnings.catch_warnings():
        # The TorchScript-based exporter warns that it is the older one and about constant folding it skips; neither
        # changes the model. Its newer exporter needs packages the project does not depend on (onnxscript). The
        # filter is the process's for the export's 0.4 s: a backbone is loaded before any of a run's threads start.
        warnings.simplefilter("ignore")
        # The exporter writes to a file object as well as to a path; its signature names paths only.
        torch.onnx.export(_FeatureMaps(net).eval(), (torch.zeros(1, 3, size, size),), cast(Any, buffer),
                          input_names=[INPUT], output_names=[OUTPUT], opset_version=OPSET, dynamo=False,
                          dynamic_axes={INPUT: {0: "batch"}, OUTPUT: {0: "batch"}})  # fmt: skip
    return buffer.getvalue()


class OnnxFeatureMaps:
    """``net.extract_features`` under ONNX Runtime's CPU kernels, called like the torch method it stands in for.

    Args:
        net: the network (its weights are copied into the model; later changes to ``net`` are not seen).
        size: its input side.
    """

    runtime: Final = "onnxruntime"  # what `streaming.efficientnet_lite.EfficientNetLite.runtime` reports

    def __init__(self, net: nn.Module, size: int) -> None:
        self.model = export_feature_maps(net, size)
        self._sessions: dict[int, onnxruntime.InferenceSession] = {}
        self._lock = threading.Lock()

    def session(self, threads: int) -> onnxruntime.InferenceSession:
        """The session that runs on ``threads`` threads (made the first time that count is asked for)."""
        with self._lock:
            session = self._sessions.get(threads)
            if session is None:
                options = onnxruntime.SessionOptions()
                options.intra_op_num_threads = threads
                options.inter_op_num_threads = 1
                # Idle pool threads would otherwise spin for a while after each pass, taking a core from the
                # other feature workers and the readers' decoding.
                options.add_session_config_entry("session.intra_op.allow_spinning", "0")
                options.log_severity_level = 3  # errors only: stderr is the user's
                session = onnxruntime.InferenceSession(self.model, options, providers=["CPUExecutionProvider"])
                self._sessions[threads] = session
            return session

    def __call__(self, x: Tensor) -> Tensor:
        """The feature maps of a batch.

        Args:
            x: ``(B, 3, size, size)`` float32 on the CPU, in any memory layout.

        Returns:
            ``(B, C, h, w)`` float32.
        """
        session = self.session(torch.get_num_threads())
        (maps,) = session.run([OUTPUT], {INPUT: x.contiguous().numpy()})
        return torch.from_numpy(maps)
