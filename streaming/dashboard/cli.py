"""``stream-detect dashboard``: a web page of every stream and every alert of one checker, live.

Usage::

    stream-detect dashboard --connect tcp://127.0.0.1:5556 --graph tea.json            # http://127.0.0.1:8080/
    stream-detect dashboard --connect tcp://checker-host:5556 --graph tea.json \\
        --curve-server keys/checker.key --curve-secret keys/clients/dashboard.key_secret \\
        --bind 0.0.0.0:8080 --token-file dashboard.token --alert-frames frames/

The options (`add_parser`) and one call into `streaming.dashboard.server.run_dashboard`; see docs/dashboard.md.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from graphs.common.errors import InputError
from streaming.dashboard.access import DEFAULT_BIND

if TYPE_CHECKING:
    from streaming.service_log import ServiceLog

DEFAULT_CONNECT = "tcp://127.0.0.1:5556"  # the checker's default --publish

HELP = """A web page fed by a checker's published messages: one tile per stream (live, lost
or ended; the step now, the steps allowed next with their probabilities, the last
alert, the stage latencies), the alerts as they come (pushed, newest first, with
their retractions; acknowledging one shows on every open page), the task graph
with the alerted step and its missing pre-conditions marked, and each alert's
picture where the detector saves them (--alert-frames). It listens on 127.0.0.1
unless --bind says otherwise, and beyond loopback only with an access token
(--token-file). Once it listens it writes 'dashboard: serving http://HOST:PORT/
(checker ENDPOINT)' on stderr. Needs the 'dashboard' extra. See docs/dashboard.md."""


def add_parser(sub: Any) -> argparse.ArgumentParser:
    """Add the ``dashboard`` sub-command to ``stream-detect``'s sub-parsers.

    Args:
        sub: the ``add_subparsers()`` object of ``stream-detect``.

    Returns:
        The sub-command's parser.
    """
    p: argparse.ArgumentParser = sub.add_parser("dashboard", help="a web page of every stream and alert, live",
                                                description=HELP)  # fmt: skip
    p.add_argument("--connect", metavar="ENDPOINT",
                   help=f"the checker's --publish endpoint, as the view's --connect (default {DEFAULT_CONNECT})")
    # The option's first name, hidden: systemd units and scripts written before it was --connect keep working. It was
    # renamed because `stream-detect run --checker` names the checker's kind, and the view and detector say --connect.
    p.add_argument("--checker", dest="checker_alias", metavar="ENDPOINT", help=argparse.SUPPRESS)
    p.add_argument("--bind", default=DEFAULT_BIND, metavar="HOST:PORT",
                   help=f"where the page is served (default {DEFAULT_BIND}; a bare PORT: 127.0.0.1; port 0: a free "
                        "one); beyond loopback only with --token-file or --token")
    graph = p.add_mutually_exclusive_group()
    graph.add_argument("--graph", help="task graph JSON: step names, and the graph drawn (needs Graphviz 'dot')")
    graph.add_argument("--demo", action="store_true", help="use the bundled demo graph")
    token = p.add_mutually_exclusive_group()
    token.add_argument("--token-file", metavar="FILE",
                       help="file whose first line is the access token every request must carry (open the page as "
                            "http://HOST:PORT/?token=TOKEN once; scripts send 'Authorization: Bearer TOKEN')")
    token.add_argument("--token", help="the access token itself (visible to other users in the process list: prefer "
                                       "--token-file)")
    p.add_argument("--alert-frames", metavar="DIR",
                   help="the folder the detector writes alert pictures to (its --alert-frames): each alert shows its "
                        "picture when the file is there")
    p.add_argument("--curve-server", metavar="FILE", help="the checker's public key (checker.key)")
    p.add_argument("--curve-secret", metavar="FILE", help="this dashboard's secret key (NAME.key_secret)")
    p.add_argument("--log-format", default="text", choices=("text", "json"),
                   help="log lines on stderr as text (the default) or one JSON object per line")
    return p


def run(args: argparse.Namespace) -> int:
    """Run ``stream-detect dashboard`` with its parsed options.

    Returns:
        Exit status.
    """
    from streaming.service_log import queued_log

    # Queued, as the checker's log: the dashboard's lines (a checker not answering, a refused handshake) are said on
    # its event loop, which a stderr that takes nothing held, every page with it.
    with queued_log("dashboard", args.log_format) as log:
        return _serve(args, log)


def _serve(args: argparse.Namespace, log: ServiceLog) -> int:
    """The dashboard of `run`, its lines to ``log``."""
    from streaming.curve_keys import client_curve
    from streaming.dashboard.access import check_exposure, load_token, parse_bind
    from streaming.dashboard.server import DashboardConfig, require_aiohttp, run_dashboard
    from streaming.transport import check_endpoint

    option, endpoint = checker_endpoint(args)
    require_aiohttp()
    checker = check_endpoint(endpoint, option, peer=True)
    address = parse_bind(args.bind)
    token = load_token(args.token, args.token_file)
    check_exposure(address, token)
    frames = None
    if args.alert_frames is not None:
        frames = Path(args.alert_frames)
        if frames.exists() and not frames.is_dir():
            raise InputError(f"--alert-frames {args.alert_frames}: not a folder (give the detector's --alert-frames "
                             "folder)")
        if not frames.exists():  # the detector makes it when it starts, maybe after the dashboard
            log.warning(f"--alert-frames {args.alert_frames}: no such folder yet; alerts show their pictures once "
                        "a detector writes them there")
    names, svg, steps = _graph(args, log.warning)
    source = f"--graph {args.graph}" if args.graph is not None else "the demo's task graph" if args.demo else ""
    config = DashboardConfig(checker, address, token, names, svg, steps, frames,
                             client_curve(args.curve_server, args.curve_secret, log.warning), source,
                             checker_option=option)  # fmt: skip

    def ready(url: str) -> None:
        log(f"dashboard: serving {url} (checker {checker})", url=url, checker=checker)

    return run_dashboard(config, ready, warn=log.warning, say=log)


def checker_endpoint(args: argparse.Namespace) -> tuple[str, str]:
    """The checker's endpoint and the option it was given by (``--connect``, or its old name ``--checker``), so that
    an error names the option the user typed.

    Raises:
        InputError: both given: which one was meant cannot be told.
    """
    if args.connect is not None and args.checker_alias is not None:
        raise InputError("stream-detect dashboard: --checker and --connect both name the checker's endpoint "
                         "(--checker is the old name of --connect): give --connect only")
    if args.checker_alias is not None:
        return "--checker", str(args.checker_alias)
    # `is None`, not falsiness: `--connect ""` (an unset variable in a unit) is refused as `--checker ""` was, rather
    # than quietly watching the default checker.
    return "--connect", DEFAULT_CONNECT if args.connect is None else str(args.connect)


def _graph(args: argparse.Namespace, warn: Callable[[str], None]
           ) -> tuple[dict[int, str], str | None, tuple[dict[str, Any], ...]]:
    """Step names, the drawing and the steps as text, from ``--graph`` or ``--demo`` (none without either); ``warn``
    is told why there is no drawing."""
    if args.graph is None and not args.demo:
        return {}, None, ()
    from graphs.common.safe_text import printable
    from graphs.task_graph import load_graph
    from streaming.dashboard.graph_svg import graph_svg
    from streaming.demo.paths import default_demo_paths

    graph = load_graph(args.graph or default_demo_paths()[0], "--graph")
    names = dict(zip(graph.step_ids, graph.step_names, strict=True))
    steps = tuple(
        {"step": step, "name": printable(name),
         "requires": sorted(r for r in graph.preconditions(step) if isinstance(r, int) and r in names)}
        for step, name in names.items()
    )  # fmt: skip
    source = f"--graph {args.graph}" if args.graph is not None else "the demo's task graph"
    return names, graph_svg(graph, lambda why: warn(f"{source}: {why}")), steps
