"""``recognition-train``: train a MiniROAD online detector on a feature folder and save a checkpoint.

Usage::

    recognition-train --features DIR --config configs/miniroad-thumos.toml --out detector.pt
    recognition-train --features DIR --config configs/miniroad-tiny.toml --out tiny.pt --epochs 3 --threads 2
    recognition-train --features DIR --out detector.pt     # a recognition-features folder: no config needed
    recognition-train --features DIR --out detector.pt --val-videos video_02,video_07 --plot curve.png

``DIR`` follows the MiniROAD layout (``rgb_*/``, optional ``flow_*/``, ``target_perframe/``, ``split.json``;
see `recognition.feature_folders`). A validation split is carved from the training videos (``--val-fraction``,
default 0.2 of them and at least one, drawn with ``--seed``; or ``--val-videos``); the weights of the epoch with the
best validation mAP are kept. Training shows a progress bar; at the end the learning curve (per epoch: training
loss, validation loss, validation mAP, the kept epoch marked) and the per-frame mAP on the test split (background
excluded) with the AP of every class are printed, and stored in the checkpoint's ``info``.
Bad input (missing targets, NaN features, a bad config key, an ``--out`` that cannot be written, a validation split
that would be empty or show no key-step, checked before training) and a diverging run end with one ``error:`` line
and exit status 2; an existing checkpoint at ``--out`` is only replaced by a run that succeeds.
"""

from __future__ import annotations

import argparse

from graphs.common.command_line import ArgumentParser, add_version_option, plain_summary
from graphs.common.errors import exit_on_input_error
from graphs.common.options import epochs_option, output_name, seed_option, threads_option


def _names(value: str) -> tuple[str, ...]:
    names = tuple(n.strip() for n in value.split(",") if n.strip())
    if not names:
        raise argparse.ArgumentTypeError(f"{value!r}: give video names separated by commas")
    return names


def build_parser() -> ArgumentParser:
    """The command-line interface (usage mistakes are one ``error:`` line, like every other user mistake)."""
    parser = ArgumentParser(prog="recognition-train", description=plain_summary(__doc__))
    add_version_option(parser)
    parser.add_argument("--features", required=True, help="MiniROAD feature folder")
    parser.add_argument("--config", help="training config (.toml, .yaml); default: the folder's split.json and a "
                        "small CPU-sized MiniROAD (configs/miniroad-efficientnet-lite0.toml)")
    parser.add_argument("--out", required=True, type=output_name, help="checkpoint file to write")
    # The defaults are written out by hand (the parser does not import torch, so that --help stays fast); a test
    # keeps them equal to recognition.train's.
    parser.add_argument("--epochs", type=epochs_option, default=None,
                        help="passes over the training windows (default: the config's [train] epochs; 60 without "
                             "--config)")
    parser.add_argument("--seed", type=seed_option, default=None,
                        help="training seed (default: the config's [train] seed; 42 without --config)")
    parser.add_argument("--threads", type=threads_option, default=None,
                        help="torch CPU threads, at most 4 per core (default: the config's [train] threads; 1 "
                             "without --config)")
    val = parser.add_mutually_exclusive_group()
    val.add_argument("--val-fraction", type=float, default=None,
                     help="share of the training videos held out for validation and early stopping (default 0.2, "
                     "at least one video; 0: none, the last epoch is kept)")
    val.add_argument("--val-videos", type=_names, default=None, help="validation videos by name, comma-separated")
    parser.add_argument("--plot", default=None, type=output_name,
                        help="draw the learning curve into this PNG (the 'plot' extra)")
    parser.add_argument("--quiet", action="store_true", help="no progress bar")
    return parser


@exit_on_input_error
def main(argv: list[str] | None = None) -> int:
    """Entry point of ``recognition-train``."""
    args = build_parser().parse_args(argv)
    from recognition.train import run_training  # torch: loaded once there is a detector to train, not for --help

    run_training(
        args.features,
        args.config,
        args.out,
        progress=not args.quiet,
        epochs=args.epochs,
        seed=args.seed,
        threads=args.threads,
        val_fraction=args.val_fraction,
        val_videos=args.val_videos,
        plot=args.plot,
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
