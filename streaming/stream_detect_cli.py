"""``stream-detect``: live mistake detection from video over ZeroMQ.

Usage::

    stream-detect --video demo                                  # built-in demo: graph and detector bundled
    stream-detect --video demo:correct --jsonl --fast           # JSON lines, as fast as the CPU allows
    stream-detect --video demo:missing                          # ends without add_milk: reported missing
    stream-detect --video cam0 --graph tent.json --detector detector.pt [--backbone model.pt]
    stream-detect --video clip.mp4 --graph tent.json --detector detector.pt --jsonl

    # one checker, cameras on other machines, CURVE keys (see docs/deployment.md)
    stream-detect keys --out keys --clients kitchen,viewer
    stream-detect checker --graph tent.json --bind tcp://0.0.0.0:5555 --publish tcp://0.0.0.0:5556 \
        --curve-secret keys/checker.key_secret --curve-clients keys/clients
    stream-detect detector --video cam0 --detector detector.pt --graph tent.json \
        --connect tcp://checker-host:5555 --stream-id kitchen \
        --curve-server checker.key --curve-secret kitchen.key_secret
    stream-detect view --connect tcp://checker-host:5556 --graph tent.json [--jsonl] \
        --curve-server checker.key --curve-secret viewer.key_secret

    # how well it catches mistakes on your annotated held-out videos (or on the demo: --demo)
    stream-detect eval --videos videos/ --annotations labels.json --graph tent.json --detector detector.pt \
        [--split features/split.json | --videos-list a,b] [--alert-on end|onset] [--json eval.json]
    stream-detect eval --features npy_dir/ --annotations labels.json --graph tent.json --detector detector.pt \
        [--rate 1] [--split features/split.json]      # your own features (recognition-features import)

Without a sub-command, one command runs the checker, one detector and the view on loopback. Binding beyond
loopback (any address but 127.0.0.0/8 and ::1, names included) needs CURVE keys, or --insecure.
Bad input (unopenable video, a graph that is not a DAG, a detector whose classes or step names are not the
graph's (``--ignore-names`` runs anyway, with a warning), a busy port) ends with one line on stderr and exit
status 2. ``checker`` and ``view`` need ``--graph`` (or ``--demo`` for the bundled demo graph). SIGTERM stops
every command the way Ctrl-C does (the checker's summary line, the detector's last heartbeat; exit status 143 for
SIGTERM, 130 for SIGINT).
"""

from __future__ import annotations

import argparse
import contextlib
import sys
import threading
from collections.abc import Callable, Iterator, Sequence
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from graphs.common.command_line import ArgumentParser, add_version_option, unknown_command
from graphs.common.errors import InputError, exit_on_input_error, print_warning, writes_no_files
from graphs.common.options import output_name, rate_option, threads_option
from graphs.common.safe_text import count_of, first_few, printable, quoted, wrap_words
from streaming.alert_modes import ALERT_MODES, DEFAULT_ALERT_ON, DEFAULT_ONSET_FRAMES
from streaming.curve_keys import CLIENT_NAME_RULE, DEFAULT_CLIENTS

if TYPE_CHECKING:
    from graphs.checker_settings import CheckerSettings
    from recognition.segmenter import SegmenterOverrides
    from streaming.checker.config import CheckerConfig
    from streaming.curve_keys import CurveClient
    from streaming.detector.config import StreamSource  # loads torch: only the commands that run a detector do
    from streaming.detector.streams import DetectorStats, DetectorStream
    from streaming.service_log import ServiceLog

SUBCOMMANDS = ("run", "detector", "checker", "view", "dashboard", "eval", "keys")
# The top-level --help page: a new user looks here first, and the run options live one level down.
TOP_HELP = """Live mistake detection from video over ZeroMQ.

The main use is stream-detect [run] --video SOURCE: watch a video file, a camera
or the built-in demo, and alert when a key-step is done before its
pre-conditions. Its options: stream-detect run --help. For example:

  stream-detect --video demo        # the demo: its graph and detector bundled
  stream-detect --video clip.mp4 --graph tea.json --detector detector.pt --jsonl
  stream-detect --video cam0 --graph tea.json --detector detector.pt  # camera
  # features of your own:
  stream-detect --features rec.npy --graph tea.json --detector detector.pt

The other sub-commands split the same chain over machines (checker, detector,
view), show every stream and alert of a checker on a web page (dashboard), score
it on annotated videos or feature files (eval) or write CURVE keys (keys); each
has its own --help."""
TOP_USAGE = ("stream-detect [run] --video SOURCE [options]\n"
             "       stream-detect {detector,checker,view,dashboard,eval,keys} ...")
CHECKER_HELP = """Checks the key-steps of any number of detector streams against a task graph, and publishes
alerts and the state of every stream. Once both sockets are bound it writes
'checker: detectors connect to ENDPOINT, viewers to ENDPOINT' on stderr (the real
port where port 0 was asked); it logs refused messages and handshakes there as
they happen, and one summary line when it stops. Messages, sockets and ranges:
docs/wire-format.md; keys: docs/deployment.md."""
# A detector hears nothing back but its handshake (`streaming.transport`): the page says what its exit status
# cannot mean, since an operator reads 0 as "the checker took my stream" (docs/wire-format.md, limits per peer).
DETECTOR_HELP = """Reads one or several sources through one detector model and publishes each stream's
key-steps and heartbeats to the checker at --connect; it waits up to 10 s for that
checker to answer and subscribe, and writes one line per stream as that stream
ends. Past its handshake (a refused key ends it, exit status 2) the checker never
answers a detector: what it refuses (a stream whose id another live detector
holds, a new stream when every slot is taken, a key-step not in its graph) is
counted and logged by the checker alone, in its 'checker: refused' lines, its
summary line and the view's health line. So exit status 0 says that every
source ended, not that the checker took their messages; a checker that went
away and had not come back when the run ended makes it exit status 1.
Messages and sockets: docs/wire-format.md."""
# The pages a new user opens first after the top one: each says what the sub-command does before its options.
RUN_HELP = """Watches one source (a video file, a camera, a stream URL, the demo, or a
feature file with --features) through the detector, the checker and the live
view, all from this one command on loopback (the checker in a child process):
an alert when a key-step is done before its pre-conditions, and one verdict
line per stream when it ends (Ctrl-C: the verdict so far). The chain split over
machines: stream-detect detector, checker and view. See docs/live-pipeline.md."""
VIEW_HELP = """Shows the streams, alerts and key-steps a checker publishes, live in the
terminal (or as JSON lines with --jsonl), from the checker's --publish endpoint;
--graph (or --demo) gives the step names. See docs/live-pipeline.md."""
EVAL_HELP = """Runs annotated videos (--videos), feature files (--features) or the demo
(--demo) through the live chain (detector, segmenter, checker) and scores it:
which mistakes raised an alert, which alerts were false alarms, how many seconds
after the step started the alert came, and the key-steps recognised. Each
video's result is cached, so a stopped run resumes. See docs/evaluation.md."""
VERBOSE_HELP = "show the video decoders' own log lines (FFmpeg, OpenCV, decord), quiet by default"
JSONL_HELP = "print key-steps, alerts, end-of-session reports and status changes as JSON lines"


VIDEO_HELP = ("demo (the default: the bundled tea procedure), demo:correct, demo:missing, cam0, /dev/video0, a URL or "
              "a file")


def stream_id_option(text: str) -> str:
    """argparse type of ``--stream-id``: a name the wire takes (`streaming.messages.STREAM_ID_RULE`), refused while
    the command line is read, before any model loads."""
    from streaming.messages import STREAM_ID_RULE, is_stream_id

    if not is_stream_id(text):
        raise argparse.ArgumentTypeError(f"{quoted(text)}: use {STREAM_ID_RULE}")
    return text


SEVERAL_SOURCES: Final = ("for several sources at once, start stream-detect checker, then one stream-detect detector "
                          "given each source (--video A --video B, or --features), and stream-detect view "
                          "(docs/live-pipeline.md, \"One detector process for several cameras\")")


def _video_args(p: argparse.ArgumentParser, many: bool = False) -> None:
    """The options of a detector stream; with ``many``, ``--video`` and ``--stream-id`` repeat (one per source)."""
    if many:
        p.add_argument("--video", action="append", metavar="SOURCE",
                       help=VIDEO_HELP + "; repeat it for several sources, read and batched by this one process")
        p.add_argument("--stream-id", action="append", metavar="ID", type=stream_id_option,
                       help="name of each stream on the wire, one per --video (or --features) in the same order "
                            "(default cam0, cam1, ...; with --features each file's name: run1.npy is run1)")
    else:
        # Watching two cameras at once is what a user tries first: the refusal names the commands that do it.
        p.add_argument("--video", help=VIDEO_HELP, twice=SEVERAL_SOURCES)
        p.add_argument("--stream-id", type=stream_id_option,
                       help="name of this stream on the wire (default cam0; with --features the file's name: "
                            "run1.npy is run1)")
    features_help = ("a recording's own features instead of --video: a T x D .npy file replayed one vector at a time "
                     "at the detector's rate (real time, or --fast)")
    if many:
        p.add_argument("--features", action="append", metavar="FILE.npy",
                       help=features_help + "; repeat it for several")
    else:
        p.add_argument("--features", metavar="FILE.npy", help=features_help, twice=SEVERAL_SOURCES)
    p.add_argument("--rate", type=rate_option, help="the --features file's vectors per second (default: the "
                                                   "detector's; another rate is refused)")
    p.add_argument("--graph", help="task graph JSON (default with --video demo: the bundled demo graph)")
    p.add_argument("--detector", help="detector checkpoint .pt (default with --video demo: the bundled one)")
    p.add_argument("--backbone", help="TorchScript feature extractor, for detectors trained on its features")
    p.add_argument("--reader", default="auto", choices=("auto", "decord", "opencv"),
                   help="file reader (default auto: decord where it reads the file, else OpenCV)")
    pace = p.add_mutually_exclusive_group()
    pace.add_argument("--fast", action="store_true", help="read files as fast as possible (default: real time)")
    pace.add_argument("--realtime", action="store_true", help="pace files to the wall clock (the default)")
    p.add_argument("--threads", type=threads_option, default=1,
                   help="cores the detector uses (default 1; at most 4 per core): on a CPU that many workers "
                        "extract features side by side, one core each")
    p.add_argument("--device", default="auto", choices=("auto", "cpu", "cuda"),
                   help="where features and detector run (auto: CUDA when torch sees one)")
    p.add_argument("--ignore-names", action="store_true",
                   help="run even if the detector and the graph name the steps differently (with a warning)")
    p.add_argument("--verbose", action="store_true", help=VERBOSE_HELP)
    _segmenter_args(p)


def _probability(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not 0 <= value < 1:
        raise argparse.ArgumentTypeError(f"{text!r} must be a probability in [0, 1)")
    return value


def _frames(least: int) -> Callable[[str], int]:
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a whole number of frames") from None
        if value < least:
            raise argparse.ArgumentTypeError(f"{text!r} must be >= {least}")
        return value

    return parse


def _segmenter_args(p: argparse.ArgumentParser) -> None:
    """The segmenter's settings and the alert mode (the detector checkpoint's values are the defaults)."""
    p.add_argument("--threshold", type=_probability, metavar="P",
                   help="a frame whose likeliest class scores below P counts as background (default: the detector's)")
    p.add_argument("--min-frames", type=_frames(1), metavar="N",
                   help="frames a key-step must last to be confirmed on its own (default: the detector's; a "
                        "shorter run alone between two stable ones is confirmed too, unless the detector stores a "
                        "length per step, as recognition-train does at 1-2 features a second: docs/live-pipeline.md)")
    p.add_argument("--onset-frames", type=_frames(1), metavar="N",
                   help=f"with --alert-on onset, frames after which a key-step is announced, 1 or more (default: "
                        f"the detector's, else {DEFAULT_ONSET_FRAMES}; --alert-on end announces nothing)")
    p.add_argument("--once", action="store_true",
                   help="send each key-step to the checker the first time it is confirmed, never again in the stream: "
                        "for procedures whose steps are each done once, such as a recipe's (a later run of a step is "
                        "then the detector repeating itself; tgml bench-live chooses this per fold)")
    p.add_argument("--alert-on", default=DEFAULT_ALERT_ON, choices=ALERT_MODES,
                   help="alert as soon as a step is announced (onset: seconds earlier; the alert is retracted if the "
                        f"step turns out to be another) or once it is confirmed (end); default {DEFAULT_ALERT_ON}")


def _checking_args(p: argparse.ArgumentParser, detector: bool = True) -> None:
    """Which pre-condition checker the streams get (and, where a detector runs here, what its evidence assumes)."""
    from graphs.checker_settings import CHECKERS, DEFAULT_CHECKER
    from graphs.probabilistic_checker import DEFAULT_ALERT_THRESHOLD, DEFAULT_PRIOR_SKIP

    p.add_argument("--checker", default=DEFAULT_CHECKER, choices=CHECKERS,
                   help="; ".join(f"{e.name}: {e.summary}" for e in CHECKERS.values()).replace("%", "%%"))
    p.add_argument("--alert-threshold", type=_number, metavar="P",
                   help="the probabilistic checker alerts when a pre-condition was skipped with at least this "
                        f"probability, in (0, 1): lower catches more, higher cries wolf less (default "
                        f"{DEFAULT_ALERT_THRESHOLD:g})")
    p.add_argument("--prior-skip", type=_number, metavar="P",
                   help="the probabilistic checker's prior probability that a person skips a given pre-condition, in "
                        "(0, 1): lower asks more evidence of a skip before an alert, as for a detector that misses "
                        f"steps often (default {DEFAULT_PRIOR_SKIP:g}; tgml bench-live chooses it per fold)")
    p.add_argument("--order-rule", default="precondition", choices=("precondition", "late-step"),
                   help="late-step: with --checker binary, a step done after a step that required it alerts too "
                        "(default precondition)")
    if detector:
        _default_rates_arg(p)


def _default_rates_arg(p: argparse.ArgumentParser) -> None:
    from recognition.evidence import DEFAULT_FALSE_RATE, DEFAULT_MISS_RATE

    p.add_argument("--default-rates", action="store_true",
                   help="for a detector trained before recognition-train measured its miss and false-detection "
                        f"rates: assume {100 * DEFAULT_MISS_RATE:.0f}%% and {100 * DEFAULT_FALSE_RATE:.0f}%% for every "
                        "step (refused for a detector that holds measured rates)")


def _number(text: str) -> float:
    try:
        return float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None


def _checking(args: argparse.Namespace) -> CheckerSettings:
    """The checker settings of the options; a threshold or prior given to a checker that weighs no evidence is refused
    (it would change nothing, and the run's settings would still record it)."""
    from graphs.checker_settings import CHECKERS, CheckerSettings
    from graphs.probabilistic_checker import DEFAULT_ALERT_THRESHOLD, DEFAULT_PRIOR_SKIP

    given = [o for o, v in (("--alert-threshold", args.alert_threshold), ("--prior-skip", args.prior_skip))
             if v is not None]
    if given and not CHECKERS[args.checker].weighs_evidence:
        takers = " or ".join(e.name for e in CHECKERS.values() if e.weighs_evidence)
        raise InputError(f"{given[0]} needs --checker {takers}: the {args.checker} checker takes every recognised step "
                         "as certain and has no threshold or prior to set")
    threshold = DEFAULT_ALERT_THRESHOLD if args.alert_threshold is None else args.alert_threshold
    prior = DEFAULT_PRIOR_SKIP if args.prior_skip is None else args.prior_skip
    return CheckerSettings(args.checker, threshold, prior, order_rule=args.order_rule)


def _overrides(args: argparse.Namespace) -> SegmenterOverrides:
    from recognition.segmenter import SegmenterOverrides

    return SegmenterOverrides(args.threshold, args.min_frames, args.onset_frames)


def _overlay_args(p: argparse.ArgumentParser, metavar: str, help_text: str) -> None:
    p.add_argument("--annotate-out", metavar=metavar, type=output_name, help=help_text)
    p.add_argument("--preview", action="store_true",
                   help="show the same in a window (needs a display and opencv-python, not the headless wheel)")


def _webhook_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument("--webhook", metavar="URL",
                   help="POST each alert (and each retraction) as JSON to this http(s) URL, from a thread of its own "
                        "with a bounded queue and retries: a slow or dead receiver is counted and logged, never "
                        "waited for")


def _alert_frames_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--alert-frames", metavar="DIR", type=output_name,
                   help="write the frame of each announced or confirmed key-step as DIR/<stream>/<ms>.jpg (<ms>: the "
                        "step's start in video milliseconds, the alert's video_time), for the dashboard")
    # None when not given (refused without --alert-frames); the default is alert_frames.DEFAULT_KEEP, named here
    # without importing that module, which loads OpenCV (--help need not).
    p.add_argument("--alert-frames-keep", type=_frames(1), metavar="N",
                   help="frames kept per stream in --alert-frames, the oldest deleted first (default: 500)")


def _stream_timeout_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument("--stream-timeout", type=float, default=5.0, metavar="SECONDS",
                   help="a stream with no message for this long is shown as lost (default 5; 1 to 3600)")


def _graph_or_demo(p: argparse.ArgumentParser) -> None:
    graph = p.add_mutually_exclusive_group()
    graph.add_argument("--graph", help="task graph JSON (required unless --demo)")
    graph.add_argument("--demo", action="store_true", help="use the bundled demo graph")
def _watch_args(p: argparse.ArgumentParser, metrics: bool = True) -> None:
    """``--metrics`` (a Prometheus endpoint) and ``--log-format`` of a service."""
    if metrics:
        p.add_argument("--metrics", metavar="HOST:PORT",
                       help="serve Prometheus metrics at http://HOST:PORT/metrics (a bare PORT: 127.0.0.1; needs the "
                            "'metrics' extra)")
        p.add_argument("--metrics-public", action="store_true",
                       help="let --metrics bind beyond loopback (the endpoint has no authentication)")
    p.add_argument("--log-format", default="text", choices=("text", "json"),
                   help="log lines on stderr as text (the default) or one JSON object per line")


def _server_curve_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--curve-secret", metavar="FILE",
                   help="the checker's secret key (keys/checker.key_secret): CURVE on both endpoints")
    p.add_argument("--curve-clients", metavar="DIR",
                   help="folder of the public keys (*.key) allowed to connect, read again when it changes")
    p.add_argument("--insecure", action="store_true",
                   help="bind beyond loopback without CURVE (anyone who reaches the ports can forge and read)")


def _client_curve_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--curve-server", metavar="FILE", help="the checker's public key (checker.key)")
    p.add_argument("--curve-secret", metavar="FILE", help="this client's secret key (NAME.key_secret)")


def build_parser() -> ArgumentParser:
    """The argument parser (sub-commands ``run`` (default), ``detector``, ``checker``, ``view``, ``keys``)."""
    parser = ArgumentParser(prog="stream-detect", usage=TOP_USAGE, description=TOP_HELP,
                            formatter_class=argparse.RawDescriptionHelpFormatter)
    add_version_option(parser)
    sub = parser.add_subparsers(dest="command", prog="stream-detect",
                                metavar="{run,detector,checker,view,dashboard,eval,keys}")
    run = sub.add_parser("run", help="checker + detector + view on loopback (the default)", description=RUN_HELP)
    _video_args(run)
    run.add_argument("--jsonl", action="store_true", help=JSONL_HELP)
    _overlay_args(run, "FILE.mp4", "write the video with the step seen, the steps done and the alerts drawn over it "
                  "(Ctrl-C or SIGTERM keeps it up to the stop)")
    run.add_argument("--bind", default="tcp://127.0.0.1:0", help="checker input endpoint (default: a free port)")
    run.add_argument("--publish", default="tcp://127.0.0.1:0", help="checker output endpoint (default: a free port)")
    _stream_timeout_arg(run)
    _server_curve_args(run)
    _checking_args(run)
    _webhook_arg(run)
    _alert_frames_args(run)
    det = sub.add_parser("detector", help="detector streams (one or several sources) publishing to a checker",
                         description=DETECTOR_HELP)
    _video_args(det, many=True)
    det.add_argument("--connect", default="tcp://127.0.0.1:5555",
                     help="the checker's --bind endpoint (default tcp://127.0.0.1:5555, the checker's default; waits "
                          "up to 10 s for it to answer and subscribe)")
    _client_curve_args(det)
    _default_rates_arg(det)
    _watch_args(det)
    _alert_frames_args(det)
    chk = sub.add_parser("checker", help="the checker: any number of streams in, alerts and status out",
                         description=CHECKER_HELP)
    _graph_or_demo(chk)
    chk.add_argument("--bind", default="tcp://127.0.0.1:5555",
                     help="endpoint detectors connect to (default tcp://127.0.0.1:5555): a SUB socket subscribed to "
                          "keystep/, heartbeat/ and onset/ "
                          "(connect a PUB, or an XPUB to learn when the subscription has arrived)")
    chk.add_argument("--publish", default="tcp://127.0.0.1:5556",
                     help="endpoint viewers connect to (default tcp://127.0.0.1:5556): an XPUB socket (connect a SUB; "
                          "each new subscription is "
                          "greeted with a checker message)")
    _stream_timeout_arg(chk)
    _server_curve_args(chk)
    _checking_args(chk, detector=False)
    _watch_args(chk)
    _webhook_arg(chk)
    view = sub.add_parser("view", help="show a checker's alerts and status live", description=VIEW_HELP)
    view.add_argument("--connect", default="tcp://127.0.0.1:5556",
                      help="the checker's --publish endpoint (default tcp://127.0.0.1:5556, the checker's default)")
    _graph_or_demo(view)
    view.add_argument("--jsonl", action="store_true", help=JSONL_HELP)
    _watch_args(view, metrics=False)
    _webhook_arg(view)
    ev = sub.add_parser("eval", help="score the live chain's alerts and key-steps on annotated videos or "
                        "feature files", description=EVAL_HELP)
    ev.add_argument("--demo", action="store_true", help="the demo executions, graph and detector")
    ev.add_argument("--videos", help="folder of the videos, named as in the annotation file")
    ev.add_argument("--features", nargs="+", metavar="NPY",
                    help="instead of videos: feature files (<video>.npy, T x D) or folders of them, replayed one "
                         "vector at a time through the detector, the segmenter and the checker")
    ev.add_argument("--rate", type=rate_option, help="the feature files' vectors per second (default: the detector's; "
                                                     "another rate is refused)")
    ev.add_argument("--annotations",
                    help="annotation file: JSON, or a .csv of video,step,start,end rows (the file tgml train reads)")
    ev.add_argument("--graph", help="task graph JSON")
    ev.add_argument("--detector", help="detector checkpoint .pt")
    ev.add_argument("--backbone", help="TorchScript feature extractor, for detectors trained on its features")
    which = ev.add_mutually_exclusive_group()
    which.add_argument("--videos-list", type=_names, metavar="A,B", help="videos to evaluate, comma-separated")
    which.add_argument("--split", help="split.json of a feature folder: evaluate its test videos")
    _segmenter_args(ev)
    ev.add_argument("--json", dest="json_out", metavar="OUT", type=output_name,
                    help="also write the figures as JSON, with every recognised step, alert and missed mistake")
    ev.add_argument("--plots", metavar="DIR", type=output_name,
                    help="draw each video's timeline to DIR/<video>.png: annotated steps, "
                                                    "recognised steps, alerts (needs the plot extra)")
    _overlay_args(ev, "DIR", "write each video to DIR/<video>.mp4 with the step seen, the steps done and the alerts")
    ev.add_argument("--no-cache", action="store_true", help="run every video again (default: reuse cached results)")
    ev.add_argument("--quiet", action="store_true", help="no progress bars")
    ev.add_argument("--threads", type=threads_option, default=1,
                    help="cores the feature extractor and the detector use (default 1): torch threads, one video at "
                         "a time")
    ev.add_argument("--device", default="auto", choices=("auto", "cpu", "cuda"),
                    help="where features and detector run (default auto: CUDA when torch sees one)")
    ev.add_argument("--reader", default="auto", choices=("auto", "decord", "opencv"),
                   help="file reader (default auto: decord where it reads the file, else OpenCV)")
    ev.add_argument("--ignore-names", action="store_true",
                    help="run even if the detector and the graph name the steps differently (with a warning)")
    _checking_args(ev)
    ev.add_argument("--verbose", action="store_true", help=VERBOSE_HELP)
    _client_curve_args(view)
    keys = sub.add_parser("keys", help="write CURVE key pairs for the checker and its clients",
                          description="Writes DIR/checker.key (public) and DIR/checker.key_secret, and "
                                      "DIR/clients/NAME.key and NAME.key_secret per client: text files, each key 40 "
                                      "Z85 characters on a 'public-key = \"...\"' or 'secret-key = \"...\"' "
                                      "line (format and where each file goes: docs/deployment.md).")
    keys.add_argument("--out", required=True, metavar="DIR", type=output_name,
                      help="key folder (DIR/checker.key*, DIR/clients/)")
    keys.add_argument("--clients", default=",".join(DEFAULT_CLIENTS),
                      help=f"comma-separated client names (default {','.join(DEFAULT_CLIENTS)}); "
                           f"each {CLIENT_NAME_RULE}")
    keys.add_argument("--add", action="store_true", help="add clients to an existing set (its checker pair is kept)")
    keys.add_argument("--force", action="store_true", help="replace key files that exist")
    from streaming.dashboard.cli import add_parser as add_dashboard

    add_dashboard(sub)
    return parser


def _names(value: str) -> tuple[str, ...]:
    names = tuple(n.strip() for n in value.split(",") if n.strip())
    if not names:
        raise argparse.ArgumentTypeError(f"{value!r}: give video names separated by commas")
    return names


def _defaults(args: argparse.Namespace) -> None:
    """Fill --graph / --detector for the demo; refuse their absence otherwise.

    A checker or viewer never falls back on the demo graph by itself: in a deployment a forgotten ``--graph``
    would apply the tea-making rules without a word, so they take the demo graph only when ``--demo`` says so.
    """
    from streaming.demo.paths import default_demo_paths, is_demo_video

    graph, detector = default_demo_paths()
    if args.command == "eval":
        if args.demo:
            args.graph = str(graph) if args.graph is None else args.graph
            args.detector = str(detector) if args.detector is None else args.detector
        # Every missing option in one line: a bare `stream-detect eval` named only --graph, then --detector, then
        # the videos and the annotations, one per try.
        missing = [] if args.demo else [
            option for option, given in (("--videos (or --features)", args.videos is not None or args.features),
                                         ("--annotations", args.annotations is not None),
                                         ("--graph", args.graph is not None),
                                         ("--detector", args.detector is not None)) if not given]
        if missing:
            listed = missing[0] if len(missing) == 1 else f"{', '.join(missing[:-1])} and {missing[-1]}"
            raise InputError(f"stream-detect eval: {listed} {'is' if len(missing) == 1 else 'are'} required "
                             "(or --demo)")
        return
    if args.command in ("checker", "view"):
        if args.graph is None and not args.demo:
            raise InputError(f"stream-detect {args.command}: --graph is required (or --demo for the demo graph)")
        if args.graph is None:
            args.graph = str(graph)
        return
    missing = [f"--{flag}" for flag in ("graph", "detector") if hasattr(args, flag) and getattr(args, flag) is None]
    if args.features:  # a recording's own features are the source (streaming.feature_files)
        if args.video:
            raise InputError("--features and --video both name the source: give one of them")
        if missing:  # no demo reads features: "unless every --video is a demo" named an option not given
            raise InputError(f"--features needs {' and '.join(missing)}: the detector trained on such features "
                             "(recognition-train) and the task graph of their procedure (tgml train)")
        args.video = args.features
    args.video = args.video or (["demo"] if args.command == "detector" else "demo")
    videos = args.video if isinstance(args.video, list) else [args.video]
    others = [str(video) for video in videos if not is_demo_video(str(video))]
    if others and missing:
        # Both named at once, and the source that needs them: "unless --video demo" read wrong beside a --video demo,
        # and a second try then met the same line for --detector.
        mixed = f" (the demo's own: --graph {graph} --detector {detector})" if len(others) < len(videos) else ""
        raise InputError(f"{' and '.join(missing)} {'is' if len(missing) == 1 else 'are'} required unless every "
                         f"--video is a demo (demo or demo:NAME); {others[0]!r} is not{mixed}")
    # Only an absent option takes the demo's file: an empty one (`--graph "$GRAPH"`, the variable unset) ran a file
    # against the demo's tea-making rules without a word.
    if args.graph is None:
        args.graph = str(graph)
    if hasattr(args, "detector") and args.detector is None:
        args.detector = str(detector)


def _refuse_demo_as_a_file(args: argparse.Namespace) -> None:
    """``--graph demo`` (or ``--detector demo``) with no file of that name: typed the way ``--video demo`` is, it
    was "graph file not found", leaving the user to find that the bundled demo graph is another option."""
    for option in ("graph", "detector"):
        if getattr(args, option, None) != "demo" or Path("demo").exists():
            continue
        if args.command == "eval":
            how = "give --demo instead (the demo's videos, graph and detector)"
        elif "demo" in args:  # checker, view, dashboard: a --demo of their own
            how = "give --demo instead"
        elif getattr(args, "features", None):  # pointing to --video demo told a features user to drop the option
            raise InputError(f"--{option} demo: no file named demo here, and no demo reads feature files: --features "
                             "needs the graph of their procedure (tgml train) and the detector trained on them "
                             "(recognition-train)")
        else:  # run, detector
            how = "--video demo brings the demo's graph and detector: leave the option out"
        raise InputError(f"--{option} demo: no file named demo here; for the bundled demo, {how}")


def _refuse_idle_options(args: argparse.Namespace) -> None:
    """Refuse an option this run would ignore, as ``--alert-threshold`` is with ``--checker binary``: the user asked
    for something the run would not do, and a run that ends well says nothing of it."""
    from graphs.checker_settings import CHECKERS

    if getattr(args, "features", None):
        from recognition.feature_import import NO_FRAMES as features

        if getattr(args, "annotate_out", None) is not None or getattr(args, "preview", False):
            from streaming.overlay import drawing_options  # here, refusing: it loads OpenCV and torch

            raise InputError(f"{drawing_options(args.annotate_out is not None, args.preview)} over video frames; "
                             f"{features}")
        if args.backbone is not None:
            raise InputError(f"--backbone {args.backbone}: extracts features from video frames; {features}")
        if args.reader != "auto":
            raise InputError(f"--reader {args.reader}: reads video files; {features}")
        if getattr(args, "alert_frames", None) is not None:
            raise InputError(f"--alert-frames {args.alert_frames}: keeps the video frame of each key-step; {features}")
    elif args.rate is not None:
        raise InputError(f"--rate {args.rate:g}: gives the rate of --features files; videos are read at the "
                         "detector's rate")
    if getattr(args, "alert_frames_keep", None) is not None and args.alert_frames is None:
        raise InputError(f"--alert-frames-keep {args.alert_frames_keep}: needs --alert-frames, the folder it bounds")
    if args.alert_on == "end" and args.onset_frames is not None:
        raise InputError(f"--onset-frames {args.onset_frames}: sets when a key-step is announced, and --alert-on end "
                         "announces none")
    checker = CHECKERS.get(getattr(args, "checker", ""))  # a detector apart has no checker option
    if getattr(args, "default_rates", False) and checker is not None and not checker.weighs_evidence:
        takers = " or ".join(e.name for e in CHECKERS.values() if e.weighs_evidence)
        raise InputError(f"--default-rates needs --checker {takers}: the {args.checker} checker weighs no miss or "
                         "false-detection rates")


def _alert_frames_keep(args: argparse.Namespace) -> int:
    """``--alert-frames-keep``, or its default."""
    from streaming.detector.alert_frames import DEFAULT_KEEP

    return DEFAULT_KEEP if args.alert_frames_keep is None else int(args.alert_frames_keep)


def _check_feature_paths(paths: Sequence[str]) -> None:
    """``--features`` sources that are no file (a typo), refused before anything loads torch (`_check_files_early`)."""
    from recognition.feature_import import feature_file_fault

    for path in paths:
        fault = feature_file_fault(path, f"--features {path}")
        if fault is not None:
            raise fault


def _check_keys_early(args: argparse.Namespace) -> None:
    """The CURVE key files of a run or detector, read before anything loads torch. They are read again where they
    are used: reading a key file twice costs microseconds, a typo found after the model loads cost seconds."""
    from streaming.curve_keys import client_curve, server_curve

    # Checked only: a key file open to others is said by the load that uses it, through the service's log (its
    # format, and a writer no full stderr holds), not here as a plain line before the log exists.
    if args.command == "detector":
        client_curve(args.curve_server, args.curve_secret, warn=None)
    else:
        server_curve(args.curve_secret, args.curve_clients, warn=None)


def _check_graph(path: str) -> None:
    """The ``--graph`` file read once before it is used, so that its fault is named by the option (a few
    milliseconds: a detector or labels file given as the graph is named as such)."""
    from graphs.task_graph import load_graph

    load_graph(path, "--graph")


def _check_files_early(args: argparse.Namespace) -> None:
    """The files a run or detector names, checked before torch and the model load (seconds on a busy machine), so
    a typo is one line at once, not after the wait (and a service restarted in a loop fails fast)."""
    from graphs.common.files import open_input
    from streaming.demo.paths import is_demo_video
    from streaming.readers import check_video_file, parse_source

    _check_graph(args.graph)
    try:
        with open_input(args.detector, "detector checkpoint"):  # the loader's own first check, with its words
            pass
    except InputError as err:
        raise InputError(f"--detector {err}") from None
    if args.features:  # checked by _check_feature_paths; their content against the detector next
        return
    for video in args.video if isinstance(args.video, list) else [args.video]:
        if not is_demo_video(str(video)) and parse_source(str(video)).kind == "file":
            check_video_file(str(video))


@exit_on_input_error
def main(argv: list[str] | None = None) -> int:
    """Entry point of ``stream-detect``."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and not argv[0].startswith("-") and argv[0] not in SUBCOMMANDS:  # run, the default, takes options only
        raise unknown_command("stream-detect", argv[0], SUBCOMMANDS)
    if not argv or argv[0] not in SUBCOMMANDS + ("-h", "--help", "--version"):
        argv = ["run", *argv]
    return _run(build_parser().parse_args(argv))


def _writes_files(args: argparse.Namespace) -> bool:
    """Whether the parsed command writes an output file: ``eval`` (its cache, ``--json``, ``--plots``) and ``keys``
    do, a detector or run with ``--alert-frames`` or ``--annotate-out`` does, the checker, the view and the dashboard
    never do (an interrupt then says only that the command stopped: `graphs.common.errors.writes_no_files`)."""
    if args.command in ("checker", "view", "dashboard"):
        return False
    if args.command in ("run", "detector"):
        return args.alert_frames is not None or getattr(args, "annotate_out", None) is not None
    return True


def _run(args: argparse.Namespace) -> int:
    """Run the parsed command; returns its exit status."""
    if not _writes_files(args):
        writes_no_files()
    _refuse_demo_as_a_file(args)
    if args.command in ("run", "detector", "eval"):
        from streaming.readers import quiet_codec_logs

        quiet_codec_logs(args.verbose)  # FFmpeg's own stderr lines would break the one-line error and the live view
    if args.command == "keys":
        return _keys(args)
    if args.command == "dashboard":
        from streaming.dashboard.cli import run as run_dashboard

        return run_dashboard(args)
    if args.command in ("run", "detector", "eval"):
        _refuse_idle_options(args)
    if args.command in ("run", "detector"):
        _check_keys_early(args)
    if args.command in ("run", "detector") and args.features:
        _check_feature_paths(args.features if isinstance(args.features, list) else [args.features])
    _defaults(args)
    if args.command in ("run", "detector"):
        _check_files_early(args)
    elif args.command in ("checker", "view", "eval") and args.graph is not None:
        _check_graph(args.graph)
    if args.command in ("run", "detector") and args.features:
        from streaming.feature_files import check_feature_sources

        # Before anything starts: a file with NaN, of another width or at another rate than the detector's.
        check_feature_sources(args.video if isinstance(args.video, list) else [args.video], args.detector, args.rate)
    if args.command == "view":
        from streaming.curve_keys import client_curve
        from streaming.detector.webhook import webhook_sinks
        from streaming.service_log import queued_log
        from streaming.view.client import run_view

        # Queued: the view's warnings (the checker silent, a webhook failing) are said from its drawing loop, which a
        # stderr that takes nothing held, the screen frozen. The webhook's URL is refused before connecting.
        with queued_log("view", args.log_format) as log, webhook_sinks(args.webhook, log) as sinks:
            return run_view(args.connect, args.graph, args.jsonl,
                            curve=client_curve(args.curve_server, args.curve_secret, log.warning), log=log, sinks=sinks)
    if args.command == "checker":
        return _checker(args)
    if args.command == "detector":
        return _detector(args)
    if args.command == "eval":
        return _eval(args)
    from streaming.service_log import queued_log

    # Queued, as the detector's and the checker's log: a warning (a sink failing, --insecure, names let through) was
    # written on the detector's thread or the view's, and a stderr that takes nothing held it there.
    with queued_log("stream-detect", "text") as log:
        return _run_all(args, log)


def _run_all(args: argparse.Namespace, log: ServiceLog) -> int:
    """The all-in-one ``stream-detect run`` of `_run`, its lines to ``log``."""
    from streaming.all_in_one import RunConfig, run_all, stderr_is_a_terminal

    if not args.jsonl and sys.stdout.isatty():
        # torch, the model and the checker process take seconds (more on a busy machine, and the demo's videos are
        # rendered on first use) before the view's first frame: a blank terminal looked hung.
        print("stream-detect: loading the detector and starting the checker...", flush=True)
    elif stderr_is_a_terminal():  # the output redirected: the person at the terminal is told there (and of progress)
        log("stream-detect: loading the detector and starting the checker...")
    from streaming.detector.config import DetectorConfig
    from streaming.detector.webhook import WebhookConfig

    webhook = WebhookConfig(args.webhook) if args.webhook is not None else None  # refused before anything starts
    checker, own = _checker_config(args, own_client=True, warn=log.warning)
    from streaming.detector.loading import stream_ids_for

    stream_id = stream_ids_for([args.video], [args.stream_id] if args.stream_id else ())[0]
    detector = DetectorConfig(stream_id=stream_id, threads=args.threads, alert_on=args.alert_on,
                              segmenter=_overrides(args), once=args.once, curve=own,  # connects where the checker binds
                              default_rates=args.default_rates)
    return run_all(RunConfig(_source(args), detector, checker, jsonl=args.jsonl, annotate_out=args.annotate_out,
                             preview=args.preview, webhook=webhook, alert_frames=args.alert_frames,
                             alert_frames_keep=_alert_frames_keep(args)), log=log)


def _checker_config(args: argparse.Namespace, own_client: bool = False,
                    warn: Callable[[str], None] = print_warning) -> tuple[CheckerConfig, CurveClient | None]:
    """The checker's settings from ``checker`` or ``run`` options, keys loaded and checked.

    With ``own_client`` (the all-in-one run) and CURVE, the run's own detector and view get a key pair that lives in
    memory only, and the checker lets it in besides its client folder.

    Returns:
        ``(config, the run's own client keys or None)``.
    """
    from streaming.checker.config import CheckerConfig
    from streaming.curve_keys import CurveClient, server_curve
    from streaming.transport import is_local

    curve = server_curve(args.curve_secret, args.curve_clients, warn=warn)
    own = CurveClient.ephemeral(curve.public) if own_client and curve is not None else None
    if curve is not None and own is not None:
        curve = replace(curve, extra_clients=(own.public,))
    config = CheckerConfig(args.bind, args.publish, stream_timeout_s=args.stream_timeout, curve=curve,
                           insecure=args.insecure, checking=_checking(args))
    exposed = [e for e in (config.bind_events, config.bind_alerts) if not is_local(e)]
    if args.insecure and curve is None and exposed:
        warn(f"--insecure: anyone who reaches {' or '.join(exposed)} can send key-steps to this checker or read "
             "its alerts")
    return config, own


def _keys(args: argparse.Namespace) -> int:
    """``stream-detect keys``: write the key pairs and say where each goes."""
    from streaming.curve_keys import CHECKER_NAME, CLIENTS_FOLDER, parse_client_names, write_key_set

    written = write_key_set(args.out, parse_client_names(args.clients), force=args.force, add=args.add)
    for path in written.files:
        print(printable(f"wrote {path}"))
    out = Path(args.out)
    print(printable(f"checker machine: {out / (CHECKER_NAME + '.key_secret')} and the allowed clients' public keys "
                    f"({out / CLIENTS_FOLDER}/*.key); each camera or viewer: {out / (CHECKER_NAME + '.key')} and its "
                    f"own {out / CLIENTS_FOLDER}/NAME.key_secret"))
    return 0


@contextlib.contextmanager
def _metrics_server(args: argparse.Namespace, metrics: Callable[[], Any], log: ServiceLog,
                    binds: Sequence[tuple[str, str]] = ()) -> Iterator[Any]:
    """With ``--metrics``: the service's metrics (``metrics()``), served while the block runs; without: None.

    The endpoint is bound first, so a busy port or a missing extra is refused before any model or graph loads. Port
    0 takes a free port, which ``log`` names (nothing else would say where to scrape). ``binds``: the ``(option,
    endpoint)`` pairs the service binds after it, refused when the metrics take their port.
    """
    if args.metrics is None:
        if args.metrics_public:
            raise InputError("--metrics-public lets --metrics bind beyond loopback: give --metrics HOST:PORT with it")
        yield None
        return
    from streaming.metrics import MetricsServer, parse_metrics_address, require_prometheus
    from streaming.transport import same_endpoint

    address = parse_metrics_address(args.metrics, args.metrics_public)
    for option, endpoint in binds:  # else the service's own bind failed on the port these had just taken
        if same_endpoint(f"tcp://{address}", endpoint):
            raise InputError(f"--metrics {args.metrics} and {option} {endpoint} name the same port: the metrics "
                             "endpoint and the checker's socket need one each")
    require_prometheus()
    made = metrics()
    server = MetricsServer(address, made.registry)
    if address.port == 0:
        log(f"{log.service}: metrics at {server.url}", metrics=server.url)
    try:
        yield made
    finally:
        server.close()


def _checker(args: argparse.Namespace) -> int:
    """``stream-detect checker``: serve until interrupted, with its log lines, metrics and webhook."""
    from streaming.service_log import queued_log

    with queued_log("checker", args.log_format) as log:
        return _serve_checker(args, log)


def _serve_checker(args: argparse.Namespace, log: ServiceLog) -> int:
    """The checker of `_checker`, its lines to ``log``."""
    from streaming.checker.service import run_checker
    from streaming.detector.webhook import webhook_sinks

    config, _ = _checker_config(args, warn=log.warning)  # its log's writer, never held by a stderr that takes nothing

    def ready(events: str, alerts: str) -> None:
        log(f"checker: detectors connect to {events}, viewers to {alerts}", events=events, alerts=alerts)

    def metrics() -> Any:
        from streaming.metrics import CheckerMetrics

        return CheckerMetrics()

    # The URL is checked first. The checker hands its sinks no periodic re-send: its webhook may POST a replayed alert
    # (one rebuilt from a history, which no receiver had).
    with webhook_sinks(args.webhook, log, rebuilt=True) as sinks, _metrics_server(
            args, metrics, log, (("--bind", config.bind_events), ("--publish", config.bind_alerts))) as watcher:
        run_checker(args.graph, config, ready=ready, report=log, metrics=watcher, sinks=sinks,
                    log=lambda line, level="warning", **fields: log(line, level, **fields))
    return 0


def _source(args: argparse.Namespace, video: str | None = None) -> StreamSource:
    """What a detector stream reads (``video``, else ``--video``), from the options both ``run`` and ``detector``
    take."""
    from streaming.detector.config import StreamSource
    from streaming.readers import ReaderConfig

    reader = ReaderConfig(reader=args.reader, realtime=not args.fast)  # fps: the detector's, set when it loads
    return StreamSource(video or args.video, args.graph, args.detector, args.backbone, reader, args.device,
                        args.ignore_names)


def _detector(args: argparse.Namespace) -> int:
    """``stream-detect detector``: one or several sources through one model, publishing to a checker."""
    from streaming.service_log import queued_log

    # Queued, as the checker's: a stream's end line is said on the frame loop's thread, and a stderr that takes
    # nothing (a full pipe whose reader stopped reading, a slow file) held that thread, and with it every stream's
    # end and last heartbeats; its first line, before any stream started, held the whole run.
    with queued_log("detector", args.log_format) as log:
        return _run_detector(args, log)


def _run_detector(args: argparse.Namespace, log: ServiceLog) -> int:
    """The detector of `_detector`, its lines to ``log``."""
    from streaming.curve_keys import client_curve
    from streaming.detector import DetectorConfig, PipelineConfig, build_pipeline, stream_ids_for

    ids = stream_ids_for(args.video, args.stream_id or (), "--features" if args.features else "--video")
    config = DetectorConfig(stream_id=ids[0], connect=args.connect, threads=args.threads,
                            alert_on=args.alert_on, segmenter=_overrides(args), once=args.once,
                            curve=client_curve(args.curve_server, args.curve_secret, log.warning),
                            default_rates=args.default_rates)

    def metrics() -> Any:
        from streaming.metrics import DetectorMetrics

        return DetectorMetrics()

    pipeline_config = PipelineConfig(tuple(_source(args, video) for video in args.video), config, ids,
                                     alert_frames=args.alert_frames, alert_frames_keep=_alert_frames_keep(args))
    with (_metrics_server(args, metrics, log) as watcher,
          build_pipeline(pipeline_config, watcher=watcher, warn=log.warning) as pipeline):
        if not args.default_rates and pipeline.parts.checkpoint.evidence is None:
            log.warning(f"{args.detector}: holds no measured miss and false-detection rates: these streams send no "
                        "evidence, and a probabilistic checker takes their confirmed steps as certain (retrain it "
                        "with recognition-train, or give --default-rates)")
        # Ready: the model is loaded and the checker subscribed (loading takes seconds, and was said by nothing).
        log(f"detector: {count_of(len(ids), 'stream')} ({first_few(list(ids), 5)}) publishing to {args.connect}",
            streams=list(ids), connect=args.connect)
        told: set[str] = set()

        def ended(stream: DetectorStream) -> None:
            # Said as each stream ends, not once the last one has: with a camera among the sources that is never.
            told.add(stream.stream_id)
            _stream_summary(log, stream.stream_id, stream.stats)

        try:
            stats = pipeline.run(threading.Event(), ended)
        except KeyboardInterrupt:  # Ctrl-C or SIGTERM: the streams ended (last heartbeats sent), each said as it did
            # (a source that failed before was told at once, `FrameLoop`'s warning: the run's error line never comes)
            _untold_summaries(log, pipeline.streams, told)
            # The stop stays the exit status, but a stop no checker heard is no stop a view or dashboard will show:
            # the person who pressed Ctrl-C while the checker was down would take the sessions for recorded.
            unheard = pipeline.checker_gone(stopped=True)
            if unheard is not None:
                log.warning(str(unheard))
            raise
        gone = pipeline.checker_gone()
    errors = [run.error for run in stats if run.error]
    if errors:
        raise InputError("; ".join(errors))
    if gone is not None:  # after the streams' lines: the run did not do its job
        raise gone
    return 0


def _stream_summary(log: ServiceLog, sid: str, run: DetectorStats) -> None:
    """The detector's end line of one stream: frames, rate (where the frames were enough to measure one), drops,
    key-steps (and whether its source failed)."""
    failed = " (its source failed)" if run.error else ""
    steps = count_of(run.events, "key-step")
    fps = run.measured_fps
    rate = "" if fps is None else f" at {fps:.1f} fps"
    log(f"{sid}: {count_of(run.frames, 'frame')}{rate}, {run.dropped} dropped, {steps}{failed}",
        stream=sid, frames=run.frames, fps=None if fps is None else round(fps, 2), dropped=run.dropped,
        keysteps=run.events)


def _untold_summaries(log: ServiceLog, streams: Sequence[DetectorStream], told: set[str]) -> None:
    """The end lines of the streams not said as they ended (one whose end failed while the run stopped), in order."""
    for stream in streams:
        if stream.stream_id not in told:
            _stream_summary(log, stream.stream_id, stream.stats)


def _eval(args: argparse.Namespace) -> int:
    from rich.console import Console

    from graphs.common.consoles import UNWRAPPED, table_console
    from streaming.offline.eval_run import EvalConfig, evaluate
    from streaming.offline.eval_scores import (
        eval_lines,
        eval_table,
        false_alarm_line,
        legend_lines,
        missing_steps_line,
        unmeasured_notes,
    )

    config = EvalConfig(
        graph=args.graph, detector=args.detector, videos=args.videos, annotations=args.annotations,
        names=args.videos_list or (), split=args.split, demo=args.demo, backbone=args.backbone,
        alert_on=args.alert_on, segmenter=_overrides(args), once=args.once, json_out=args.json_out,
        threads=args.threads, device=args.device, reader=args.reader, ignore_names=args.ignore_names,
        use_cache=not args.no_cache, annotate_out=args.annotate_out, preview=args.preview, checking=_checking(args),
        plots=args.plots, default_rates=args.default_rates, features=tuple(args.features or ()), rate=args.rate,
    )  # fmt: skip
    result = evaluate(config, progress=not args.quiet)
    title = (f"stream-detect eval: {count_of(len(result.runs), 'video')}, alerts on {args.alert_on}"
             f" ({result.cached} from the cache)")
    table, console = eval_table(result.scores, title), Console()
    width = console.measure(table, options=console.options.update_width(UNWRAPPED)).maximum
    if not console.is_terminal:  # logs and pipes keep the whole table
        table_console(console).print(table)
    elif width <= console.width:
        console.print(table)
    else:  # squeezed, rich would cut the figures to "1…": lines keep every figure whole
        print("\n".join(eval_lines(result.scores, title, console.width)))
        width = console.width
    print("\n".join(legend_lines(width)))  # as wide as the table above it
    missing = missing_steps_line(result.scores)
    for line in (false_alarm_line(result.scores), *([missing] if missing else []), *unmeasured_notes(result.scores)):
        # A terminal wraps a long line wherever it ends ("R 100." / "0"): wrapped here between words instead.
        print("\n".join(wrap_words(line, console.width)) if console.is_terminal else line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
