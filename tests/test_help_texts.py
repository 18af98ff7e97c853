"""What a new user reads first: every command's ``--help`` page, and where a mistyped option sends them.

A first reader of the README found raw reStructuredText in the help pages, a ``stream-detect --help`` page without
``--video``, and an "unrecognized arguments" line pointing at that page instead of the sub-command's.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import re
from collections.abc import Callable
from pathlib import Path

import pytest

from recognition.recognition_train_cli import main as recognition_train
from streaming.offline.features_cli import main as recognition_features
from streaming.stream_detect_cli import SUBCOMMANDS
from streaming.stream_detect_cli import main as stream_detect
from tests.cli_errors import cli_error
from tgml.bench.prego_bench_cli import main as prego_bench
from tgml.tgml_cli import SUBCOMMANDS as TGML_COMMANDS
from tgml.tgml_cli import main as tgml

ROOT = Path(__file__).resolve().parents[1]
TGML_SUBCOMMANDS = ("train", "show", "eval", "bench-captaincook", "bench-queries", "bench-synthetic")
PAGES: list[tuple[str, Callable[[list[str]], object], list[str]]] = [
    ("stream-detect", stream_detect, []),
    *[(f"stream-detect {c}", stream_detect, [c]) for c in SUBCOMMANDS],
    ("tgml", tgml, []),
    *[(f"tgml {c}", tgml, [c]) for c in TGML_SUBCOMMANDS],
    ("prego-bench", prego_bench, []),
    *[(f"prego-bench {c}", prego_bench, [c]) for c in ("prepare", "select", "replay")],
    ("recognition-train", recognition_train, []),
    ("recognition-features", recognition_features, []),
]


def help_page(main: Callable[[list[str]], object], argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    """The text ``--help`` prints (it exits with status 0)."""
    with pytest.raises(SystemExit) as exit_info:
        main([*argv, "--help"])
    assert exit_info.value.code == 0
    return capsys.readouterr().out


@pytest.mark.parametrize(("name", "main", "argv"), PAGES, ids=[name for name, _, _ in PAGES])
def test_help_pages_are_plain_text(
    name: str, main: Callable[[list[str]], object], argv: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    page = help_page(main, argv, capsys)
    assert page.startswith("usage:")
    assert "``" not in page, f"{name} --help shows reStructuredText literals"


def test_stream_detect_help_shows_the_main_use_with_examples(capsys: pytest.CaptureFixture[str]) -> None:
    page = help_page(stream_detect, [], capsys)
    assert "stream-detect [run] --video SOURCE" in page
    assert "stream-detect run --help" in page
    for example in ("--video demo", "--video clip.mp4", "--video cam0"):
        assert f"stream-detect {example}" in page


COMMANDS = [(name, main) for name, main, argv in PAGES if not argv]  # each installed command, by its top page


@pytest.mark.parametrize(("name", "main"), COMMANDS, ids=[name for name, _ in COMMANDS])
def test_every_command_says_its_version(
    name: str, main: Callable[[list[str]], object], capsys: pytest.CaptureFixture[str]
) -> None:
    # There was no --version: stream-detect took it for a run option, recognition-train asked for --features.
    with pytest.raises(SystemExit) as exit_info:
        main(["--version"])
    assert exit_info.value.code == 0
    assert capsys.readouterr().out == f"{name} {importlib.metadata.version('mistake-detection')}\n"


SUB_COMMANDS: list[tuple[str, Callable[[list[str]], object], list[str]]] = [
    *[(f"stream-detect {c}", stream_detect, [c]) for c in SUBCOMMANDS],
    ("stream-detect (run, the default)", stream_detect, ["--video", "demo"]),
    *[(f"tgml {c}", tgml, [c]) for c in TGML_COMMANDS],
    *[(f"prego-bench {c}", prego_bench, [c]) for c in ("prepare", "select", "select-checker", "replay")],
    ("recognition-features import", recognition_features, ["import"]),
]


@pytest.mark.parametrize(("name", "main", "argv"), SUB_COMMANDS, ids=[name for name, _, _ in SUB_COMMANDS])
def test_every_sub_command_says_its_version(
    name: str, main: Callable[[list[str]], object], argv: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    # The README says every command prints --version, and `stream-detect eval --version` or `tgml bench-live
    # --version` was an unrecognized argument: the command's version, before any option it requires is missed.
    with pytest.raises(SystemExit) as exit_info:
        main([*argv, "--version"])
    assert exit_info.value.code == 0
    assert capsys.readouterr().out == f"{name.split()[0]} {importlib.metadata.version('mistake-detection')}\n"


@pytest.mark.parametrize("argv", [["--vidoe", "demo"], ["run", "--video", "demo", "--fsat"]])
def test_a_mistyped_run_option_points_to_the_run_help(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    line = cli_error(stream_detect, argv, capsys)
    assert line.startswith("error: stream-detect run: unrecognized arguments: ")
    assert line.endswith("(see stream-detect run --help)")


@pytest.mark.parametrize(("main", "argv", "page"), [
    (stream_detect, ["checker", "--demo", "--bogus"], "stream-detect checker --help"),
    (tgml, ["bench-queries", "--bogus"], "tgml bench-queries --help"),
    (tgml, ["show", "g.json", "--bogus"], "tgml show --help"),
    (recognition_train, ["--features", "f", "--out", "o.pt", "--bogus"], "recognition-train --help"),
])
def test_an_unknown_option_points_to_the_page_that_lists_the_options(
    main: Callable[[list[str]], object], argv: list[str], page: str, capsys: pytest.CaptureFixture[str]
) -> None:
    line = cli_error(main, argv, capsys)
    assert "unrecognized arguments: --bogus" in line and line.endswith(f"(see {page})")


def _all_parsers() -> list[argparse.ArgumentParser]:
    from recognition.recognition_train_cli import build_parser as train_parser
    from streaming.offline.features_cli import build_import_parser
    from streaming.offline.features_cli import build_parser as features_parser
    from streaming.stream_detect_cli import build_parser as stream_parser
    from tgml.bench.prego_bench_cli import bench_parser, prepare_parser, select_parser
    from tgml.bench.prego_checker_cli import build_parser as select_checker_parser
    from tgml.bench.prego_replay_cli import build_parser as replay_parser
    from tgml.tgml_cli import _parser as tgml_parser

    found: list[argparse.ArgumentParser] = []
    todo: list[argparse.ArgumentParser] = [make() for make in (
        train_parser, features_parser, build_import_parser, stream_parser, bench_parser, prepare_parser,
        select_parser, select_checker_parser, replay_parser, tgml_parser)]
    while todo:
        parser = todo.pop()
        found.append(parser)
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                todo.extend(action.choices.values())
    return found


def test_every_help_page_fits_an_80_column_terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    # A longer line wraps at the terminal's edge: stream-detect --help's examples broke mid-comment, and
    # recognition-features' usage line mid-option ([--test-fraction TEST_FRACTION | --test-videos TEST_VIDEOS]).
    monkeypatch.setenv("COLUMNS", "80")  # argparse wraps to it, as to a real terminal's width
    wide = [f"{parser.prog}: {line}" for parser in _all_parsers() for line in parser.format_help().splitlines()
            if len(line) > 80]
    assert wide == []


def test_every_parser_has_the_version_option() -> None:
    # A sub-command added later is not left without it (`test_every_sub_command_says_its_version` runs the ones now).
    assert [parser.prog for parser in _all_parsers() if "--version" not in parser._option_string_actions] == []


def test_every_page_says_what_its_command_does() -> None:
    # stream-detect run, view and eval --help went from the usage straight to the options: a new user who typed
    # `stream-detect view --help` learnt the options of a command nothing said the purpose of.
    assert [parser.prog for parser in _all_parsers() if not (parser.description or "").strip()] == []


def test_the_run_page_says_the_checker_is_a_process_of_its_own(capsys: pytest.CaptureFixture[str]) -> None:
    # It said "all in this process": the one-command run's checker is a child process (streaming.checker.process),
    # the one a user sees beside it in ps and whose end the run waits for.
    from streaming import all_in_one
    from streaming.checker.process import CheckerProcess

    assert all_in_one.CheckerProcess is CheckerProcess
    page = " ".join(help_page(stream_detect, ["run"], capsys).split())
    assert "in this process" not in page and "the checker in a child process" in page, page


def test_every_option_says_what_it_does() -> None:
    # prego-bench select and select-checker listed --dataset with its choices and not a word more.
    silent = [f"{parser.prog} {action.option_strings or action.dest}" for parser in _all_parsers()
              for action in parser._actions
              if not isinstance(action, argparse._SubParsersAction) and not action.help]
    assert silent == []


def test_the_defaults_a_help_text_states_are_the_defaults() -> None:
    # prego-bench --seeds said "(default 1)" of the first seed, whose default is 42.
    stated = re.compile(r"\(default:? (-?\d+(?:\.\d+)?)[,;)]")
    wrong = []
    for parser in _all_parsers():
        for action in parser._actions:
            match = stated.search(action.help or "")
            if match and isinstance(action.default, int | float) and float(match[1]) != action.default:
                wrong.append(f"{parser.prog} {action.option_strings[0]}: says {match[1]}, is {action.default}")
    assert wrong == []


def test_prego_bench_help_names_the_results_schema_where_it_is() -> None:
    from tgml.bench.prego_bench_cli import bench_parser

    helps = {a.option_strings[0]: a.help or "" for a in bench_parser()._actions}
    assert "schema: docs/prego-benchmark.md, 'Results document'" in helps["--json"]
    assert "## Results document (`--json`)" in (ROOT / "docs" / "prego-benchmark.md").read_text()


def test_recognition_features_help_states_the_extraction_defaults() -> None:
    # Its parser must not import torch (recognition-features --help stays fast), so these defaults are written
    # in its help by hand: a change of the constants has to show here.
    from streaming.offline.features import DEFAULT_COPIES, DEFAULT_FPS, EFFICIENTNET_NAME
    from streaming.offline.features_cli import build_parser

    helps = {a.option_strings[0]: a.help or "" for a in build_parser()._actions if a.option_strings}
    assert f"(default {DEFAULT_FPS:g};" in helps["--fps"]
    assert f"default {DEFAULT_COPIES}, 0: none" in helps["--augment-copies"]
    assert helps["--extractor"].startswith(f"feature extractor: {EFFICIENTNET_NAME} (default)")
    assert build_parser().get_default("extractor") == EFFICIENTNET_NAME


def test_recognition_train_help_states_the_defaults_without_a_config() -> None:
    # --epochs said "override [train] epochs": a user of the no-config default (the README's command) could not
    # tell from --help how many epochs it trains.
    from recognition.recognition_train_cli import build_parser
    from recognition.train import SMALL_CPU_DETECTOR, DetectorTrainConfig

    helps = {a.option_strings[0]: a.help or "" for a in build_parser()._actions if a.option_strings}
    assert f"; {SMALL_CPU_DETECTOR['epochs']} without --config)" in helps["--epochs"]
    assert f"; {DetectorTrainConfig.seed} without --config)" in helps["--seed"]
    assert f"; {SMALL_CPU_DETECTOR['threads']} without --config)" in helps["--threads"]


def test_recognition_features_usage_shows_the_import_command(capsys: pytest.CaptureFixture[str]) -> None:
    # Its usage line listed the video options only: `import`, the command for features of your own backbone, was
    # named in the page's last line alone.
    page = help_page(recognition_features, [], capsys)
    usage = page.split("\n\n")[0]
    assert usage.startswith("usage: recognition-features --videos DIR --annotations FILE --out DIR")
    assert "\n       recognition-features import --features DIR --annotations FILE --rate R" in usage
    assert "recognition-features import --help" in " ".join(page.split("\n\n")[1].split())  # the description says it
    assert help_page(recognition_features, ["import"], capsys).startswith("usage: recognition-features import ")


def test_prego_bench_usage_shows_its_sub_commands(capsys: pytest.CaptureFixture[str]) -> None:
    # Its usage listed the benchmark's twenty options alone; replay, select and the rest were named in the page's last
    # lines only.
    usage = help_page(prego_bench, [], capsys).split("\n\n")[0]
    assert usage.splitlines() == ["usage: prego-bench [--dataset DATASET ... | --annotations FILE] [options]",
                                  "       prego-bench {prepare,select,select-checker,replay} [options]"]
    assert help_page(prego_bench, ["replay"], capsys).startswith("usage: prego-bench replay ")


def test_the_usage_lines_name_the_values_as_the_options_below_them(capsys: pytest.CaptureFixture[str]) -> None:
    # recognition-features' usage read "import --features DIR --annotations FILE --rate R --out DIR", its import page
    # "--annotations ANNOTATIONS --rate RATE --out OUT"; prego-bench's read "--dataset NAME" over "--dataset DATASET".
    page = help_page(recognition_features, ["import"], capsys)
    for option in ("--features DIR", "--annotations FILE", "--rate R", "--out DIR"):
        assert f"\n  {option} " in page, option
    page = help_page(prego_bench, [], capsys)
    assert page.startswith("usage: prego-bench [--dataset DATASET ... |")
    assert "\n  --dataset DATASET [DATASET ...]\n" in page


@pytest.mark.parametrize(("main", "argv", "said"), [
    (recognition_features, ["import", "--features", "npy", "--annotations", "a.json", "--rate", "1", "--out", "f",
                            "--test-video", "v3"],
     "recognition-features import: unrecognized arguments: --test-video v3; did you mean --test-videos? "
     "(see recognition-features import --help)"),
    (stream_detect, ["--video", "demo", "--detectr", "d.pt"],
     "stream-detect run: unrecognized arguments: --detectr d.pt; did you mean --detector? (see stream-detect run "
     "--help)"),
    (tgml, ["train", "--annotations", "a.json", "--out", "g.json", "--exclude-video", "v3"],
     "tgml train: unrecognized arguments: --exclude-video v3; did you mean --exclude-videos? (see tgml train --help)"),
    # A required option mistyped was answered only that it is required, to a user who believed it given.
    (recognition_features, ["import", "--features", "npy", "--annotation", "a.json", "--rate", "1", "--out", "f"],
     "recognition-features import: unrecognized arguments: --annotation; did you mean --annotations? (see "
     "recognition-features import --help)"),
    (recognition_train, ["--feature", "f", "--out", "o.pt"],
     "recognition-train: unrecognized arguments: --feature; did you mean --features? (see recognition-train --help)"),
    # The others missing are said once, after the hint (argparse's list in brackets had named the meant one again).
    (recognition_features, ["import", "--featurs", "x"],
     "recognition-features import: unrecognized arguments: --featurs; did you mean --features? Also required: "
     "--annotations, --rate, --out (see recognition-features import --help)"),
    (tgml, ["train", "--bogus", "x"],
     "tgml train: unrecognized arguments: --bogus; also required: --annotations, --out (see tgml train --help)"),
    # Matched without the leading dashes: --bogus is like no option (it had looked like --verbose).
    (stream_detect, ["eval", "--demo", "--bogus"], "stream-detect eval: unrecognized arguments: --bogus (see "
                                                   "stream-detect eval --help)"),
])
def test_a_mistyped_option_is_named_with_the_one_meant(
    main: Callable[[list[str]], object], argv: list[str], said: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli_error(main, argv, capsys) == f"error: {said}"
