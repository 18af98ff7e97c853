"""Every number a settings file, a ``--set KEY=VALUE`` or a flag gives is checked against its config's table of
allowed values (`graphs.common.settings_files.check_settings`) before any work starts: one ``error:`` line naming the
file and key (or the option), exit status 2. ``beta = 9223372036854775807`` trained to a loss of 1e21,
``ensemble_size`` or ``layers`` that large hung, ``val_videos = 5`` ended in a TypeError traceback."""

from __future__ import annotations

import dataclasses
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from graphs.common.errors import InputError
from graphs.common.settings_files import Bound, check_settings, parse_set_options, settings_rules
from recognition.feature_folders import FeatureConfig
from recognition.segmenter import SegmenterConfig
from recognition.train import DetectorTrainConfig, load_detector_training_config
from streaming.demo.paths import DEMO_DIR
from tgml.bench.captaincook import DEFAULT_CONFIG
from tgml.bench.prego.methods import SETTINGS_DIR, load_method_settings
from tgml.learners.noisy_and_do.combination import CombinationConfig
from tgml.learners.registry import LEARNERS, learner

REPO = Path(__file__).resolve().parents[3]
# What a TOML file can write that no number setting takes: an int past any range, NaN, a bool (Python's True is the
# int 1), a negative.
HOSTILE = {"huge": "9223372036854775807", "nan": "nan", "bool": "true", "negative": "-1"}
SETTINGS_CLASSES = sorted({entry.config_class for entry in LEARNERS.values()}
                          | {CombinationConfig, DetectorTrainConfig, FeatureConfig}, key=lambda c: c.__name__)


def _flat(name: str) -> Callable[[Path], object]:
    return lambda path: learner(name).config_file(path)


# (command, how it reads its settings file, table the key sits in ("" for a flat file), key).
FILE_CASES: list[tuple[str, Callable[[Path], object], str, str]] = [
    ("tgml-train-noisy-and", _flat("noisy-and"), "", "edge_cost"),
    ("tgml-train-noisy-and", _flat("noisy-and"), "", "epochs"),
    ("tgml-train-do", _flat("do"), "", "beta"),
    ("tgml-train-do", _flat("do"), "", "sa_patience"),
    ("tgml-train-do-cv", _flat("do-cv"), "", "threshold_scale"),
    ("tgml-train-do-ensemble", _flat("do-ensemble"), "", "ensemble_size"),
    ("tgml-train-tgt-text", _flat("tgt-text"), "", "layers"),
    ("tgml-train-tgt-text", _flat("tgt-text"), "", "similarity_scale"),
    ("tgml-bench-captaincook", lambda path: learner("do").config_file(path, DEFAULT_CONFIG), "", "cycle_breaking_from"),
    ("prego-bench", lambda path: load_method_settings("own", path), "do", "beta"),
    ("prego-bench", lambda path: load_method_settings("own", path), "do-ensemble", "ensemble_size"),
    ("prego-bench", lambda path: load_method_settings("own", path), "tgt-text", "beta_updates"),
    ("prego-bench", lambda path: load_method_settings("own", path), "noisy-and-do", "threshold"),
    ("recognition-train", load_detector_training_config, "train", "batch_size"),
    ("recognition-train", load_detector_training_config, "train", "weight_decay"),
    ("recognition-train", load_detector_training_config, "features", "fps"),
]
NOISY_AND_DO_SUBTABLES = ("\n[noisy-and-do.noisy-and]\n[noisy-and-do.do-ensemble]\n")


@pytest.mark.parametrize("value", HOSTILE.values(), ids=HOSTILE.keys())
@pytest.mark.parametrize(("command", "read", "table", "key"), FILE_CASES,
                         ids=[f"{c}-{t or 'flat'}-{k}" for c, _, t, k in FILE_CASES])
def test_a_hostile_number_in_a_settings_file_is_refused_naming_file_and_key(
        command: str, read: Callable[[Path], object], table: str, key: str, value: str, tmp_path: Path) -> None:
    path = tmp_path / "settings.toml"
    text = f"{key} = {value}\n"
    if table:
        text = f"[{table}]\n{text}" + (NOISY_AND_DO_SUBTABLES if table == "noisy-and-do" else "")
    path.write_text(text)
    with pytest.raises(InputError) as refused:
        read(path)
    where = f"[{table}] " if table else ""
    message = str(refused.value)
    assert message.startswith(f"{path}: {where}{key} = {value}: expected ")
    assert "\n" not in message


@pytest.mark.parametrize("value", HOSTILE.values(), ids=HOSTILE.keys())
@pytest.mark.parametrize("key", ["epochs", "layers", "beta_start", "dropout"])
def test_a_hostile_set_option_is_refused_naming_the_option(key: str, value: str) -> None:
    # benchmarks/tgt_captaincook.py and tgt_prego.py: the file is good, the --set value is not (it was blamed on
    # the file, in a traceback).
    with pytest.raises(InputError) as refused:
        learner("tgt-text").config_file(REPO / "configs" / "tgt-text.toml", option="--set",
                                        **parse_set_options([f"{key}={value}"]))
    assert str(refused.value).startswith(f"--set {key}={value}: expected ")


@pytest.mark.parametrize("item", ["epochs", "=3", "epochs=1\x00"])
def test_a_malformed_set_option_is_one_line(item: str) -> None:
    with pytest.raises(InputError, match=r"^--set "):
        learner("tgt-text").config_file(REPO / "configs" / "tgt-text.toml", option="--set",
                                        **parse_set_options([item]))


def test_a_float_where_an_integer_is_wanted_and_a_list_of_names_that_is_a_number_are_refused(tmp_path: Path) -> None:
    path = tmp_path / "d.toml"
    path.write_text("epochs = 10.0\n")  # cut to 10 without a word, or a fraction of an epoch
    with pytest.raises(InputError, match=r"d\.toml: epochs = 10\.0: expected an integer in 1\.\.100000$"):
        learner("do").config_file(path)
    path.write_text("[train]\nval_videos = 5\n")  # 'int' object is not iterable
    with pytest.raises(InputError, match=r"\[train\] val_videos = 5: expected a list of video names$"):
        load_detector_training_config(path)


@pytest.mark.parametrize("config_type", SETTINGS_CLASSES, ids=lambda c: c.__name__)
def test_every_number_setting_has_a_range_and_the_defaults_are_in_it(config_type: type) -> None:
    numbers = {f.name for f in dataclasses.fields(config_type)
               if str(f.type) in ("int", "float", "int | None", "float | None")}
    table: dict[str, Any] = dict(getattr(config_type, "BOUNDS", {}))
    assert numbers <= {name for name, allowed in table.items() if isinstance(allowed, Bound)}
    check_settings(config_type())  # the defaults
    assert set(settings_rules(config_type)) == set(table)


def test_a_number_setting_without_a_range_is_a_bug_not_a_pass() -> None:
    @dataclasses.dataclass(frozen=True)
    class Unbounded:
        size: int = 3

    with pytest.raises(TypeError, match="no Bound"):
        check_settings(Unbounded())


@pytest.mark.parametrize("path", sorted((REPO / "configs").glob("*.toml")), ids=lambda p: p.name)
def test_every_shipped_config_still_loads(path: Path) -> None:
    name = path.name
    if name.startswith("miniroad-"):
        load_detector_training_config(path)
    elif name.startswith("prego-"):
        load_method_settings("own", path)
    else:  # a flat file of one learner's fields, the learner's name before the dataset's
        method = next(m for m in ("noisy-and", "do", "tgt-text") if name.startswith((f"{m}-", f"{m}.")))
        learner(method).config_file(path)


@pytest.mark.parametrize("path", sorted(SETTINGS_DIR.glob("*.toml")), ids=lambda p: p.name)
def test_every_shipped_benchmark_settings_file_still_loads(path: Path) -> None:
    load_method_settings("own", path)


def _run(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, *argv], capture_output=True, text=True, timeout=120, cwd=REPO)


def test_tgml_train_refuses_a_huge_beta_in_one_line_with_status_2(tmp_path: Path) -> None:
    config = tmp_path / "do.toml"
    config.write_text("beta = 9223372036854775807\nepochs = 5\n")
    done = _run("-m", "tgml.tgml_cli", "train", "--annotations", str(DEMO_DIR / "demo_annotations.json"),
                "--scenario", "demo-tea", "--method", "do", "--config", str(config), "--out", str(tmp_path / "g.json"))
    assert done.returncode == 2
    assert done.stderr == f"error: {config}: beta = 9223372036854775807: expected a number in [0, 1000]\n"
    assert not (tmp_path / "g.json").exists()


@pytest.mark.parametrize("script", ["benchmarks/tgt_captaincook.py", "benchmarks/tgt_prego.py"])
def test_the_tgt_benchmarks_refuse_no_seeds_with_status_2(script: str) -> None:
    # tgt_captaincook.py ended in an IndexError traceback, tgt_prego.py in a ZeroDivisionError after its first dataset.
    done = _run(script, "--seeds", "0")
    assert done.returncode == 2
    assert done.stderr == "error: --seeds 0: need at least 1 (and at most 1000)\n"


def test_the_tgt_benchmark_refuses_a_bool_for_a_number_in_set_with_status_2() -> None:
    done = _run("benchmarks/tgt_captaincook.py", "--set", "layers=true")
    assert done.returncode == 2
    assert done.stderr == "error: --set layers=true: expected an integer in 1..64\n"



@pytest.mark.parametrize(("doc", "config_type"), [("task-graphs.md", entry.config_class) for entry in LEARNERS.values()
                                                  if entry.name not in ("noisy-and-do", "msgi", "msg2")]
                         + [("task-graphs.md", CombinationConfig), ("recognition.md", DetectorTrainConfig),
                            ("recognition.md", FeatureConfig), ("recognition.md", SegmenterConfig)],
                         ids=lambda v: getattr(v, "__name__", v))
def test_the_docs_tables_of_allowed_values_say_what_the_code_checks(doc: str, config_type: type) -> None:
    rows = [line for line in (REPO / "docs" / doc).read_text().splitlines() if line.startswith("| `")]
    for key, rule in settings_rules(config_type).items():
        row = next((line for line in rows if line.startswith(f"| `{key}` |") and "allowed" not in line
                    and (rule in line or key == "threads")), None)
        assert row is not None, f"docs/{doc}: no row of allowed values for {key!r} saying {rule!r}"



def test_a_file_and_the_set_options_over_it_are_checked_together(tmp_path: Path) -> None:
    # The file's heads = 3 does not divide the default width 64, but does divide the width --set gives: what runs
    # is 96 / 3. Checked apart, the file was refused for a combination that never ran.
    path = tmp_path / "tgt.toml"
    path.write_text("heads = 3\n")
    config = learner("tgt-text").config_file(path, option="--set", **parse_set_options(["width=96"]))
    assert (config.width, config.heads) == (96, 3)
    # A pair that does not fit is named by the field at fault, where that field came from.
    with pytest.raises(InputError, match=r"^--set heads=5: expected an integer >= 1 that divides width$"):
        learner("tgt-text").config_file(path, option="--set", **parse_set_options(["width=96", "heads=5"]))
    with pytest.raises(InputError, match=rf"^{path}: heads = 3: expected an integer >= 1 that divides width$"):
        learner("tgt-text").config_file(path, option="--set", **parse_set_options(["width=64"]))
    # A flag wins over the file's value, as its help says: the value the flag replaces takes no part in the run.
    path.write_text("beta = 2000\n")
    assert learner("do").config_file(path, beta=0.5).beta == 0.5
    with pytest.raises(InputError, match=rf"^{path}: beta = 2000: expected a number in \[0, 1000\]$"):
        learner("do").config_file(path, epochs=10)
