"""Reading the JSON files users hand us, with one-line errors instead of tracebacks."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from graphs.errors import InputError


def read_json(path: str | Path, what: str = "file") -> Any:
    """Load a JSON file; a missing file, a folder, unreadable bytes or bad JSON become one-line `InputError`s.

    Args:
        path: the file.
        what: what the file is, for the message (``"graph file"``, ``"frames file"``...).

    Returns:
        The parsed JSON value.
    """
    path = Path(path)
    try:
        with path.open(encoding="utf-8") as fh:
            return json.load(fh)
    except FileNotFoundError:
        raise InputError(f"{path}: {what} not found") from None
    except IsADirectoryError:
        raise InputError(f"{path}: is a folder, expected a {what}") from None
    except json.JSONDecodeError as err:
        raise InputError(f"{path}: invalid JSON at line {err.lineno} column {err.colno}: {err.msg}") from None
    except UnicodeDecodeError:
        raise InputError(f"{path}: not a text file, expected a {what}") from None
    except OSError as err:
        raise InputError(f"{path}: cannot read {what} ({err.strerror})") from None
