"""MiniROAD online action detector (An et al., ICCV 2023), as its published recipe builds it.

Per-frame features ``(B, T, F)`` go through ``Linear(F, E) -> LayerNorm -> ReLU -> Dropout`` and a
one-layer GRU ``(E -> H, h0 = 0)``; ``ReLU -> Linear(H, C)`` gives per-frame class logits, class 0
being background. The model has two ways in:

* `MiniROAD.forward` — the whole window at once, for training (logits and cross-entropy loss);
* `MiniROAD.step` — one frame (or a short chunk) at a time, carrying the GRU state, for live use.
  A stream never recomputes its past: the state is the only memory, exactly as in the batch
  forward, so stepping frame by frame reproduces the batch probabilities.

With ``done_head`` the last layer has ``C`` more outputs, one per class: whether that class's key-step has been done
by now (a sigmoid each, trained on done-state targets, `done_targets`). A step leaves its mark in the scene (the cup
stays in the corner) and in the GRU's memory, so this answers "was ``p`` done?" far more reliably than whether the
step's action was caught as it happened; the probabilistic checker reads it (`recognition.evidence`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final, cast

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor, nn

from graphs.common.errors import InputError
from graphs.common.settings_files import as_written
from recognition.motion import MotionHistory, check_motion_lag

# Targets equal to this index are ignored by the loss (padding of the last window of a video).
IGNORE_INDEX = -100


@dataclass(frozen=True)
class MiniROADConfig:
    """Sizes of a MiniROAD detector; defaults are the published ones (TSN RGB+flow, 4096-d).

    Attributes:
        input_dim: width of one frame's feature vector ``F``.
        embed_dim: width of the per-frame embedding ``E`` (GRU input).
        hidden_dim: GRU hidden size ``H``.
        num_classes: number of output classes ``C``, background (class 0) included.
        dropout: dropout after the embedding, active in training only.
        done_head: ``C`` more outputs: per class, the logit of "its key-step has been done by now".
        motion_lag: with ``lag > 0`` the model's input is each frame's features beside their change over ``lag``
            frames (`recognition.motion`, formula M): ``2F`` wide. Live steppers take the ``F`` features and
            compute the change themselves; `MiniROAD.forward` and `MiniROAD.step` take the ``2F`` inputs.
    """

    input_dim: int = 4096
    embed_dim: int = 2048
    hidden_dim: int = 1024
    num_classes: int = 13
    dropout: float = 0.2
    done_head: bool = False
    motion_lag: int = 0

    def __post_init__(self) -> None:
        for name in ("input_dim", "embed_dim", "hidden_dim"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise InputError(f"MiniROADConfig.{name} = {as_written(value)}: must be a positive integer")
        if not isinstance(self.num_classes, int) or isinstance(self.num_classes, bool) or self.num_classes < 2:
            raise InputError(
                f"MiniROADConfig.num_classes = {as_written(self.num_classes)}"
                ": must be an integer >= 2 (background + a step)"
            )
        if not isinstance(self.dropout, int | float) or not 0.0 <= float(self.dropout) < 1.0:
            raise InputError(f"MiniROADConfig.dropout = {as_written(self.dropout)}: must be in [0, 1)")
        if not isinstance(self.done_head, bool):
            raise InputError(f"MiniROADConfig.done_head = {as_written(self.done_head)}: must be true or false")
        check_motion_lag(self.motion_lag, "MiniROADConfig.motion_lag")

    @property
    def model_input_dim(self) -> int:
        """Width of what the first layer reads: ``F``, or ``2F`` with motion inputs."""
        return 2 * self.input_dim if self.motion_lag else self.input_dim

    def check_input_width(self, width: int) -> None:
        """Refuse model inputs (`MiniROAD.forward`, `MiniROAD.step`) of another width than `model_input_dim`."""
        if not self.motion_lag:
            self.check_feature_width(width)
        elif width != self.model_input_dim:
            raise InputError(f"input width {width} does not match the detector's {self.model_input_dim} (features "
                             f"of width {self.input_dim} beside their change over {self.motion_lag} frames: "
                             "recognition.motion.motion_features)")

    @property
    def outputs(self) -> int:
        """Width of the last layer: ``C`` class logits, then ``C`` done-state logits with `done_head`."""
        return 2 * self.num_classes if self.done_head else self.num_classes

    def check_feature_width(self, width: int, source: str = "", extractor: str = "") -> None:
        """Refuse feature vectors of another width than ``input_dim`` (batch forward, step and checkpoints).

        Args:
            width: width of the features about to be fed.
            source: what to name first in the error (a file, a video, a stream); nothing if empty.
            extractor: the extractor the detector expects, named in the error if given.

        Raises:
            InputError: the width differs from ``input_dim``.
        """
        if width != self.input_dim:
            where = f"{source}: " if source else ""
            expects = f" (it expects {extractor!r} features)" if extractor else ""
            raise InputError(
                f"{where}feature width {width} does not match the detector's input_dim {self.input_dim}{expects}"
            )


def detector_loss(logits: Tensor, targets: Tensor, num_classes: int, weights: Tensor | None = None) -> Tensor:
    """The training loss: `frame_cross_entropy` of the classes, plus `done_loss` of the done states if there are any.

    Args:
        logits: ``(B, T, outputs)``.
        targets: ``(B, T)`` class indices, or ``(B, T, C)`` / ``(B, T, 2C)`` targets (classes, then done states).
        num_classes: ``C``.
        weights: optional ``(C,)`` class weights of the cross-entropy.

    Returns:
        Scalar loss.
    """
    loss = frame_cross_entropy(logits[..., :num_classes], targets[..., :num_classes] if targets.dim() == 3 else
                               targets, weights)
    if logits.shape[-1] == num_classes or targets.dim() != 3 or targets.shape[-1] == num_classes:
        return loss
    weight = targets[..., :num_classes].sum(-1).clamp(max=1.0)  # (B, T): 0 on padding rows
    return loss + done_loss(logits[..., num_classes:], targets[..., num_classes:].to(logits.dtype), weight)


def frame_cross_entropy(logits: Tensor, targets: Tensor, class_weights: Tensor | None = None) -> Tensor:
    """Mean per-frame cross-entropy (MiniROAD's "non-uniform" loss on one-hot targets).

    Args:
        logits: ``(B, T, C)`` raw scores.
        targets: ``(B, T)`` class indices (``IGNORE_INDEX`` frames skipped) or ``(B, T, C)`` one-hot /
            soft targets (all-zero rows skipped).
        class_weights: optional ``(C,)`` weights ``w_c`` (`recognition.augment.class_weights`): frame ``t``'s term
            is ``-(Σ_c y_c w_c) Σ_c y_c log p_c``, still divided by the number of frames that count.

    Returns:
        Scalar loss, averaged over the frames that count.
    """
    if targets.dim() == logits.dim():
        # Soft/one-hot targets: -sum_c y_c log p_c per frame, averaged over labelled frames.
        targets = targets.to(logits.dtype)
        per_frame = -(targets * F.log_softmax(logits, dim=-1)).sum(-1)  # (B, T)
        weight = targets.sum(-1).clamp(max=1.0)  # (B, T): 0 on padding rows
        scaled = per_frame * (targets @ class_weights.to(logits.dtype) if class_weights is not None else weight)
        return scaled.sum() / weight.sum().clamp(min=1.0)
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1).long(), weight=class_weights,
                           ignore_index=IGNORE_INDEX)


def done_targets(targets: np.ndarray, background: tuple[int, ...] = (0,)) -> np.ndarray:
    """Per frame and class, whether that class's key-step has been done by then: from the end of its first run on.

    Args:
        targets: ``(L, C)`` one-hot (or smoothed: the largest entry is the label) per-frame targets of one video.
        background: classes that are no key-step (their column stays 0).

    Returns:
        ``(L, C)`` float32 0/1: ``D[t, c] = 1`` iff a run of class ``c`` ended at or before frame ``t``.
    """
    labels = np.asarray(targets).argmax(axis=1)  # (L,)
    length, classes = np.asarray(targets).shape
    ends = np.flatnonzero(np.r_[labels[1:] != labels[:-1], True]) + 1  # (R,) one past each run's last frame
    first_end = np.full(classes, length + 1)
    np.minimum.at(first_end, labels[ends - 1], ends)  # the earliest run end of each class
    first_end[list(background)] = length + 1
    return (np.arange(length)[:, None] >= first_end[None, :]).astype(np.float32)


# Features larger than this in absolute value are named as the cause when the detector's arithmetic overflows (and when
# training diverges): a backbone's features are rarely beyond a few hundred.
LARGE_FEATURE: Final = 1e4


def finite_outputs(outputs: np.ndarray, features: np.ndarray, where: str) -> np.ndarray:
    """The detector's ``(T, outputs)`` on a recording's ``(T, D)`` features, refused when a row is not finite.

    Finite features through finite weights give a non-finite output only where float32 arithmetic overflows: the
    first layer's products past float32's largest value, or the layer norm's squares past it. How large a feature
    that takes depends on the weights (a detector's first-layer rows sum to tens in absolute value), so no bound on
    the file alone says it beforehand; the output says it. Unchecked, the segmenter refused the row later as "frame N
    has empty or non-finite probabilities", naming neither the file nor the cause, and a test mAP pooled it silently.

    Args:
        outputs: ``(T, outputs)`` probabilities (`output_probabilities`), per frame of the recording.
        features: ``(T, D)`` the features they were computed from.
        where: the recording's file(s), as the error names them.

    Returns:
        ``outputs``.

    Raises:
        InputError: naming ``where``, the first row at fault and the features' largest absolute value.
    """
    finite = np.isfinite(outputs).all(axis=1)  # (T,)
    if finite.all():
        return outputs
    raise InputError(f"{where}: the detector's output is not finite from frame {int(np.flatnonzero(~finite)[0])} on "
                     f"({overflow_cause(features)})")


def overflow_cause(features: np.ndarray) -> str:
    """Why finite weights gave a non-finite output on ``features`` (`finite_outputs`), with what to do when they are
    far beyond a backbone's scale."""
    if not np.isfinite(features).all():  # a --backbone's own NaN: no overflow of the detector's
        return "the features hold NaN or infinite values"
    largest, rescale = feature_scale(features)
    return (f"float32 arithmetic overflowed in the detector; the features reach {largest:.3g} in absolute value"
            + (f": {rescale}" if rescale else ""))


def feature_scale(features: np.ndarray) -> tuple[float, str]:
    """``(the features' largest absolute value, what to do about it)``: the advice to rescale them when that is past
    `LARGE_FEATURE`, ``""`` otherwise (an overflow's cause, `overflow_cause`, and a diverged training's,
    `recognition.train.divergence_hint`, say it alike)."""
    largest = float(np.max(np.abs(features), initial=0.0))
    return largest, "rescale them, e.g. divide each by its standard deviation" if largest > LARGE_FEATURE else ""


# A recording's features reaching more than this many times the largest absolute value of the features its detector
# was trained on are warned of (`scale_mismatch`). The 90 CaptainCook4D recordings each stay within 1.03 times the
# largest of the 89 others (5.21), so a backbone's own recordings are far inside it; a file another extractor, other
# units or no standardisation made is two orders of magnitude off before it is said to be.
SCALE_RATIO: Final = 100.0


def largest_by_row(features: np.ndarray) -> np.ndarray:
    """``(T,)`` float64: each row's largest absolute value, with no ``(T, D)`` temporary (an hour of 4096-wide
    float32 features at 4 a second is 236 MB)."""
    if features.shape[-1] == 0:
        return np.zeros(features.shape[:-1])
    return np.maximum(features.max(axis=-1), -features.min(axis=-1)).astype(np.float64)


def scale_mismatch(features: np.ndarray, trained_largest: float | None, where: str) -> str | None:
    """The warning for a recording whose features are far beyond the scale of those its detector was trained on,
    or None.

    The rule: the recording's largest absolute value is more than `SCALE_RATIO` times the training's
    (``trained_largest``, `recognition.checkpoint.DetectorCheckpoint.training_scale`); the line names the first
    vector past it. A detector written before checkpoints recorded that scale (None) is said nothing of.

    It is a warning, never an error, at any size. Where a detector's output stops meaning anything depends on its
    weights, not on the file: its first layer is followed by a layer norm, which makes it nearly blind to a uniform
    rescaling (a CaptainCook4D recording multiplied by 1e2 to 1e18 gave probabilities within 0.002 of its own,
    through a detector trained for an epoch on such recordings) until its float32 squares overflow (that detector:
    between 5e18 and 5e19), past which its output is the same whatever the features. A bound on the file alone would
    refuse files some detector reads as it should, or let through some another cannot; an output that is not finite
    is refused as it is (`finite_outputs`). What the rule says is that the file was not made as the training files
    were (another extractor, other units, a scaling of one's own), which changes what the detector sees unless the
    change is a uniform factor: said once per recording, the run goes on. It sees only gross differences: the
    CaptainCook4D features standardised (each dimension to mean 0, deviation 1) reach 4.9 where the raw ones reach
    5.2, and no bound on the largest value tells the two apart.

    Args:
        features: ``(T, D)`` the recording's features.
        trained_largest: the largest absolute value of the detector's training features (None: unknown).
        where: the recording's file, as the warning names it.

    Returns:
        The warning's text (without ``warning:``), or None.
    """
    if trained_largest is None:
        return None
    rows = largest_by_row(features)
    past = np.flatnonzero(rows > SCALE_RATIO * trained_largest)
    if not past.size:
        return None
    largest = float(rows.max())
    times = f"{largest / trained_largest:.3g} times" if trained_largest > 0 else "far beyond"
    return (f"{where}: the features reach {largest:.3g} in absolute value (first past {SCALE_RATIO:g} times the "
            f"training's at vector {int(past[0])}), {times} the largest of those the detector was trained on "
            f"({trained_largest:.3g}): its output may mean nothing; give it features scaled as its training features "
            "were (the same extractor, units and standardisation)")


def output_probabilities(logits: Tensor, num_classes: int) -> Tensor:
    """The last layer's outputs as probabilities: softmax over the ``C`` classes, a sigmoid per done state.

    Args:
        logits: ``(..., C)`` or ``(..., 2C)`` (`MiniROADConfig.outputs`).
        num_classes: ``C``.

    Returns:
        Same shape: class probabilities, then done-state probabilities.
    """
    probs = torch.softmax(logits[..., :num_classes], dim=-1)
    if logits.shape[-1] == num_classes:
        return probs
    return torch.cat([probs, torch.sigmoid(logits[..., num_classes:])], dim=-1)


def done_loss(logits: Tensor, targets: Tensor, weight: Tensor) -> Tensor:
    """Mean binary cross-entropy of the done-state outputs over the frames that count.

    Args:
        logits: ``(B, T, C)`` done-state logits.
        targets: ``(B, T, C)`` 0/1 done states (`done_targets`).
        weight: ``(B, T)`` 1 on frames that count, 0 on padding.

    Returns:
        Scalar loss.
    """
    per_frame = F.binary_cross_entropy_with_logits(logits, targets, reduction="none").mean(-1)  # (B, T)
    return (per_frame * weight).sum() / weight.sum().clamp(min=1.0)


class MiniROAD(nn.Module):
    """The MiniROAD detector: per-frame embedding, one GRU layer, linear classifier.

    Args:
        config: the detector sizes.
    """

    def __init__(self, config: MiniROADConfig) -> None:
        super().__init__()
        self.config = config
        self.embed = nn.Sequential(
            nn.Linear(config.model_input_dim, config.embed_dim),
            nn.LayerNorm(config.embed_dim),
            nn.ReLU(),
            nn.Dropout(config.dropout),
        )
        self.gru = nn.GRU(config.embed_dim, config.hidden_dim, num_layers=1, batch_first=True)
        self.head = nn.Sequential(nn.ReLU(), nn.Linear(config.hidden_dim, config.outputs))

    def forward(self, x: Tensor, targets: Tensor | None = None) -> tuple[Tensor, Tensor | None]:
        """Batch forward over whole windows, GRU started from zeros.

        Args:
            x: ``(B, T, F)`` model inputs (``2F`` wide with motion inputs: `recognition.motion.motion_features`).
            targets: optional ``(B, T)`` class indices or ``(B, T, C)`` one-hot targets; with `done_head`,
                ``(B, T, 2C)``: the one-hot targets, then the done states (`done_targets`).

        Returns:
            ``(logits (B, T, outputs), loss)``; loss is None without targets.
        """
        self.config.check_input_width(x.shape[-1])
        e = self.embed(x)  # (B, T, E)
        h, _ = self.gru(e)  # (B, T, H)
        logits = self.head(h)  # (B, T, outputs)
        loss = None if targets is None else detector_loss(logits, targets, self.config.num_classes)
        return logits, loss

    def init_state(self, batch: int = 1) -> Tensor:
        """GRU hidden state of a fresh stream (zeros, as in training).

        Args:
            batch: number of parallel streams.

        Returns:
            ``(1, batch, H)`` zeros on the model's device and dtype.
        """
        weight = cast(nn.Linear, self.head[1]).weight
        return torch.zeros(1, batch, self.config.hidden_dim, device=weight.device, dtype=weight.dtype)

    def step(self, x_t: Tensor, state: Tensor, return_all: bool = False) -> tuple[Tensor, Tensor]:
        """Advance a live stream by one frame or a short chunk, carrying the GRU state.

        Args:
            x_t: ``(B, F)`` one frame or ``(B, k, F)`` a chunk of ``k`` consecutive frames (model inputs: ``2F``
                wide with motion inputs).
            state: ``(1, B, H)`` state returned by the previous call (or `init_state`).
            return_all: with a chunk, return the probabilities of every frame ``(B, k, C)``.

        Returns:
            ``(probs, new_state)``: probabilities of the last frame ``(B, outputs)`` (or of all frames with
            ``return_all``; `output_probabilities`) and the state after the last frame.
        """
        self.config.check_input_width(x_t.shape[-1])
        chunk = x_t if x_t.dim() == 3 else x_t.unsqueeze(1)  # (B, k, F)
        e = self.embed(chunk)  # (B, k, E)
        h, new_state = self.gru(e, state)  # (B, k, H), (1, B, H)
        if not return_all:
            h = h[:, -1]  # (B, H): only the newest frame is classified
        probs = output_probabilities(self.head(h), self.config.num_classes)
        return probs, new_state


STEPPER_PRECISIONS = ("fp32", "int8")


def quantize_int8_rows(weight: Tensor) -> tuple[Tensor, Tensor]:
    """Symmetric per-output-channel int8 quantisation of a weight matrix.

    ``scale_n = max_k |W[n, k]| / 127``, ``Q[n, k] = round(W[n, k] / scale_n)``, so ``W ≈ Q * scale``
    with a relative error of at most 1/254 of each row's largest weight.

    Args:
        weight: ``(N, K)`` float weights (``nn.Linear`` layout: out x in).

    Returns:
        ``(Q (N, K) int8, scale (N,) float32)``.
    """
    scale = weight.abs().amax(dim=1).clamp(min=1e-12) / 127.0  # (N,)
    q = torch.round(weight / scale[:, None]).clamp(-127, 127).to(torch.int8)
    return q.contiguous(), scale.float()


class _Gemv:
    """``out = x @ W.T + b`` for a few rows ``x`` (one per stream), into a preallocated ``out``.

    ``fp32``: one BLAS call writing straight into ``out``. ``int8``: weight-only int8 (bfloat16
    activations, `quantize_int8_rows`): a quarter of the memory traffic, which is what bounds a
    batch-1 step at the published sizes (70 MB of fp32 weights per frame do not fit in cache).
    """

    def __init__(self, weight: Tensor, bias: Tensor, precision: str, rows: int = 1) -> None:
        self.precision = precision
        self.bias = bias.detach().float()
        if precision == "fp32":
            self.w_t = weight.detach().t().contiguous()  # (K, N): x @ W_t is a row-major GEMV
        else:
            if not hasattr(torch, "_weight_int8pack_mm"):
                raise InputError(f"FastStepper precision 'int8' needs torch >= 2.3 (found {torch.__version__})")
            self.q, scale = quantize_int8_rows(weight.detach().float())
            self.scale = scale.to(torch.bfloat16)
            self.x16 = torch.empty(rows, weight.shape[1], dtype=torch.bfloat16)

    def into(self, x: Tensor, out: Tensor) -> Tensor:
        if self.precision == "fp32":
            return torch.addmm(self.bias, x, self.w_t, out=out)
        x16 = self.x16[: x.shape[0]].copy_(x)
        # No out= variant exists for the int8 kernel: its small (m, N) result is the one allocation.
        return out.copy_(torch._weight_int8pack_mm(x16, self.q, self.scale)).add_(self.bias)


class FastStepper:
    """Allocation-free stepping of one live stream, or of several streams at once, for live use at the published sizes.

    Holds the weights of a `MiniROAD` (eval mode, no dropout) and preallocated buffers for every
    intermediate, so that each frame is a handful of in-place BLAS calls. It computes exactly what
    `MiniROAD.step` computes (same formulas; PyTorch GRU gate order r, z, n):

        e = ReLU(LayerNorm(W_e x + b_e))
        r = σ(W_ir e + b_ir + W_hr h + b_hr);  z = σ(W_iz e + b_iz + W_hz h + b_hz)
        n = tanh(W_in e + b_in + r ⊙ (W_hn h + b_hn));  h' = (1 − z) ⊙ n + z ⊙ h
        p = softmax(W_c ReLU(h') + b_c)            (with `done_head`: a sigmoid on the last C outputs)

    With ``streams`` > 1 the GRU state is a ``(streams, H)`` tensor, one row per stream, and `step_rows` advances the
    streams that have a frame at the same tick in one pass: each formula above becomes one matrix product over the
    ``m`` rows instead of ``m`` calls (the rows never mix: row ``i`` of every product reads only row ``i``).

    With motion inputs (``motion_lag``) the stepper takes each frame's ``F`` features and keeps, per stream, the last
    ``lag`` of them (`recognition.motion.MotionHistory`) to feed the model formula (M): the same inputs
    `recognition.motion.motion_features` gives the batch forward.

    ``precision="fp32"`` (default) matches `MiniROAD.step` to float rounding. ``"int8"`` stores the
    three large matrices as per-channel int8 (`quantize_int8_rows`): about 4x less memory traffic per
    frame, probabilities within about 1e-2 of fp32 — the choice for CPUs whose cache cannot hold the
    70 MB of fp32 weights. The state and all element-wise math stay fp32.

    Args:
        model: the detector. Its weights are read once, here: the three large matrices are copied
            (transposed for fp32, quantised for int8), so build a new stepper after changing the model.
        precision: ``"fp32"`` or ``"int8"``.
        streams: how many streams the state holds (rows of ``state``).
    """

    def __init__(self, model: MiniROAD, precision: str = "fp32", streams: int = 1) -> None:
        if precision not in STEPPER_PRECISIONS:
            raise InputError(f"FastStepper precision = {as_written(precision)}"
                             f": choose one of {', '.join(STEPPER_PRECISIONS)}")
        if streams < 1:
            raise InputError(f"FastStepper streams = {streams} must be >= 1")
        cfg = model.config
        self.config = cfg
        self.precision = precision
        self.streams = streams
        lin = cast(nn.Linear, model.embed[0])  # nn.Sequential indexing is typed as a bare Module
        norm = cast(nn.LayerNorm, model.embed[1])
        head = cast(nn.Linear, model.head[1])
        self._embed = _Gemv(lin.weight, lin.bias, precision, streams)
        self._ln_w = norm.weight.detach()
        self._ln_b = norm.bias.detach()
        self._ln_eps = norm.eps
        gru = model.gru.get_parameter  # typed access to the GRU's flat weights
        self._input = _Gemv(gru("weight_ih_l0"), gru("bias_ih_l0"), precision, streams)
        self._hidden = _Gemv(gru("weight_hh_l0"), gru("bias_hh_l0"), precision, streams)
        self._head = _Gemv(head.weight, head.bias, "fp32", streams)  # tiny: keep it exact
        dtype = torch.float32
        H, K = cfg.hidden_dim, streams
        self._x = torch.empty(K, cfg.input_dim, dtype=dtype)
        self._motion = MotionHistory(cfg.motion_lag, cfg.input_dim, K) if cfg.motion_lag else None
        self._xm = torch.empty(K, cfg.model_input_dim, dtype=dtype) if cfg.motion_lag else None
        self._e = torch.empty(K, cfg.embed_dim, dtype=dtype)
        self._sq = torch.empty(K, cfg.embed_dim, dtype=dtype)
        self._mu = torch.empty(K, 1, dtype=dtype)
        self._var = torch.empty(K, 1, dtype=dtype)
        self._gi = torch.empty(K, 3 * H, dtype=dtype)
        self._gh = torch.empty(K, 3 * H, dtype=dtype)
        self._hr = torch.empty(K, H, dtype=dtype)
        self._h = torch.empty(K, H, dtype=dtype)  # the rows of the state being stepped (`step_rows`)
        self._logits = torch.empty(K, cfg.outputs, dtype=dtype)
        self.probs = torch.empty(K, cfg.outputs, dtype=dtype)
        self.state = torch.zeros(K, H, dtype=dtype)
        self._first_row = torch.zeros(1, dtype=torch.long)

    def reset(self, row: int | None = None) -> None:
        """Start a stream over (its GRU state back to zeros, its motion history empty): every stream, or the one at
        ``row``."""
        if row is None:
            self.state.zero_()
        else:
            self.state[row].zero_()
        if self._motion is not None:
            self._motion.reset(row)

    @torch.inference_mode()
    def step(self, x_t: Tensor) -> Tensor:
        """One frame of the first stream in, that frame's class probabilities out.

        Args:
            x_t: ``(F,)`` or ``(1, F)`` features of the newest frame (any float dtype).

        Returns:
            ``(1, outputs)`` probabilities (`output_probabilities`); a view of an internal buffer, overwritten by
            the next call.
        """
        x = x_t.reshape(1, -1)
        self.config.check_feature_width(x.shape[1])
        if x.dtype != torch.float32:
            x = self._x[:1].copy_(x)
        x = self._with_motion(x, self._first_row)
        return self._gru_head(self._embed_rows(x), self.state[:1])  # the state row is updated in place

    @torch.inference_mode()
    def step_rows(self, x: Tensor, rows: Tensor) -> Tensor:
        """One frame of each of ``m`` streams in, one pass over their stacked state rows, their probabilities out.

        Args:
            x: ``(m, F)`` features, row ``i`` the newest frame of stream ``rows[i]`` (any float dtype).
            rows: ``(m,)`` int64 distinct stream rows, each in ``0..streams-1``.

        Returns:
            ``(m, outputs)`` probabilities, in the order of ``rows``; a view of an internal buffer, overwritten by
            the next call.
        """
        m = x.shape[0]
        self.config.check_feature_width(x.shape[1])
        if not 1 <= m <= self.streams or rows.shape != (m,):
            raise ValueError(f"step_rows: {m} frames for rows of shape {tuple(rows.shape)} ({self.streams} streams)")
        if x.dtype != torch.float32 or not x.is_contiguous():
            x = self._x[:m].copy_(x)
        x = self._with_motion(x, rows)
        h = torch.index_select(self.state, 0, rows, out=self._h[:m])  # (m, H): the rows being stepped
        probs = self._gru_head(self._embed_rows(x), h)
        self.state.index_copy_(0, rows, h)  # h now holds the new state of each row
        return probs

    def _with_motion(self, x: Tensor, rows: Tensor) -> Tensor:
        """The model inputs of ``(m, F)`` features: themselves, or with motion inputs formula (M), ``(m, 2F)``."""
        if self._motion is None or self._xm is None:
            return x
        return self._motion.push_rows(x, rows, out=self._xm[: x.shape[0]])

    def _embed_rows(self, x: Tensor) -> Tensor:
        """``ReLU(LayerNorm(W_e x + b_e))`` of ``(m, F)`` rows, into the embedding buffer: ``(m, E)``."""
        m = x.shape[0]
        e = self._embed.into(x, self._e[:m])  # (m, E)
        # LayerNorm in place: e = (e - mean) / sqrt(var + eps) * gamma + beta
        mu, var, sq = self._mu[:m], self._var[:m], self._sq[:m]
        torch.mean(e, dim=1, keepdim=True, out=mu)
        e.sub_(mu)
        torch.mul(e, e, out=sq)
        torch.mean(sq, dim=1, keepdim=True, out=var)
        var.add_(self._ln_eps).rsqrt_()
        return e.mul_(var).mul_(self._ln_w).add_(self._ln_b).relu_()

    def _gru_head(self, e: Tensor, h: Tensor) -> Tensor:
        """The GRU update of the state rows ``h`` ``(m, H)``, in place, and the probabilities ``(m, outputs)``."""
        H, m = self.config.hidden_dim, e.shape[0]
        gi = self._input.into(e, self._gi[:m])  # (m, 3H)
        gh = self._hidden.into(h, self._gh[:m])  # (m, 3H)
        hr = self._hr[:m]
        rz = gi[:, : 2 * H].add_(gh[:, : 2 * H]).sigmoid_()  # (m, 2H): r then z
        r, z = rz[:, :H], rz[:, H:]
        n = gi[:, 2 * H :].addcmul_(r, gh[:, 2 * H :]).tanh_()  # (m, H)
        # h' = n + z * (h - n), written into the state rows
        torch.sub(h, n, out=hr)
        h.copy_(n).addcmul_(z, hr)
        torch.clamp(h, min=0.0, out=hr)  # ReLU into a buffer, the state itself stays raw
        logits = self._head.into(hr, self._logits[:m])
        C, probs = self.config.num_classes, self.probs[:m]
        torch.softmax(logits[:, :C], dim=-1, out=probs[:, :C])
        if self.config.done_head:
            torch.sigmoid(logits[:, C:], out=probs[:, C:])
        return probs


class ModelStepper:
    """`MiniROAD.step` carrying the GRU state from frame to frame, on the model's device (the CUDA path).

    Same interface as `FastStepper`, which serves the CPU: one frame's features in, its class
    probabilities out (`step`), or one frame of each of several streams at once (`step_rows`).

    Args:
        model: the detector in eval mode, on its device.
        streams: how many streams the state holds.
    """

    def __init__(self, model: MiniROAD, streams: int = 1) -> None:
        self.model = model
        self.state = model.init_state(streams)  # (1, K, H) on the model's device
        self.device = self.state.device
        lag, width = model.config.motion_lag, model.config.input_dim
        self.motion = MotionHistory(lag, width, streams, self.device) if lag else None

    @torch.inference_mode()
    def step(self, x_t: torch.Tensor) -> torch.Tensor:
        """One frame of the first stream in, that frame's class probabilities out.

        Args:
            x_t: ``(F,)`` or ``(1, F)`` features of the newest frame.

        Returns:
            ``(1, C)`` probabilities on the CPU.
        """
        return self.step_rows(x_t.reshape(1, -1), torch.zeros(1, dtype=torch.long))

    @torch.inference_mode()
    def step_rows(self, x: torch.Tensor, rows: torch.Tensor) -> torch.Tensor:
        """One frame of each of ``m`` streams in, one batched step over their state rows, their probabilities out.

        Args:
            x: ``(m, F)`` features, row ``i`` the newest frame of stream ``rows[i]``.
            rows: ``(m,)`` int64 distinct stream rows.

        Returns:
            ``(m, C)`` probabilities on the CPU.
        """
        rows = rows.to(self.device)
        inputs = x.to(self.device, torch.float32)
        if self.motion is not None:  # the features beside their change (recognition.motion, formula M)
            inputs = self.motion.push_rows(inputs, rows)
        probs, self.state[:, rows] = self.model.step(inputs, self.state[:, rows])
        return probs.cpu()


def make_stepper(model: MiniROAD, streams: int = 1) -> FastStepper | ModelStepper:
    """The live stepper for a detector of ``streams`` streams: the allocation-free `FastStepper` on the CPU,
    `ModelStepper` elsewhere."""
    on_cpu = next(model.parameters()).device.type == "cpu"
    return FastStepper(model, streams=streams) if on_cpu else ModelStepper(model, streams)
