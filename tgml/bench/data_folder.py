"""Where the benchmarks find the datasets: ``--data DIR``, else the folder named by ``$MISTAKE_DATA``.

Every benchmark command (``prego-bench``, ``tgml bench-captaincook``, ``tgml bench-queries``) reads the same data
folder (``captaincook4d/``, ``assembly101-o/``, ``epic-tent-o/``, ``prego-miniroad/``), so one environment variable
set once serves them all.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Final

from graphs.common.errors import InputError
from graphs.common.files import FOLDER_NOT_FOUND, not_a_folder

DATA_ENV: Final = "MISTAKE_DATA"
CAPTAINCOOK_FOLDER: Final = "captaincook4d"
# The datasets of `tgml bench-queries`, by their folder in the data folder (its parser lists them).
QUERY_DATASETS: Final = (CAPTAINCOOK_FOLDER, "epic-tent-o", "assembly101-o")


def data_folder(given: str | Path | None, otherwise: str = "") -> Path:
    """The data folder of a benchmark run: ``--data`` when given, else ``$MISTAKE_DATA``.

    Args:
        given: the ``--data`` value (None when the option was not given).
        otherwise: another way to give the data, named in the error (``" (or --annotations FILE)"``).

    Returns:
        The folder (not checked here: the dataset readers name the file that is missing).

    Raises:
        InputError: neither the option nor the variable is set, or the variable names no folder.
    """
    if given is not None:
        return Path(given)
    env = os.environ.get(DATA_ENV)
    if env:
        # An old export, forgotten: named as the variable, or the folder is a mystery. A file there is said to be
        # one: "no such folder" of a path that exists sent the user looking for a typo.
        why = not_a_folder(env, "a folder")
        if why is not None:
            said = "no such folder" if why == FOLDER_NOT_FOUND else why
            raise InputError(f"${DATA_ENV} {env}: {said}; set it to the data folder (like shared/data), or give "
                             "--data DIR")
        return Path(env)
    raise InputError(f"no data folder: give --data DIR or set ${DATA_ENV}{otherwise}")


def captaincook_folder(data: Path) -> Path:
    """The CaptainCook4D folder from either the data folder holding ``captaincook4d/`` or that folder itself.

    Args:
        data: the folder the user gave.

    Returns:
        ``data/captaincook4d`` when it exists, else ``data``.
    """
    inner = data / CAPTAINCOOK_FOLDER
    return inner if inner.is_dir() else data
