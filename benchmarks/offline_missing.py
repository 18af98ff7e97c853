"""Would a pass over the whole recording name the steps never done? A screen for `tgml bench-live`'s end report.

Usage::

    python benchmarks/offline_missing.py --data ../shared/data [--features DIR] [--folds 3] [--seed 42] [--epochs 30]

The end report comes once the recording is over, so, unlike an alert, it may look at every second at once: a
bidirectional model sees what came after each second too. This script measures what that is worth. On the folds of
`tgml bench-live` (the same dealing), per recipe and fold, it trains two models of one design on the training folds'
per-second features and annotated steps: a GRU that reads forwards only (what a live detector may do) and the same
GRU reading both ways (what a report after the end may do). On each test recording it scores:

- per-second mAP of recognition (pooled over the recipe's test recordings, then the mean over recipes);
- steps never done: per recording and step, ``1 - peak``, the peak being the step's largest 5 s mean probability
  (causal for the forward model, centred for the two-way one), against the Missing Step tags, as
  `tgml.bench.live.ceiling` does: its average precision and its best F1 **with the threshold placed on the test
  recordings** (a ceiling no method may reach by fair means, `tgml.bench.live.ceiling.best_f1`).

If two-way recognition lifts mAP but not that ceiling, no threshold chosen on training folds will meet the
missing-step target either: what is missing is which steps were done at all, not when. Prints one table.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from rich.console import Console
from rich.progress import Progress
from rich.table import Table
from torch import nn

from graphs.common.command_line import ArgumentParser
from graphs.common.consoles import table_console
from graphs.common.errors import InputError, exit_on_input_error
from graphs.common.options import epochs_option, seed_option, threads_option
from graphs.common.settings_files import WIDTH, Bound, bounded_option
from graphs.precision_recall import shown
from recognition.metrics import average_precision
from tgml.bench.live.bench import assign_folds, check_folds
from tgml.bench.live.ceiling import best_f1
from tgml.bench.live.recordings import LiveRecording, load_live_data

PEAK_WINDOW_S = 5  # seconds of the mean whose peak says a step was shown (the end report's window)


class StepGRU(nn.Module):
    """Per-second step classes from features: normalised input, one dense layer, a GRU one way or both."""

    def __init__(self, width: int, classes: int, hidden: int, both_ways: bool) -> None:
        super().__init__()
        self.embed = nn.Sequential(nn.LayerNorm(width), nn.Dropout(0.3), nn.Linear(width, hidden), nn.ReLU())
        self.gru = nn.GRU(hidden, hidden, batch_first=True, bidirectional=both_ways)
        self.head = nn.Linear(hidden * (2 if both_ways else 1), classes)

    def forward(self, features: torch.Tensor) -> torch.Tensor:
        """``(B, T, D)`` features -> ``(B, T, C)`` logits."""
        return self.head(self.gru(self.embed(features))[0])


@dataclass(frozen=True)
class ScreenSettings:
    """How each model is trained."""

    epochs: int
    hidden: int
    window_s: int
    seed: int


def train_model(recordings: list[LiveRecording], classes: int, both_ways: bool, settings: ScreenSettings) -> StepGRU:
    """Train on random windows of the training recordings (one window per recording and epoch), cross-entropy."""
    torch.manual_seed(settings.seed)
    rng = np.random.default_rng(settings.seed)
    model = StepGRU(recordings[0].features.shape[1], classes, settings.hidden, both_ways)
    optimiser = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=1e-2)
    model.train()
    for _ in range(settings.epochs):
        for i in rng.permutation(len(recordings)):
            recording = recordings[i]
            start = int(rng.integers(0, max(1, len(recording.features) - settings.window_s)))
            window = slice(start, start + settings.window_s)
            logits = model(torch.from_numpy(recording.features[window].astype(np.float32))[None])[0]
            loss = nn.functional.cross_entropy(logits, torch.from_numpy(recording.labels[window]))
            optimiser.zero_grad()
            loss.backward()
            optimiser.step()
    return model.eval()


def window_means(probs: np.ndarray, window: int, centred: bool) -> np.ndarray:
    """``(T, C)`` mean of each class over ``window`` seconds, ending at each second (causal) or around it."""
    sums = np.cumsum(np.vstack([np.zeros((1, probs.shape[1])), probs]), axis=0)
    t = np.arange(len(probs))
    end = np.minimum(t + window // 2 + 1, len(probs)) if centred else t + 1
    start = np.maximum(end - window, 0)
    return (sums[end] - sums[start]) / (end - start)[:, None]


@dataclass
class Scores:
    """What one model scored, gathered over recipes."""

    recipe_maps: list[float]
    never_done: list[float]
    missing_tags: list[bool]


def run_screen(data_dir: Path, features: Path | None, folds: int, settings: ScreenSettings) -> dict[str, Scores]:
    """Train and score both models on every fold of every recipe of the features folder."""
    data = load_live_data(data_dir, features)
    check_folds(data, folds)
    scores = {name: Scores([], [], []) for name in ("forwards", "both ways")}
    with Progress(transient=True) as progress:
        task = progress.add_task("folds", total=len(data.recipes) * folds)
        for name, recipe in data.recipes.items():
            recordings = data.of(name)
            fold_of = assign_folds(recordings, folds, settings.seed)
            classes = len(recipe.class_step_ids)
            gathered: dict[str, tuple[list[np.ndarray], list[np.ndarray]]] = {m: ([], []) for m in scores}
            for fold in range(folds):
                train = [r for r, f in zip(recordings, fold_of, strict=True) if f != fold]
                test = [r for r, f in zip(recordings, fold_of, strict=True) if f == fold]
                for model_name, score in scores.items():
                    both_ways = model_name == "both ways"
                    model = train_model(train, classes, both_ways, settings)
                    for recording in test:
                        with torch.no_grad():
                            logits = model(torch.from_numpy(recording.features.astype(np.float32))[None])[0]
                        probs = torch.softmax(logits, dim=-1).numpy()
                        gathered[model_name][0].append(probs)
                        gathered[model_name][1].append(np.eye(classes, dtype=bool)[recording.labels])
                        peak = window_means(probs, PEAK_WINDOW_S, centred=both_ways).max(axis=0)
                        score.never_done += [1.0 - float(p) for p in peak[1:]]
                        score.missing_tags += [s in recording.annotation.missing for s in recipe.step_ids]
                progress.advance(task)
            for model_name, (probs_list, truth_list) in gathered.items():
                probs, truth = np.concatenate(probs_list)[:, 1:], np.concatenate(truth_list)[:, 1:]
                shown = truth.any(axis=0)
                scores[model_name].recipe_maps.append(float(average_precision(probs[:, shown], truth[:, shown]).mean()))
    return scores


def screen_table(scores: dict[str, Scores]) -> Table:
    """One row per model: mAP, and the never-done score's AP and best F1 in hindsight."""
    table = Table(title="Steps never done, from a model that reads forwards or both ways (threshold in hindsight)")
    for column in ("model", "per-second mAP", "never done: AP", "best F1 (P / R)"):
        table.add_column(column)
    for name, score in scores.items():
        ceiling = best_f1(np.array(score.never_done), np.array(score.missing_tags, dtype=bool))
        # Folders without a Missing Step tag have no positive item: their figures are "-", as in bench-live.
        table.add_row(name, f"{100 * np.mean(score.recipe_maps):.1f}", shown(ceiling.average_precision),
                      f"{shown(ceiling.score)} ({shown(ceiling.precision)} / {shown(ceiling.recall)})")
    return table


@exit_on_input_error
def main(argv: list[str] | None = None) -> int:
    parser = ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=Path(os.environ.get("MISTAKE_DATA", "../shared/data")),
                        help="the data folder (holding captaincook4d/ and captaincook4d-pe/)")
    parser.add_argument("--features", type=Path, default=None,
                        help="a folder of <recording_id>.npy per-second features (default the data set's)")
    parser.add_argument("--folds", type=bounded_option(Bound(1, 1000)), default=3,
                        help="folds per recipe, dealt as tgml bench-live deals them")
    parser.add_argument("--seed", type=seed_option, default=42, help="seeds the folds and the models")
    parser.add_argument("--epochs", type=epochs_option, default=30, help="passes over the training recordings")
    parser.add_argument("--hidden", type=bounded_option(WIDTH), default=128, help="the GRU's width")
    parser.add_argument("--window", type=bounded_option(Bound(1, 86400)), default=300,
                        help="seconds of each training window")
    parser.add_argument("--threads", type=threads_option, default=1, help="torch threads")
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    try:
        settings = ScreenSettings(args.epochs, args.hidden, args.window, args.seed)
        scores = run_screen(args.data, args.features, args.folds, settings)
    except InputError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    table_console(Console()).print(screen_table(scores))
    return 0


if __name__ == "__main__":
    sys.exit(main())
