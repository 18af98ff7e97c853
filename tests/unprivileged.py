"""Running a child without the privileges that override file modes, so that a mode-000 file, folder or socket is
refused to it as it is to any user. Import it as `from tests.unprivileged import unprivileged`.
"""

from __future__ import annotations

import os
import shutil


def unprivileged() -> list[str] | None:
    """A command prefix under which a mode-000 file or folder is unreadable: none as a user; as root, without the
    capabilities that override file modes (setpriv); None where neither can be had."""
    if os.geteuid() != 0:
        return []
    if shutil.which("setpriv") is None:
        return None
    caps = "-dac_override,-dac_read_search"
    return ["setpriv", f"--inh-caps={caps}", f"--bounding-set={caps}"]
