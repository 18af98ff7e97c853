"""Bounds of the options several commands share (``--threads``, ``--workers``, ``--fps``, ``--seed``), checked in one
place.

Each bound turns a value that would crash or silently do nothing into a one-line error: ``torch.set_num_threads``
with 100000 threads ends the process with a segmentation fault, 0 threads means "torch's default" only by
accident, a frame rate below one frame per second leaves no frame to process in a short video, and a seed of -1 or
10^30 ends in numpy's or torch's own traceback. The ``*_option`` functions are argparse ``type=`` callables;
`check_threads` and `check_seed` serve config files and dataclasses.
"""

from __future__ import annotations

import argparse
import math
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Final

from graphs.common.errors import InputError
from graphs.common.files import check_path_name
from graphs.common.safe_text import quoted

THREADS_PER_CORE: Final = 4  # more threads than this per core only adds switching; far more crashes torch
MIN_FPS: Final = 1.0  # frames per second of video: below one, a short video yields no frame at all
MAX_FPS: Final = 1000.0  # far above any camera or label stream; a typo (60000) is refused instead of run
MAX_SEED: Final = 2**32 - 1  # what every generator takes (numpy's legacy seeding stops here, torch at 2^64)
SEED_RULE: Final = f"an integer in 0..{MAX_SEED}"
MAX_SEED_COUNT: Final = 1000  # training seeds of one benchmark run (the paper uses 5)
# Far above any useful Adam step (a run there diverges, and says so); 1e308 overflowed torch's float32 in a traceback.
MAX_LEARNING_RATE: Final = 1e6
LEARNING_RATE_RULE: Final = f"a number in (0, {MAX_LEARNING_RATE:g}]"
MAX_EPOCHS: Final = 100_000  # more is a typo, not a training run (10**20 was taken, and trained for ever)
EPOCHS_RULE: Final = f"an integer in 1..{MAX_EPOCHS}"
MAX_EDGE_COST: Final = 1e6  # nats per edge; far above any useful prior (1e300 overflowed into NaN weights)
# Weight of a loss term (DO's and TGT's beta, TGT's distinctiveness): the papers use 0.005 to 1. Far more is a typo:
# beta = 1e19 trained DO to a loss of 1e21 and a graph of noise, 1e300 to NaN weights.
MAX_LOSS_WEIGHT: Final = 1000.0
# Widest layer a config may ask for: 4 times the published MiniROAD's embedding (2048), 8 times its hidden size (1024),
# and 32 times what the shipped configs suggest for hundreds of videos (256-512). At 8192 both, the GRU alone holds
# 400 million weights, 6.4 GB with their gradients and AdamW's moments: still a training run on a large machine.
# Wider is a typo (1e9 was taken, and died in torch's allocation traceback).
MAX_WIDTH: Final = 8192


def as_listed_option(values: Sequence[float]) -> str:
    """Numbers as a comma-separated option takes them (``0.05,0.1,0.2``): a grid's default, shown in ``--help``."""
    return ",".join(f"{v:g}" for v in values)


def is_decimal_digits(text: str) -> bool:
    """Whether ``text`` is ASCII digits only, as ``int()`` reads them: ``str.isdigit()`` also takes "²" and "①",
    which ``int()`` refuses with a ValueError."""
    return text.isascii() and text.isdigit()


def is_learning_rate(value: object) -> bool:
    """Whether ``value`` is a learning rate an optimiser can take: a number in ``(0, MAX_LEARNING_RATE]``."""
    return (isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)
            and 0 < value <= MAX_LEARNING_RATE)


def max_threads() -> int:
    """The most threads (or worker processes) a command accepts: `THREADS_PER_CORE` per core of this machine."""
    return THREADS_PER_CORE * (os.cpu_count() or 1)


def check_threads(value: object, option: str = "--threads", zero_means: str = "") -> int:
    """Refuse a thread or process count outside ``1..max_threads()`` (or ``0..`` when ``zero_means`` says what 0 is).

    Args:
        value: the count (an int; anything else is refused).
        option: the option or field named in the error.
        zero_means: if given, 0 is allowed and means this (``"one per core"``).

    Returns:
        The count.

    Raises:
        InputError: naming the option, the value and the allowed range.
    """
    lowest = 0 if zero_means else 1
    highest = max_threads()
    if isinstance(value, bool) or not isinstance(value, int) or not lowest <= value <= highest:
        zero = f"; 0: {zero_means}" if zero_means else ""
        raise InputError(f"{option} {value!r}: must be an integer in {lowest}..{highest} "
                         f"({THREADS_PER_CORE} per core of this machine{zero})")
    return value


def _integer(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None


def threads_option(text: str) -> int:
    """argparse type of ``--threads``: an integer in ``1..max_threads()``."""
    try:
        return check_threads(_integer(text), "value")
    except InputError as err:
        raise argparse.ArgumentTypeError(str(err).removeprefix("value ")) from None


def workers_option(text: str) -> int:
    """argparse type of ``--workers``: an integer in ``0..max_threads()``, 0 meaning one process per core."""
    try:
        return check_threads(_integer(text), "value", zero_means="one per core")
    except InputError as err:
        raise argparse.ArgumentTypeError(str(err).removeprefix("value ")) from None


def epochs_option(text: str) -> int:
    """argparse type of ``--epochs``: an integer >= 1 (the error names the option, not a config's field)."""
    value = _integer(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"{value}: must be an integer >= 1")
    return value


def is_rate(value: object) -> bool:
    """A finite number (not a bool) in ``MIN_FPS..MAX_FPS``."""
    return (not isinstance(value, bool) and isinstance(value, int | float) and math.isfinite(value)
            and MIN_FPS <= value <= MAX_FPS)


def _rate_refused(shown: str, unit: str) -> str:
    """Why a rate, shown as ``shown``, is refused."""
    return f"{shown}: must be a number of {unit} per second in {MIN_FPS:g}..{MAX_FPS:g} (at least one a second)"


def check_fps(value: object, option: str = "--fps", unit: str = "frames") -> float:
    """Refuse a rate that is not a finite number in ``MIN_FPS..MAX_FPS``.

    Args:
        value: frames (or labels, or feature vectors) per second of video.
        option: the option or field named in the error.
        unit: what is counted per second, for the message (``"frames"``, ``"vectors"``).

    Returns:
        The rate as a float.

    Raises:
        InputError: naming the option and the value.
    """
    if not is_rate(value):
        raise InputError(f"{option} {_rate_refused(repr(value), unit)}")
    return float(value)  # type: ignore[arg-type]


def _rate_option(text: str, unit: str) -> float:
    """argparse type of a rate: see `check_fps`; the error shows the value as typed (``1e400``, not ``inf``)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not is_rate(value):
        raise argparse.ArgumentTypeError(_rate_refused(text, unit))
    return value


def fps_option(text: str) -> float:
    """argparse type of ``--fps``: frames (or labels) per second, see `check_fps`."""
    return _rate_option(text, "frames")


def rate_option(text: str) -> float:
    """argparse type of a feature file's ``--rate``: vectors per second, see `check_fps`."""
    return _rate_option(text, "vectors")


def is_seed(value: object) -> bool:
    """Whether ``value`` is a seed every random generator here accepts: an integer (not a bool) in ``0..MAX_SEED``."""
    return isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= MAX_SEED


def check_seed(value: object, option: str = "--seed") -> int:
    """Refuse a seed outside ``0..MAX_SEED``.

    Args:
        value: the seed.
        option: the option or field named in the error.

    Returns:
        The seed.

    Raises:
        InputError: naming the option and the value.
    """
    if not is_seed(value):
        raise InputError(f"{option} {quoted(value, 60)}: must be {SEED_RULE}")
    return value  # type: ignore[return-value]


def seed_option(text: str) -> int:
    """argparse type of ``--seed`` and the options that give a first seed: see `check_seed`."""
    try:
        return check_seed(_integer(text), "value")
    except InputError as err:
        raise argparse.ArgumentTypeError(str(err).removeprefix("value ")) from None


def check_seed_count(value: int, option: str = "--seeds") -> int:
    """Refuse a number of training seeds outside ``1..MAX_SEED_COUNT`` (``--seeds 10^30`` would never end).

    Args:
        value: how many seeds.
        option: the option named in the error.

    Returns:
        The count.
    """
    if not 1 <= value <= MAX_SEED_COUNT:
        raise InputError(f"{option} {value}: need at least 1 (and at most {MAX_SEED_COUNT})")
    return value


def seed_range(first: int, count: int, first_option: str, count_option: str = "--seeds") -> range:
    """The training seeds ``first .. first + count - 1`` of a benchmark run, each one a seed (`check_seed`).

    Args:
        first: the first seed (already checked by `seed_option`).
        count: how many (`check_seed_count`).
        first_option / count_option: the options named in the error.

    Raises:
        InputError: too many seeds, or a last seed past `MAX_SEED`, naming both options (the learner's own
            config, which refused it before, named a field the user never typed).
    """
    check_seed_count(count, count_option)
    last = first + count - 1
    if last > MAX_SEED:
        raise InputError(f"{first_option} {first} {count_option} {count}: the last seed would be {last}, past "
                         f"{MAX_SEED} (a seed is {SEED_RULE})")
    return range(first, first + count)


def output_name(text: str) -> str:
    """``type=`` of an output file or folder option: refuses an empty name and one no file system holds
    (`graphs.common.files.check_path_name`) when the command line is parsed, naming the option."""
    try:
        check_path_name(text, "file or folder")
    except InputError as err:
        raise argparse.ArgumentTypeError(str(err)) from None
    return text


def output_path(text: str) -> Path:
    """`output_name` as a `Path`."""
    return Path(output_name(text))
