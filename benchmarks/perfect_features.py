"""Features that make recognition (nearly) perfect, for `tgml bench-live`: what the live chain itself costs.

Usage::

    python benchmarks/perfect_features.py --data ../shared/data --out perfect/
    tgml bench-live --data ../shared/data --features perfect/ --json perfect.json

For every recording of the features folder (default the data set's), a file of the same name and length: each
second's vector is the code of the annotated class of that second (a random vector per recipe and key-step, zero for
the background) plus Gaussian noise. A detector trained on them recognises every performed step where it was done and
nothing else, so the benchmark's live rows then measure the segmenter, the evidence, the graphs and the checker at
near-perfect recognition, beside its "annotated steps" rows (docs/live-benchmark.md). Prints the folder written.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import numpy as np

from graphs.common.command_line import ArgumentParser
from graphs.common.errors import InputError, exit_on_input_error
from graphs.common.options import seed_option
from graphs.common.settings_files import WIDTH, Bound, bounded_option
from tgml.bench.live.recordings import LiveData, load_live_data

CODE_SCALE = 1.5  # the spread of a class's code against the noise's 1: classes far apart, every second recognisable


def perfect_features(labels: np.ndarray, codes: np.ndarray, noise: float, rng: np.random.Generator) -> np.ndarray:
    """``codes[labels] + noise * N(0, 1)``: one recording's vectors, ``(T, D)`` float16 (what the data set ships).

    Args:
        labels: ``(T,)`` class per second (0: background).
        codes: ``(C, D)`` a code per class, row 0 zero.
        noise: the noise's standard deviation.
        rng: the random generator.
    """
    return (codes[labels] + noise * rng.standard_normal((len(labels), codes.shape[1]))).astype(np.float16)


def write_folder(data: LiveData, out: Path, dim: int, noise: float, seed: int) -> int:
    """Write every recording's perfect features under ``out``; returns how many."""
    if out.resolve() == data.features_dir.resolve():
        raise InputError(f"--out {out}: the features folder it reads; give another folder")
    out.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    codes = {}
    for name, recipe in data.recipes.items():
        codes[name] = np.vstack([np.zeros(dim), CODE_SCALE * rng.standard_normal((len(recipe.step_ids), dim))])
    for recording in data.recordings:
        np.save(out / f"{recording.recording_id}.npy",
                perfect_features(recording.labels, codes[recording.recipe], noise, rng))
    return len(data.recordings)


@exit_on_input_error
def main(argv: list[str] | None = None) -> int:
    parser = ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=Path(os.environ.get("MISTAKE_DATA", "../shared/data")),
                        help="the data folder (default $MISTAKE_DATA or ../shared/data)")
    parser.add_argument("--features", type=Path, default=None,
                        help="the recordings to copy, by their features folder (default the data set's)")
    parser.add_argument("--out", type=Path, required=True, help="the folder to write")
    parser.add_argument("--dim", type=bounded_option(WIDTH), default=64, help="the vectors' width (default 64)")
    parser.add_argument("--noise", type=bounded_option(Bound(0, 1e6), integer=False), default=1.0,
                        help="the noise's standard deviation (default 1)")
    parser.add_argument("--seed", type=seed_option, default=0, help="seeds the codes and the noise (default 0)")
    args = parser.parse_args(argv)
    try:
        count = write_folder(load_live_data(args.data, args.features), args.out, args.dim, args.noise, args.seed)
    except (InputError, OSError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    print(f"wrote {count} recordings to {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
