"""An optional extra's module that is missing and one that is installed but does not import are told apart: the
second is not fixed by installing the extra (pip finds it present and changes nothing)."""

from __future__ import annotations

from pathlib import Path

import pytest

from graphs.common.errors import InputError, require_extra


def _package(root: Path, name: str, body: str) -> None:
    (root / name).mkdir()
    (root / name / "__init__.py").write_text(body)


def test_a_missing_module_names_the_extra_and_a_broken_one_the_failure(tmp_path: Path,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    # sentence-transformers 2.2 under huggingface_hub >= 0.26, matplotlib 3.7 under numpy 2: the package is there and
    # its own import fails; and a package whose dependency is gone.
    _package(tmp_path, "too_old_extra", "raise ImportError(\"cannot import name 'cached_download' from 'hub'\")\n")
    _package(tmp_path, "extra_without_its_dependency", "import a_dependency_nobody_installed\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(InputError) as missing:
        require_extra("an_extra_nobody_installed", "dashboard", "stream-detect dashboard")
    assert str(missing.value) == (
        "stream-detect dashboard needs the optional 'dashboard' extra (an_extra_nobody_installed is not installed): "
        "pip install 'mistake-detection[dashboard]', or pip install -e '.[dashboard]' in a clone")
    with pytest.raises(InputError) as too_old:
        require_extra("too_old_extra", "dashboard", "stream-detect dashboard")
    assert str(too_old.value) == (
        "stream-detect dashboard: too_old_extra is installed but does not import (cannot import name "
        "'cached_download' from 'hub'); pip install --upgrade too_old_extra (its release may be too old for the "
        "packages it imports)")
    with pytest.raises(InputError) as incomplete:
        require_extra("extra_without_its_dependency", "metrics", "--metrics")
    assert str(incomplete.value).startswith(
        "--metrics: extra_without_its_dependency is installed but does not import (No module named "
        "'a_dependency_nobody_installed'); pip install --upgrade extra_without_its_dependency")


def test_a_broken_package_is_told_in_one_line_beside_another_package_s_unreadable_metadata(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # The package to upgrade is looked up in every installed distribution's metadata: one that is not UTF-8 (an old
    # egg's, a damaged install's) raised UnicodeDecodeError out of the lookup, a traceback in place of the line, in
    # the broken environments this line is for.
    _package(tmp_path, "too_old_extra", "raise ImportError('numpy.core.multiarray failed to import')\n")
    (tmp_path / "damaged-1.0.dist-info").mkdir()
    (tmp_path / "damaged-1.0.dist-info" / "METADATA").write_bytes(b"Metadata-Version: 2.1\nName: d\xe9g\xe2t\n")
    (tmp_path / "damaged-1.0.dist-info" / "top_level.txt").write_text("damaged\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(InputError) as broken:
        require_extra("too_old_extra", "plot", "--plot p.png")
    assert str(broken.value) == (
        "--plot p.png: too_old_extra is installed but does not import (numpy.core.multiarray failed to import); pip "
        "install --upgrade too_old_extra (its release may be too old for the packages it imports)")
