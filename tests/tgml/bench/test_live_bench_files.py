"""`tgml bench-live` on damaged features files: each is refused with one `error:` line naming it, before training."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from tests.cli_errors import cli_error
from tgml.bench.live.recordings import FEATURES_SUBFOLDER
from tgml.tgml_cli import main

RECORDINGS = ("12_10", "12_119", "12_12")  # three tomatomozzarellasalad recordings of captaincook4d-pe


def features_folder(data_dir: Path, tmp_path: Path) -> Path:
    folder = tmp_path / "features"
    folder.mkdir()
    for name in RECORDINGS:
        shutil.copy(data_dir / FEATURES_SUBFOLDER / f"{name}.npy", folder / f"{name}.npy")
    return folder


def empty(path: Path) -> None:
    path.write_bytes(b"")


def npz_archive(path: Path) -> None:
    x = np.load(path)
    with path.open("wb") as handle:
        np.savez(handle, features=x)


def cut_short(path: Path) -> None:
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])


def integers(path: Path) -> None:
    np.save(path, (np.load(path) * 100).astype(np.int32))


@pytest.mark.parametrize(("damage", "said"), [(empty, "not a NumPy .npy file"), (npz_archive, "an .npz archive"),
                                              (cut_short, "cut short"), (integers, "dtype int32")])
def test_a_damaged_features_file_is_refused_naming_it(
    data_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], damage: Callable[[Path], None], said: str
) -> None:
    folder = features_folder(data_dir, tmp_path)
    bad = folder / f"{RECORDINGS[1]}.npy"
    damage(bad)
    err = cli_error(main, ["bench-live", "--data", str(data_dir), "--features", str(folder), "--quiet"], capsys)
    assert err.startswith(f"error: {bad}: ") and said in err


def test_a_file_of_another_width_is_the_one_named_even_when_read_first(
    data_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = features_folder(data_dir, tmp_path)
    odd = folder / f"{RECORDINGS[0]}.npy"  # the first file in name order
    np.save(odd, np.load(odd)[:, :100])
    err = cli_error(main, ["bench-live", "--data", str(data_dir), "--features", str(folder), "--quiet"], capsys)
    assert err == f"error: {odd}: features of width 100, the folder's others 768"
