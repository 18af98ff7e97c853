"""`tgml bench-live` on damaged features files: each is refused with one `error:` line naming it, before training."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from graphs.common.errors import InputError
from tests.cli_errors import cli_error
from tgml.bench.live.recordings import (
    FEATURES_SUBFOLDER,
    HASHES,
    check_covers_steps,
    check_published_hashes,
    feature_files,
    published_hashes,
)
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
    assert err == (f"error: {odd}: the features are 100 wide, those of the folder's other files 768: every file must "
                   "come from the same backbone")
    # Saved transposed, (D, T): said so, where it had been taken for a file cut short (its 768 rows, seconds).
    np.save(odd, np.load(folder / f"{RECORDINGS[1]}.npy").T)
    err = cli_error(main, ["bench-live", "--data", str(data_dir), "--features", str(folder), "--quiet"], capsys)
    assert err.startswith(f"error: {odd}: the features are ") and "saved transposed? (rows, width) = (768, " in err


def test_a_features_file_given_as_the_folder_is_named_a_file(
    data_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    file = features_folder(data_dir, tmp_path) / f"{RECORDINGS[0]}.npy"
    err = cli_error(main, ["bench-live", "--data", str(data_dir), "--features", str(file), "--quiet"], capsys)
    assert err == f"error: --features {file}: a file, expected a folder of <recording_id>.npy files"


@pytest.mark.parametrize(("kept", "folds", "said"), [
    (1, "3", "has only 1 recording(s) in the features folder; k-fold needs at least 3"),
    (2, "2", "has only 2 recording(s) in the features folder; k-fold needs at least 3"),
    (3, "2", "give more folds (up to --folds 3) or add recordings"),
])
def test_too_few_recordings_for_any_folds_say_what_would_do(
    data_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], kept: int, folds: str, said: str
) -> None:
    # With one recording the line used to advise '--folds 1 or fewer', which --folds refuses in turn.
    folder = features_folder(data_dir, tmp_path)
    for name in RECORDINGS[kept:]:
        (folder / f"{name}.npy").unlink()
    err = cli_error(main, ["bench-live", "--data", str(data_dir), "--features", str(folder), "--folds", folds,
                           "--quiet"], capsys)
    assert said in err and "--folds 1 or fewer" not in err


def published_copy_with_one_value_changed(data_dir: Path, tmp_path: Path) -> tuple[Path, Path]:
    """A copy of three data-set files with the data set's SHA256SUMS beside them, one value of one file changed:
    (the features folder, the changed file)."""
    (tmp_path / FEATURES_SUBFOLDER.parent).mkdir()
    folder = features_folder(data_dir, tmp_path / FEATURES_SUBFOLDER.parent)
    shutil.copy(data_dir / FEATURES_SUBFOLDER.parent / HASHES, folder.parent / HASHES)
    changed = folder / f"{RECORDINGS[2]}.npy"
    x = np.load(changed)
    x[7, 3] += 1
    np.save(changed, x)
    return folder, changed


def test_a_data_set_file_that_is_not_the_published_one_is_refused_naming_it(
    data_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # One changed value passes every check of the values (finite, width, length); only the published sha256 tells.
    folder, changed = published_copy_with_one_value_changed(data_dir, tmp_path)
    err = cli_error(main, ["bench-live", "--data", str(data_dir), "--features", str(folder), "--quiet"], capsys)
    assert err == (f"error: {changed}: not the file {folder.parent / HASHES} lists (its sha256 differs: a damaged or "
                   "changed copy); restore it from the data set, or give your own features in a folder of their own "
                   "with --features")
    (folder.parent / HASHES).write_text("not a listing\n")
    err = cli_error(main, ["bench-live", "--data", str(data_dir), "--features", str(folder), "--quiet"], capsys)
    assert err.startswith(f"error: {folder.parent / HASHES}: line 1: not '<sha256>  <file>'")


def test_the_published_features_are_the_ones_their_listing_names(data_dir: Path) -> None:
    folder = data_dir / FEATURES_SUBFOLDER
    check_published_hashes(folder, feature_files(folder))  # raises on any file that differs
    assert len(published_hashes(folder.parent / HASHES)) == len(feature_files(folder)) == 90


def test_a_changed_data_set_file_is_refused_when_its_folder_is_given_as_dot(
    data_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # `--features .` from inside the folder: its name was '' and its parent '.', so the listing was looked for inside
    # the folder itself and the changed file passed unchecked.
    folder, changed = published_copy_with_one_value_changed(data_dir, tmp_path)
    monkeypatch.chdir(folder)
    with pytest.raises(InputError, match=rf"^{RECORDINGS[2]}\.npy: not the file .*{HASHES} lists"):
        check_published_hashes(Path("."), feature_files(Path(".")))


def test_an_annotated_end_far_past_a_features_file_is_written_short() -> None:
    # An end of 1e300 s (a finite number, which the error annotations take) was written with its 301 digits.
    from tgml.bench.error_annotations import ErrorRecording, PerformedStep

    recording = ErrorRecording("1_1", "tea", (PerformedStep(1, "boil", 0.0, (), 1e300),), frozenset(), ())
    with pytest.raises(InputError) as refused:
        check_covers_steps(Path("1_1.npy"), 60, recording, Path("error_annotations.json"))
    assert str(refused.value) == ("1_1.npy: covers 60 s at one vector a second, but its annotated steps in "
                                  "error_annotations.json run to 1e+300 s (a file cut short, or features at another "
                                  "rate?)")
