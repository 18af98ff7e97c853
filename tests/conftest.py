"""Shared pytest fixtures.

`data_dir` locates the shared, read-only datasets: `$MISTAKE_DATA` when set, else `<repo>/../shared/data`.
Tests that need the data take the fixture; when the folder is missing they are skipped with a reason that
says where the data was looked for, so a checkout without the data still runs the rest of the suite.
`epic_graph` is the EPIC-Tent-O task graph behind the published figures, learned once per session for the tgml
and recognition tests.
`demo_cache` points ``$MISTAKE_CACHE`` at a folder of the test session, so a test that reaches the demo video
renders it once per run and never into the user's cache.
"""

from __future__ import annotations

import os
import signal
from collections.abc import Iterator
from pathlib import Path

import pytest

from graphs.task_graph import TaskGraph

REPO_ROOT = Path(__file__).resolve().parent.parent

# A suite started in the background of a non-interactive shell (`bash .ci/run &`) inherits SIGINT ignored, and so
# would every command the tests start: an ignored signal stays ignored across exec. The tests interrupt those
# commands as a user at a terminal does (Ctrl-C), so their children start with SIGINT at its default.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)


def find_data_dir() -> Path | None:
    """Return the shared data folder, or None when it is absent.

    Returns:
        `$MISTAKE_DATA` if set (even if it does not exist, so a wrong setting is reported, not masked),
        else `<repo>/../shared/data`; None if the chosen folder does not exist.
    """
    env = os.environ.get("MISTAKE_DATA")
    candidate = Path(env) if env else REPO_ROOT.parent / "shared" / "data"
    return candidate if candidate.is_dir() else None


@pytest.fixture(scope="session")
def data_dir() -> Path:
    """The shared datasets folder (`$MISTAKE_DATA` or `<repo>/../shared/data`); skips the test if absent."""
    found = find_data_dir()
    if found is None:
        where = os.environ.get("MISTAKE_DATA") or str(REPO_ROOT.parent / "shared" / "data")
        pytest.skip(f"shared data folder not found at {where} (set $MISTAKE_DATA to the data folder)")
    return found


@pytest.fixture(scope="session")
def epic_graph(data_dir: Path) -> TaskGraph:
    """The DO task graph of EPIC-Tent-O learned from its training split with `configs/do-epic-tent.toml`.

    That file holds the benchmark's DO settings with seed 42: the graph behind the published GT-mode figure
    (58.3 Avg F1).
    """
    from tgml.learners.registry import learner
    from tgml.learners.result import learn_from_annotations

    do = learner("do")
    config = do.config_file(REPO_ROOT / "configs" / "do-epic-tent.toml")
    return learn_from_annotations(do.learn, data_dir / "epic-tent-o" / "train.json", "epic-tent", config).graph


@pytest.fixture(scope="session")
def demo_cache(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """Point ``$MISTAKE_CACHE`` at a session folder so the demo videos render once per test run."""
    path = tmp_path_factory.mktemp("demo-cache")
    before = os.environ.get("MISTAKE_CACHE")
    os.environ["MISTAKE_CACHE"] = str(path)
    yield path
    if before is None:
        os.environ.pop("MISTAKE_CACHE", None)
    else:
        os.environ["MISTAKE_CACHE"] = before
