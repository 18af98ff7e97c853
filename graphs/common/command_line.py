"""The command line every command parses with: usage mistakes as one-line `InputError`s, no option given twice or
abbreviated, an unknown option named by the sub-command it was meant for, and ``--help`` text from a module's
docstring."""

from __future__ import annotations

import argparse
import sys
import weakref
from collections.abc import Sequence
from typing import Any, NoReturn

from graphs.common.errors import InputError, command_began
from graphs.common.safe_text import closest_name, quoted, shortened, unknown_name

REQUIRED = "the following arguments are required: "  # how argparse starts the message of missing required ones
DISTRIBUTION = "mistake-detection"  # the name pip installs the commands under (pyproject.toml's [project] name)


def _as_typed(value: object) -> str:
    """An option's value (or values) as a message quotes them: each string `quoted` (a number, as itself), several
    after one another as they were typed (``"a.npy" "b.npy"``), the whole cut with ``...`` (`shortened`)."""
    values = value if isinstance(value, list | tuple) else [value]
    return shortened(" ".join(quoted(v if isinstance(v, int | float) else str(v)) for v in values), 80)


class _StoreOnce(argparse._StoreAction):
    """argparse's ``store``, refusing an option given twice: argparse keeps the last value without a word, so
    ``--video demo --video demo:correct`` ran only the second video, and ``--graph a.json --graph b.json`` checked
    against ``b.json`` alone. An option of several values refuses a value given twice among them (``--dataset
    epic-tent-o epic-tent-o`` would be run and reported twice, or refused deeper down under a name never typed)."""

    def __init__(self, *args: object, twice: str = "", **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        self.twice = twice  # what to do instead, said after the refusal (add_argument(..., twice="..."))
        self._stored_in: weakref.ref[argparse.Namespace] | None = None  # the namespace of the last parse it stored in

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace,
                 values: str | Sequence[Any] | None, option_string: str | None = None) -> None:
        if self._stored_in is not None and self._stored_in() is namespace:
            option = option_string or self.dest
            how = "it takes one value" if self.nargs in (None, "?") else f"give all its values after one {option}"
            first = _as_typed(getattr(namespace, self.dest))
            parser.error(f"{option} given twice ({first}, then {_as_typed(values)}); {how}"
                         + (f"; {self.twice}" if self.twice else ""))
        self._stored_in = weakref.ref(namespace)
        if self.nargs in ("+", "*") and isinstance(values, list):  # not a one-value option whose type makes a list
            seen: set[object] = set()
            for value in values:
                if value in seen:
                    parser.error(f"{option_string or self.dest} {' '.join(map(str, values))}: {value} is given twice")
                seen.add(value)
        super().__call__(parser, namespace, values, option_string)


class ArgumentParser(argparse.ArgumentParser):
    """`argparse.ArgumentParser` whose usage errors (a missing option, a bad choice, a value its ``type`` refuses)
    are `InputError`s, so a command decorated with `exit_on_input_error` reports them like every other user
    mistake: one ``error: ...`` line and exit status 2 (argparse prints its usage block, then the message). An
    option that takes one value is refused when given twice (`_StoreOnce`), and an option must be spelt out whole
    (no abbreviations: an unknown option is never taken for the known one it begins).

    Sub-command parsers made with ``add_subparsers().add_parser`` are of this class too.
    """

    def __init__(self, *args: object, **kwargs: object) -> None:
        # No abbreviations: `prego-bench --seed 7` ran seeds 42..48 as `--seeds 7`, without a word.
        kwargs.setdefault("allow_abbrev", False)
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        self._parsing: list[str] = []  # the arguments of the parse under way (`error` names an unknown one)
        self.register("action", "store", _StoreOnce)
        self.register("action", None, _StoreOnce)  # argparse's name for its default action
        self.register("action", "parsers", _SubCommands)  # what add_subparsers makes

    def _print_message(self, message: str, file: Any = None) -> None:  # argparse's own: a writable or None
        """Write ``--help`` like argparse, but let a write error through: argparse drops it, so ``--help >
        /dev/full`` printed nothing and exited 0; `exit_on_input_error` reports the full device."""
        if message:
            out = file if file is not None else sys.stderr
            out.write(message)
            flush = getattr(out, "flush", None)
            if flush is not None:
                flush()

    def error(self, message: str) -> NoReturn:
        """Raise the usage error as an `InputError` naming the command.

        A required option missed because it was mistyped (``--annotation labels.json``) is named as the unknown
        option it is, with the one meant: argparse says only that ``--annotations`` is required, to a user who
        believes it given.
        """
        if message.startswith(REQUIRED) and not self._subparsers:
            options = self._parsing[:self._parsing.index("--")] if "--" in self._parsing else self._parsing
            unknown = [arg for arg in options if arg.startswith("--")
                       and arg.split("=", 1)[0] not in self._option_string_actions]
            if unknown:
                # The option meant is missing only because it was mistyped: the hint names it, the rest are said
                # once (argparse's own list in brackets beside the hint named it twice).
                meant = self.meant_option(unknown)
                rest = [name for name in message.removeprefix(REQUIRED).split(", ") if name != meant]
                message = self.unknown_options(unknown)
                if rest:
                    message += f"{' A' if message.endswith('?') else '; a'}lso required: {', '.join(rest)}"
        raise InputError(f"{self.prog}: {message} (see {self.prog} --help)")

    def meant_option(self, extras: Sequence[str]) -> str | None:
        """The option (``--annotations``) the first unknown one of ``extras`` most likely meant, or None."""
        first = next((arg.split("=", 1)[0] for arg in extras if arg.startswith("--")), None)
        # Matched without the dashes every option shares, which made --bogus look like --verbose.
        known = [option[2:] for option in self._option_string_actions if option.startswith("--")]
        close = closest_name(first[2:], known) if first is not None else None
        return f"--{close}" if close is not None else None

    def unknown_options(self, extras: Sequence[str]) -> str:
        """``unrecognized arguments: ...``, ending with the option the first unknown one most likely meant."""
        meant = self.meant_option(extras)
        hint = f"; did you mean {meant}?" if meant is not None else ""
        return f"unrecognized arguments: {' '.join(extras)}{hint}"

    def parse_known_args(self, args: Sequence[str] | None = None,  # type: ignore[override]
                         namespace: argparse.Namespace | None = None) -> tuple[argparse.Namespace, list[str]]:
        """Parse like argparse, keeping the arguments for `error` (a sub-command's parser gets its own here)."""
        self._parsing = list(sys.argv[1:] if args is None else args)
        parsed = super().parse_known_args(args, namespace)
        command_began()
        return parsed

    def parse_args(self, args: Sequence[str] | None = None, namespace: None = None) -> argparse.Namespace:  # type: ignore[override]
        """Parse like argparse, but an unknown option is reported by the sub-command that was chosen.

        argparse hands options no sub-command knows back to the top-level parser, whose message would send the
        user to ``PROG --help``, a page that lists only the sub-commands, not the options meant.
        """
        parsed, extras = self.parse_known_args(args, namespace)
        if extras:
            chosen = chosen_parser(self, parsed)
            said = (chosen.unknown_options(extras) if isinstance(chosen, ArgumentParser)
                    else f"unrecognized arguments: {' '.join(extras)}")
            raise InputError(f"{chosen.prog}: {said} (see {chosen.prog} --help)")
        return parsed


def installed_version() -> str:
    """The version pip installed (``0.1.0``), or a note that the package is not installed (run from a checkout)."""
    import importlib.metadata  # here, not at the top: 20 ms of imports (email, zipfile) every command would pay

    try:
        return importlib.metadata.version(DISTRIBUTION)
    except importlib.metadata.PackageNotFoundError:
        return "(version unknown: not installed)"


class _VersionAction(argparse.Action):
    """argparse's ``version``, with the version looked up only when asked for (`installed_version`)."""

    def __init__(self, option_strings: Sequence[str], dest: str = argparse.SUPPRESS, help: str | None = None) -> None:
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS, help=help)

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: Any,
                 option_string: str | None = None) -> NoReturn:  # fmt: skip
        # The command's name alone (`stream-detect`, also for `stream-detect eval --version`): one version covers
        # every sub-command, and a script reading the second word gets it whichever page it asked.
        command = parser.prog.split(" ")[0]
        print(f"{command} {installed_version()}")  # on stdout, as argparse's own version action prints
        parser.exit()


def add_version_option(parser: argparse.ArgumentParser) -> None:
    """``--version``: ``COMMAND VERSION`` on stdout, exit status 0, before anything else is checked or loaded.
    Without it, ``stream-detect --version`` was taken for a run option and ``recognition-train --version`` asked for
    ``--features``: an operator filing a report had no way to say which version runs on the site. Every sub-command
    made with ``add_subparsers().add_parser`` has it too (`_SubCommands`); a sub-command's parser built on its own
    (``prego-bench select``) calls this itself."""
    parser.add_argument("--version", action=_VersionAction, help="print the installed version and exit")


class _SubCommands(argparse._SubParsersAction):
    """argparse's sub-commands, each given ``--version``: the README promises it of every command, and
    ``stream-detect eval --version`` or ``tgml bench-live --version`` was an unrecognized argument."""

    def add_parser(self, name: str, **kwargs: Any) -> argparse.ArgumentParser:
        """Add the sub-command ``name`` as argparse does, with `add_version_option`."""
        parser: argparse.ArgumentParser = super().add_parser(name, **kwargs)
        add_version_option(parser)
        return parser


def unknown_command(prog: str, word: str, commands: Sequence[str]) -> InputError:
    """The usage error of a first argument that is neither an option nor one of ``prog``'s ``commands``: a typo of
    one (``imprt``), which would otherwise be read as an argument of the default command and be reported as an
    option that command misses. Ends with the command meant, when one is close (``; did you mean 'import'?``)."""
    return InputError(unknown_name(f"{prog}: command", word, commands, None))


def chosen_parser(parser: argparse.ArgumentParser, parsed: argparse.Namespace) -> argparse.ArgumentParser:
    """The innermost sub-command parser that ``parsed`` went through (``parser`` itself without sub-commands).

    Args:
        parser: the top-level parser.
        parsed: what it parsed.

    Returns:
        The parser of the chosen sub-command, followed down through nested sub-commands.
    """
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction) and action.choices:
            name = getattr(parsed, action.dest, None) if action.dest != argparse.SUPPRESS else None
            if isinstance(name, str) and name in action.choices:
                return chosen_parser(action.choices[name], parsed)
    return parser


def plain_summary(docstring: str | None) -> str:
    """A module docstring's first paragraph as plain text for ``--help``: the double backquotes of reStructuredText
    literals dropped and its lines joined (argparse prints a description as it is given).

    Args:
        docstring: the module's ``__doc__``.

    Returns:
        The summary line.
    """
    first = (docstring or "").strip().split("\n\n")[0]
    return " ".join(first.replace("``", "").split())
