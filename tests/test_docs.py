"""The README and docs/ cannot drift from the code: every command, sub-command and option they name exists.

Command lines in code blocks and in inline code (`stream-detect checker --graph g.json`) are checked against the
`--help` of that very (sub-)command; an option named on its own (a table row such as `--fast`) must exist in some
command of the project. Scripts named as `python benchmarks/x.py --opt` or `python tools/x.py` must exist and
accept their options. The README stays a front door: at most 250 lines.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import importlib.util
import io
import json
import re
import runpy
import shlex
import sys
import tomllib
from collections.abc import Callable, Iterator
from functools import cache
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
DEFAULT_SUBCOMMAND = {"stream-detect": "run"}  # `stream-detect --video demo` is `stream-detect run --video demo`
OPTION = re.compile(r"(?<![\w-])--[a-z][a-z0-9-]*")
# Options of other programs that the docs mention (pip, pytest).
FOREIGN_OPTIONS = frozenset({"--no-deps", "--help", "--index-url"})  # pip's, not ours


@cache
def _entry_points() -> dict[str, Callable[[list[str]], object]]:
    scripts = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]
    found = {}
    for name, target in scripts.items():
        module, _, func = target.partition(":")
        found[name] = getattr(importlib.import_module(module), func)
    return found


def _capture_help(run: Callable[[], object]) -> str | None:
    """The help text a command prints, or None when it refuses (an unknown sub-command, say)."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            run()
        except SystemExit as stop:
            return out.getvalue() if stop.code in (0, None) else None
    return out.getvalue()


@cache
def _help(command: str, sub: str | None) -> str | None:
    main = _entry_points()[command]
    return _capture_help(lambda: main([sub, "--help"] if sub else ["--help"]))


@cache
def _script_help(path: str) -> str | None:
    argv = sys.argv
    sys.argv = [path, "--help"]
    try:
        return _capture_help(lambda: runpy.run_path(str(ROOT / path), run_name="__main__"))
    finally:
        sys.argv = argv


def _code_lines(text: str) -> Iterator[str]:
    """Lines of fenced code blocks (continuations joined) and inline code spans."""
    in_block = False
    pending = ""
    for line in text.splitlines():
        if line.lstrip().startswith("```"):
            in_block = not in_block
            continue
        if in_block:
            joined = pending + line.strip()
            if joined.endswith("\\"):
                pending = joined[:-1] + " "
                continue
            pending = ""
            yield joined.split(" #")[0]
        else:
            yield from re.findall(r"`([^`]+)`", line)


def _commands_in_docs() -> Iterator[tuple[str, str, list[str]]]:
    """(page, command line, its words) for every line that runs one of our commands or scripts."""
    names = set(_entry_points())
    for page in PAGES:
        for text in _code_lines(page.read_text()):
            # `recognition-features import ... && recognition-train --out d.pt`: each command against its own help
            for line in (part.strip() for part in re.split(r"&&|\|\||;|\|", text)):
                try:
                    words = shlex.split(line)
                except ValueError:
                    words = line.split()
                script = len(words) > 1 and words[0] == "python" and words[1].startswith(("benchmarks/", "tools/"))
                if words and (words[0] in names or script):
                    yield page.name, line, words


def _listed_options(help_text: str) -> set[str]:
    """The options a help page lists as its own: the entries argparse indents by two spaces, without their
    descriptions (which name other options: "S being --first-seed") and without what a longer option begins
    with (`--seed` is no option of a page that lists `--seeds`)."""
    return {option for line in help_text.splitlines() if re.match(r" {2}-", line)
            for option in OPTION.findall(re.split(r"\s{2,}", line.strip())[0])}


def _all_help() -> str:
    texts = []
    for command in _entry_points():
        top = _help(command, None) or ""
        texts.append(top)
        for group in re.findall(r"\{([a-z0-9,-]+)\}", top.split("\n\n")[0]):
            texts.extend(_help(command, sub) or "" for sub in group.split(","))
    for _, _, words in _commands_in_docs():
        if words[0] in _entry_points() and len(words) > 1 and not words[1].startswith("-"):
            texts.append(_help(words[0], words[1]) or "")
        elif words[0] == "python" and (ROOT / words[1]).is_file():
            texts.append(_script_help(words[1]) or "")
    return "\n".join(texts)


def test_the_readme_is_a_front_door() -> None:
    lines = (ROOT / "README.md").read_text().splitlines()
    assert len(lines) <= 250, f"README.md has {len(lines)} lines; manuals belong in docs/"
    for page in ("live-pipeline", "wire-format", "task-graphs", "prego-benchmark", "captaincook-benchmark",
                 "recognition", "data-and-citations", "architecture"):
        assert (ROOT / "docs" / f"{page}.md").is_file(), f"docs/{page}.md is missing"


def test_every_documented_command_line_runs_with_its_options() -> None:
    problems = []
    for page, line, words in _commands_in_docs():
        if words[0] == "python":
            script = words[1]
            if not (ROOT / script).is_file():
                problems.append(f"{page}: `{line}` names {script}, which does not exist")
                continue
            help_text = _script_help(script) if OPTION.search(line) else ""
            where = script
        else:
            named = words[1] if len(words) > 1 and not words[1].startswith("-") else None
            sub = named or DEFAULT_SUBCOMMAND.get(words[0])
            help_text = _help(words[0], sub)
            where = f"{words[0]} {sub}" if sub else words[0]
            # A command that takes no sub-command would print its own help for `cmd typo --help`: the top-level
            # help must name every sub-command the docs use.
            listed = named is None or re.search(rf"(?<![\w-]){re.escape(named)}(?![\w-])", _help(words[0], None) or "")
            if help_text is None or not listed:
                problems.append(f"{page}: `{line}`: `{where}` is not a command")
                continue
        for option in OPTION.findall(" ".join(words[1:])):
            if option not in _listed_options(help_text or "") and option not in FOREIGN_OPTIONS:
                problems.append(f"{page}: `{line}`: {where} has no option {option}")
    assert problems == []


def _parser_of(words: list[str]) -> tuple[argparse.ArgumentParser, list[str]]:
    """The parser a documented command line goes through, and the arguments it is given (the sub-commands that
    parse with a parser of their own, `prego-bench replay`, `recognition-features import`, taken off)."""
    from recognition.recognition_train_cli import build_parser as train_parser
    from streaming.offline.features_cli import build_import_parser
    from streaming.offline.features_cli import build_parser as features_parser
    from streaming.stream_detect_cli import build_parser as stream_parser
    from tgml.bench import prego_bench_cli, prego_checker_cli, prego_replay_cli
    from tgml.tgml_cli import _parser as tgml_parser

    command, rest = words[0], words[1:]
    if command == "stream-detect":
        return stream_parser(), rest if rest and not rest[0].startswith("-") else ["run", *rest]
    if command == "recognition-features" and rest[:1] == ["import"]:
        return build_import_parser(), rest[1:]
    prego_subs = {"prepare": prego_bench_cli.prepare_parser, "select": prego_bench_cli.select_parser,
                  "select-checker": prego_checker_cli.build_parser, "replay": prego_replay_cli.build_parser}
    if command == "prego-bench" and rest[:1] and rest[0] in prego_subs:
        return prego_subs[rest[0]](), rest[1:]
    tops: dict[str, Callable[[], argparse.ArgumentParser]] = {
        "stream-detect": stream_parser, "recognition-features": features_parser, "recognition-train": train_parser,
        "tgml": tgml_parser, "prego-bench": prego_bench_cli.bench_parser}
    return tops[command](), rest


def test_every_documented_command_line_gives_its_options_values_they_take() -> None:
    # The option check above passes `--checker binarry` or `--reader ffmpeg`: the option exists, its value does not.
    # Each line is parsed as its command parses it. Not held against it: the required options a short inline example
    # leaves out (`recognition-train --plot curve.png`), an option named in prose without its value (`tgml train
    # --out`), an elision (`prego-bench replay ...`), a redirection, and template lines (`--seeds N`).
    from graphs.common.errors import InputError

    excused = re.compile(r"arguments are required|is required|expected (at least )?one argument")
    problems = []
    for page, line, words in _commands_in_docs():
        if words[0] == "python" or any(re.fullmatch(r"[A-Z][A-Z_]*", word) for word in words):
            continue
        shown = words[:words.index(">")] if ">" in words else words
        parser, argv = _parser_of([word for word in shown if word != "..."])
        try:
            with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
                parser.parse_args(argv)
        except SystemExit:  # `--help`, `--version`: what they print is checked above
            continue
        except InputError as err:
            if not excused.search(str(err)):
                problems.append(f"{page}: `{line}`: {err}")
    assert problems == []


def test_every_option_named_in_the_docs_exists() -> None:
    known = set(OPTION.findall(_all_help())) | FOREIGN_OPTIONS
    problems = [
        f"{page.name}: {option}"
        for page in PAGES
        for option in sorted(set(OPTION.findall(page.read_text())))
        if option not in known
    ]
    assert problems == []


def test_every_documented_python_module_exists() -> None:
    tools = {"pytest", "ruff", "mypy", "pip", "venv"}
    problems = [
        f"{page.name}: `{line}`: no module {module}"
        for page in PAGES
        for line in _code_lines(page.read_text())
        for module in re.findall(r"python3? -m ([\w.]+)", line)
        if module not in tools and importlib.util.find_spec(module) is None
    ]
    assert problems == []


def _resolves(dotted: str) -> bool:
    """``dotted`` names a module of ours, or an attribute of one (`recognition.model.FastStepper.step`)."""
    parts = dotted.split(".")
    for split in range(len(parts), 0, -1):
        try:
            found: object = importlib.import_module(".".join(parts[:split]))
        except ImportError:
            continue
        for attr in parts[split:]:
            if not hasattr(found, attr):
                return False
            found = getattr(found, attr)
        return True
    return False


def test_every_documented_python_path_exists() -> None:
    # `recognition.evidence.calibrate_evidence` named a function that had moved to `recognition.evidence_calibration`:
    # a reader who imports what the page names gets an ImportError.
    packages = "|".join(("graphs", "tgml", "recognition", "streaming"))
    problems = [
        f"{page.name}: {dotted}"
        for page in PAGES
        for dotted in sorted(set(re.findall(rf"(?<![\w/.-])(?:{packages})(?:\.[A-Za-z_]\w*)+", page.read_text())))
        if not dotted.endswith((".md", ".py", ".json")) and not _resolves(dotted)
    ]
    assert problems == []


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_links_between_pages_resolve(page: Path) -> None:
    for target in re.findall(r"\]\(([^)#:]+)(?:#[^)]*)?\)", page.read_text()):
        assert (page.parent / target).exists(), f"{page.name} links to {target}, which does not exist"


def _heading_anchors(page: Path) -> set[str]:
    """The anchors a Markdown renderer gives ``page``'s headings: lower case, punctuation dropped, spaces to hyphens
    (GitHub's rule, without its ``-1`` suffixes for repeated headings)."""
    headings = re.findall(r"^#{1,6} (.+)$", page.read_text(), flags=re.MULTILINE)
    return {re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-") for heading in headings}


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_links_to_a_section_name_one_that_exists(page: Path) -> None:
    # A link to a renamed or never-written section opens the page at its top, without a word.
    broken = [f"{target or page.name}#{anchor}"
              for target, anchor in re.findall(r"\]\(([^)#:]*)#([^)]+)\)", page.read_text())
              if (page.parent / target if target else page).exists()
              and anchor not in _heading_anchors(page.parent / target if target else page)]
    assert broken == [], f"{page.name} links to sections that do not exist: {broken}"


def _python_examples(page: Path) -> list[str]:
    return re.findall(r"```python\n(.*?)```", page.read_text(), flags=re.DOTALL)


def _example_names(page: str) -> dict[str, object]:
    """What each page's Python example leaves to the reader (its data, a stream), from the bundled demo."""
    import torch

    from graphs.annotations import load_annotations
    from graphs.task_graph import load_graph

    demo = ROOT / "streaming" / "demo"
    if page == "task-graphs.md":
        step_ids, step_names, sequences = load_annotations(demo / "demo_annotations.json").training_data("demo-tea")
        return {"step_ids": step_ids, "step_names": step_names, "sequences": sequences}
    if page == "procedure-queries.md":
        return {"graph": load_graph(demo / "demo_graph.json"), "step": 5, "history": [3, 4]}
    # recognition.md: the bundled detector (it has a done head) on a few frames of its backbone's width
    return {"width": 1280, "extractor_name": "efficientnet-lite0", "stream": torch.rand(12, 1280)}


@pytest.mark.parametrize("page", ["task-graphs.md", "procedure-queries.md", "recognition.md"])
def test_the_python_examples_run(page: str) -> None:
    # The recognition example fed the detector's whole output to the segmenter, which refuses a done head's 2C
    # outputs: it failed on the bundled demo detector.
    [example] = _python_examples(ROOT / "docs" / page)
    names = _example_names(page)
    code = example.replace('"detector.pt"', repr(str(ROOT / "streaming" / "demo" / "demo_detector.pt")))
    failure = None
    with contextlib.redirect_stdout(io.StringIO()):
        try:
            exec(compile(code, page, "exec"), names)
        except Exception as err:  # any error of the example is the finding, reported with its page
            failure = err
    assert failure is None, f"{page}'s Python example fails: {failure!r}"


def test_the_task_graph_file_example_loads(tmp_path: Path) -> None:
    # The format's example had insert_stake require step 2, which it does not list: copied as a starting point, the
    # file was refused. Only the elided weight matrix ("...") is left out here.
    from graphs.task_graph import load_graph

    text = (ROOT / "docs" / "task-graphs.md").read_text()
    [example] = re.findall(r"```json\n(\{\n  \"format\": \"task-graph\".*?)```", text, flags=re.DOTALL)
    document = json.loads(example)
    document["weights"] = None
    (tmp_path / "graph.json").write_text(json.dumps(document))
    assert [step["name"] for step in document["steps"]] == list(load_graph(tmp_path / "graph.json").step_names)


def test_the_generators_in_tests_say_they_run_from_a_clones_root() -> None:
    # `tests` is no installed package: `python -m tests.procedure_videos shelf/` run anywhere but the clone's root
    # ends in Python's "No module named 'tests'", and the README said only "from a clone".
    problems = []
    for page in PAGES:
        lines = page.read_text().splitlines()
        for number, line in enumerate(lines):
            if "python -m tests." in line and "root" not in " ".join(lines[max(number - 3, 0):number + 1]):
                problems.append(f"{page.name}:{number + 1}: {line.strip()[:80]}")
    assert problems == []


def test_the_architecture_page_names_every_module_of_each_package() -> None:
    # graphs/annotation_csv.py, the reader of `video,step,start,end` tables, was missing from the page that says what
    # each package holds: a reader looking for where a table's rows are checked was sent to annotations.py alone.
    # Only each package's own folder is held to it; its sub-packages (tgml/bench/, streaming/checker/) are summarised.
    text = (ROOT / "docs" / "architecture.md").read_text()
    bullets = dict(re.findall(r"^- \*\*`([\w/]+)/`\*\*(.*?)(?=^- \*\*|^\S|\Z)", text, flags=re.MULTILINE | re.DOTALL))
    entry_points = "`commands.py`"  # each package's, named once in graphs/common's bullet
    problems = [
        f"{package}/{module.name}"
        for package in ("graphs/common", "graphs", "tgml", "recognition", "streaming", "streaming/offline")
        for module in sorted((ROOT / package).glob("*.py"))
        if module.name != "__init__.py" and f"`{module.name}`" not in bullets.get(package, "")
        and not (module.name == "commands.py" and entry_points in text)
    ]
    assert problems == []


def test_where_the_live_code_lives_names_every_module_of_its_folders() -> None:
    # live-pipeline.md lists the checker's modules one by one, and `changes.py` (the log lines of streams appearing,
    # ending, lost and freed) was missing from it, though architecture.md named it.
    text = (ROOT / "docs" / "live-pipeline.md").read_text().split("## Where the code lives", 1)[1]
    problems = [
        f"streaming/{folder}/{module.name}"
        for folder in ("checker", "detector", "view", "offline")
        for module in sorted((ROOT / "streaming" / folder).glob("*.py"))
        if module.name != "__init__.py" and f"`{module.name}`" not in text
    ]
    assert problems == []
