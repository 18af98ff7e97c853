"""The learning curve of a detector's training: per epoch the training loss, the validation loss and mAP, and the
epoch kept; as a table (printed by ``recognition-train``) and as a PNG (``--plot``, the optional ``plot`` extra)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rich.table import Table

from graphs.common.errors import InputError, extra_import_error, install_extra
from graphs.common.files import save_figure


@dataclass(frozen=True)
class EpochScores:
    """One epoch of training.

    Attributes:
        epoch: 1, 2, ...
        train_loss: mean training loss over the epoch's batches (augmented windows, weighted and smoothed targets:
            the objective that was optimised).
        val_loss: mean per-frame cross-entropy of the validation videos, each run causally from its first frame
            against its one-hot targets (NaN without a validation split).
        val_map: per-frame mAP of the validation videos, background excluded (NaN without a validation split,
            or when no validation frame belongs to a key-step).
    """

    epoch: int
    train_loss: float
    val_loss: float = math.nan
    val_map: float = math.nan

    def as_json(self) -> dict[str, Any]:
        """Plain JSON (NaN as null)."""
        return {key: None if isinstance(value, float) and math.isnan(value) else value
                for key, value in vars(self).items()}


def _percent(value: float) -> str:
    return "n/a" if math.isnan(value) else f"{100 * value:.1f}"


def _loss(value: float) -> str:
    return "n/a" if math.isnan(value) else f"{value:.4f}"


def kept_by_rule(keep_by: str) -> str:
    """How the kept epoch was chosen, in words (``keep_by``: ``"map"``, ``"loss"``, ``"last"``)."""
    return {"map": "highest validation mAP", "loss": "lowest validation loss", "last": "last epoch"}[keep_by]


def curve_table(curve: Sequence[EpochScores], kept: int, keep_by: str) -> Table:
    """A rich table of the curve, the kept epoch marked.

    Args:
        curve: every epoch's scores.
        kept: the epoch whose weights were kept.
        keep_by: how it was chosen (``"map"``, ``"loss"``, ``"last"``), named in the title.
    """
    table = Table(title=f"Learning curve (kept: epoch {kept}, {kept_by_rule(keep_by)})")
    for name in ("epoch", "train loss", "val loss", "val mAP %"):
        table.add_column(name, justify="right")
    table.add_column("")
    for e in curve:
        table.add_row(str(e.epoch), _loss(e.train_loss), _loss(e.val_loss), _percent(e.val_map),
                      "[bold]<- kept" if e.epoch == kept else "")
    return table


def check_plot_support(path: str | Path) -> None:
    """Refuse ``--plot`` before training when matplotlib (the ``plot`` extra) is missing, or cannot write a file of
    that ending (``curve.npy``: found only after training, it was a traceback)."""
    try:
        import matplotlib  # noqa: F401  (first: a cached sub-module would hide the package's absence)
        from matplotlib.backends.backend_agg import FigureCanvasAgg
    except ImportError as err:
        raise extra_import_error(err, "matplotlib", f"--plot {path}", f"--plot {path}: drawing the curve needs "
                                 f"matplotlib, the optional 'plot' extra ({install_extra('plot')})") from None
    formats = FigureCanvasAgg.get_supported_filetypes()
    ending = Path(path).suffix.lower().removeprefix(".")
    if ending and ending not in formats:
        raise InputError(f"--plot {path}: matplotlib cannot draw a .{ending} file (use .png, .pdf, .svg or "
                         f"another of {', '.join(sorted(formats))})")


def plot_curve(curve: Sequence[EpochScores], kept: int, path: str | Path) -> Path:
    """Draw the curve as a PNG: losses on the left axis, validation mAP on the right, the kept epoch marked.

    Args:
        curve: every epoch's scores.
        kept: the epoch kept.
        path: the image to write (atomically; the format follows the file's ending).

    Returns:
        The file written.
    """
    check_plot_support(path)
    import matplotlib

    matplotlib.use("Agg")  # files only: never open a window
    import matplotlib.pyplot as plt

    epochs = [e.epoch for e in curve]
    fig, ax = plt.subplots(figsize=(7, 4.4), layout="constrained")
    ax.plot(epochs, [e.train_loss for e in curve], label="training loss", color="tab:blue")
    ax.plot(epochs, [e.val_loss for e in curve], label="validation loss", color="tab:orange")
    ax.set_xlabel("epoch")
    ax.set_ylabel("loss (cross-entropy per frame)")
    ax.axvline(kept, color="grey", linestyle="--", label=f"kept: epoch {kept}")
    right = ax.twinx()
    right.plot(epochs, [100 * e.val_map for e in curve], label="validation mAP", color="tab:green")
    right.set_ylabel("validation mAP (%)")
    # A margin beyond 0-100: a curve at 100 % (easy footage, every epoch) lay on the frame's top edge, hidden.
    right.set_ylim(-3, 103)
    right.set_yticks(range(0, 101, 20))
    lines = ax.get_legend_handles_labels()
    more = right.get_legend_handles_labels()
    # Above the axes: inside them it covered the curves it names.
    fig.legend(lines[0] + more[0], lines[1] + more[1], fontsize=8, loc="outside upper center", ncol=4, frameon=False)
    ax.grid(alpha=0.3)
    try:
        return save_figure(fig, path, "learning curve", dpi=110, option="--plot")
    finally:
        plt.close(fig)
