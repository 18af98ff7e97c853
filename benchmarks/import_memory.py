"""Peak memory and time of ``recognition-features import`` on a folder of feature files of a chosen size.

Usage::

    python benchmarks/import_memory.py                         # 20 recordings of 2048 x 1024 float32 (168 MB)
    python benchmarks/import_memory.py --recordings 40 --rows 4096 --width 1024   # 671 MB

Writes a folder of ``--recordings`` feature files (``(rows, width)`` float32, one vector a second) and their
annotation file into a temporary folder, runs the import as a user types it, in a child process, and prints the
folder's size, the child's peak resident memory (``ru_maxrss`` of the finished child) and the wall time. The import
checks every file before it writes, then reads each again to write it (`recognition.feature_import`): its peak should
stay near the Python baseline plus a few times the largest file, whatever the folder's size. Measured 2026-12-01 on
the 2-core machine (a bench-live run beside it), against the code of the day before, which held every file until
the write:

| folder | peak RSS before | after | wall before / after |
|---|---|---|---|
| 20 files, 160 MiB (the default) | 200 MiB | 48 MiB | 0.7 s / 0.7-0.8 s |
| 40 files, 640 MiB (``--recordings 40 --rows 4096``) | 682 MiB | 57 MiB | 6.7 s / 7.3 s |
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from graphs.common.command_line import ArgumentParser
from graphs.common.errors import exit_on_input_error
from graphs.common.settings_files import COUNT, WIDTH, Bound, bounded_option


def write_folder(root: Path, recordings: int, rows: int, width: int) -> int:
    """``recordings`` feature files under ``root/npy`` and ``root/labels.json`` (two steps a recording, one vector a
    second); returns the files' total size in bytes."""
    (root / "npy").mkdir()
    rng = np.random.default_rng(0)
    taxonomy = {"bench": {"0": {"id": 0, "name": "first"}, "1": {"id": 1, "name": "second"}}}
    annotations: dict[str, object] = {}
    total = 0
    for k in range(recordings):
        name = f"rec{k:03d}"
        path = root / "npy" / f"{name}.npy"
        np.save(path, rng.standard_normal((rows, width), dtype=np.float32))
        total += path.stat().st_size
        segments = [{"step_id": step, "start_time": start, "end_time": start + rows / 4, "description": "",
                     "has_errors": False, "step_name": taxonomy["bench"][str(step)]["name"]}
                    for step, start in ((0, rows / 8), (1, rows / 2))]
        annotations[name] = {"scenario": "bench", "recording_id": name, "segments": segments}
    (root / "labels.json").write_text(json.dumps({"taxonomy": taxonomy, "annotations": annotations}))
    return total


@exit_on_input_error
def main() -> None:
    parser = ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--recordings", type=bounded_option(COUNT), default=20, help="feature files (default 20)")
    parser.add_argument("--rows", type=bounded_option(Bound(1, 10**7)), default=2048,
                        help="vectors per file, one a second (default 2048)")
    parser.add_argument("--width", type=bounded_option(WIDTH), default=1024, help="vector width (default 1024)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="import-memory-") as scratch:
        root = Path(scratch)
        size = write_folder(root, args.recordings, args.rows, args.width)
        command = [sys.executable, "-m", "streaming.offline.features_cli", "import", "--features",
                   str(root / "npy"), "--annotations", str(root / "labels.json"), "--rate", "1", "--out",
                   str(root / "out")]
        start = time.perf_counter()
        done = subprocess.run(command, capture_output=True, text=True, check=False)
        wall = time.perf_counter() - start
        if done.returncode:
            sys.exit(f"error: the import failed ({done.returncode}): {done.stderr.strip()}")
        peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024  # KiB on Linux
    largest = args.rows * args.width * 4 / 2**20
    print(f"import of {args.recordings} files, {size / 2**20:.0f} MiB ({largest:.0f} MiB the largest): "
          f"peak RSS {peak:.0f} MiB, {wall:.1f} s")


if __name__ == "__main__":
    main()
