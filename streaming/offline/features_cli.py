"""``recognition-features``: turn your labelled videos into the feature folder ``recognition-train`` reads.

Usage::

    recognition-features import --features npy_dir/ --annotations labels.json --rate 1 --out features/ \\
        [--name imported] [--scenario S] [--test-fraction 0.2 | --test-videos a,b] [--seed 0]
    recognition-features --videos videos/ --annotations labels.json --extractor efficientnet-lite0 --fps 5 \\
        --out features/ [--test-fraction 0.2 | --test-videos a,b] [--scenario tent] [--threads 2] [--device auto] \\
        [--augment-copies K [--augment-flips]] [--verbose]

``labels.json`` is the annotation file ``tgml train`` reads; each annotated video of the scenario is looked up in
``--videos`` by its name (``.mp4``, ``.avi``, ``.mkv``, ``.mov`` or ``.webm``) and read with ``stream-detect``'s
readers at ``--fps`` frames per second. The output is a MiniROAD feature folder: ``rgb_<extractor>/<video>.npy``,
``target_perframe/<video>.npy`` (class 0 background, then one column per key-step of the scenario's taxonomy) and
``split.json``; with ``--augment-copies K``, ``rgb_<extractor>/<video>.aug1.npy`` .. ``aug<K>.npy`` for each
training video too (the same video seen through another crop, brightness, contrast and saturation). Progress bars
show videos and frames (a line per video when stderr is not a terminal). Running the same command again resumes: a
video whose features exist for the same settings, whole and finite, is skipped, and the folder's split
(``split.json``, written before the first video) is kept; ``--test-videos`` or ``--test-fraction`` that would change
it are refused. Bad input ends
with one ``error:`` line and exit status 2, before any frame is decoded where it can be known then; every file is
written atomically, so nothing already extracted is lost. Ctrl-C and SIGTERM stop it alike (exit status 130 / 143),
discarding only the video being written.

``import`` brings features of your own backbone instead (`recognition.feature_import`): one ``<video>.npy`` per
recording, ``(T, D)`` floats at ``--rate`` vectors per second, into the same folder layout; the detector trained on it
records the rate and the ``--name`` (default ``imported``) and is fed live from feature files
(``stream-detect --features FILE.npy``).
"""

from __future__ import annotations

import sys
from typing import Final

from graphs.common.command_line import ArgumentParser, add_version_option, plain_summary, unknown_command
from graphs.common.errors import InputError, exit_on_input_error, print_note, print_warning
from graphs.common.options import (
    MAX_FPS,
    MIN_FPS,
    fps_option,
    is_rate,
    output_name,
    rate_option,
    seed_option,
    threads_option,
)


def _names(value: str) -> tuple[str, ...]:
    names = tuple(n.strip() for n in value.split(",") if n.strip())
    if not names:
        raise InputError(f"--test-videos {value!r}: give video names separated by commas")
    return names


# Both forms of the command: argparse's own usage line listed the video options only, and `import` (features of
# your own backbone) was named at the very end of the page, where a user reading the usage never looked.
USAGE: Final = ("recognition-features --videos DIR --annotations FILE --out DIR [options]\n"
                "       recognition-features import --features DIR --annotations FILE --rate R\n"
                "                                   --out DIR [options]")


def build_parser() -> ArgumentParser:
    """The command-line interface."""
    from recognition.feature_folders import DEFAULT_TEST_FRACTION

    parser = ArgumentParser(prog="recognition-features", usage=USAGE,
                            description=plain_summary(__doc__) + " From videos (the options below), or from feature "
                            "files of your own backbone with the import command (recognition-features import --help).",
                            epilog="Features of your own backbone: recognition-features import --help")
    add_version_option(parser)
    parser.add_argument("--videos", required=True, metavar="DIR",
                        help="folder of the videos, named as in the annotation file")
    parser.add_argument("--annotations", required=True, metavar="FILE",
                        help="annotation file: JSON, or a .csv of video,step,start,end rows (the file "
                             "tgml train reads)")
    parser.add_argument("--out", required=True, type=output_name, metavar="DIR",
                        help="feature folder to write: a new or empty folder, or an earlier run's (resumed)")
    parser.add_argument(
        "--extractor", default="efficientnet-lite0", help="feature extractor: efficientnet-lite0 (default), "
        "efficientnet-lite0-grid (adds a 2x2 grid of the last feature map), efficientnet-lite2[-grid] (the 'lite2' "
        "extra) or light-v1"
    )
    parser.add_argument("--fps", type=fps_option, default=None,
                        help="feature frames per second (default 5; on a folder extracted before, its rate)")
    parser.add_argument("--scenario", help="scenario of the annotation file (needed when it holds several)")
    split = parser.add_mutually_exclusive_group()
    split.add_argument("--test-fraction", type=float, default=None, metavar="F",
                       help=f"share of videos held out (default {DEFAULT_TEST_FRACTION:g}); an existing --out folder "
                       "keeps its split")
    split.add_argument("--test-videos", type=_names, metavar="NAMES", help="test videos by name, comma-separated")
    parser.add_argument("--seed", type=seed_option, default=0,
                        help="seeds the --test-fraction draw and the augmented copies "
                        "(default 0)")
    parser.add_argument("--augment-copies", type=int, default=None, metavar="K",
                        help="also extract K augmented copies of each training video (random crop, colour jitter; "
                        "recognition-train uses them; default 2, 0: none)")
    parser.add_argument("--augment-flips", action="store_true", help="augmented copies may be mirrored left to right")
    parser.add_argument(
        "--threads", type=threads_option, help="batches computed at once, one core each (default: every core)"
    )
    parser.add_argument("--device", default="auto", choices=("auto", "cpu", "cuda"),
                        help="where the extractor runs (default auto: CUDA when torch sees one)")
    parser.add_argument("--reader", default="auto", choices=("auto", "decord", "opencv"),
                        help="file reader (default auto: decord where it reads the file, else OpenCV)")
    parser.add_argument("--quiet", action="store_true", help="no progress bars")
    parser.add_argument("--verbose", action="store_true",
                        help="show the video decoders' own log lines (FFmpeg, OpenCV, decord), quiet by default")
    return parser


IMPORT_ONLY: Final = frozenset({"--features", "--rate", "--name"})  # import's options extraction does not have


def build_import_parser() -> ArgumentParser:
    """The command-line interface of ``recognition-features import``."""
    from recognition.feature_folders import DEFAULT_TEST_FRACTION
    from recognition.feature_import import DEFAULT_NAME, NAME_RULE

    parser = ArgumentParser(prog="recognition-features import",
                            description="Bring your own features: one <video>.npy per recording, (T, D) floats at "
                            "--rate vectors per second, plus the annotation file, into the feature folder "
                            "recognition-train reads.")
    add_version_option(parser)
    parser.add_argument("--features", required=True, metavar="DIR",
                        help="folder of <video>.npy feature files, named as in the annotation file")
    parser.add_argument("--annotations", required=True, metavar="FILE",
                        help="annotation file: JSON, or a .csv of video,step,start,end rows (the file "
                             "tgml train reads)")
    parser.add_argument("--rate", required=True, type=rate_option, metavar="R",
                        help="feature vectors per second of recording (row k starts k / rate seconds in)")
    parser.add_argument("--out", required=True, type=output_name, metavar="DIR",
                        help="feature folder to write: a new or empty folder, or one imported into before")
    parser.add_argument("--name", default=DEFAULT_NAME,
                        help=f"the features' extractor name, recorded in the detector (default {DEFAULT_NAME}; "
                        f"{NAME_RULE})")
    parser.add_argument("--scenario", help="scenario of the annotation file (default: the one of the feature files)")
    split = parser.add_mutually_exclusive_group()
    split.add_argument("--test-fraction", type=float, default=None, metavar="F",
                       help=f"share of recordings held out (default {DEFAULT_TEST_FRACTION:g}; a folder imported "
                            "into before keeps its split)")
    split.add_argument("--test-videos", type=_names, metavar="NAMES",
                       help="test recordings by name, comma-separated")
    parser.add_argument("--seed", type=seed_option, default=0, help="seeds the --test-fraction draw (default 0)")
    return parser


def _import(argv: list[str]) -> int:
    """``recognition-features import``: check every file, then write the folder (no torch needed)."""
    from recognition.feature_folders import extractor_change_note
    from recognition.feature_import import ImportConfig, import_features

    args = build_import_parser().parse_args(argv)
    config = ImportConfig(features=args.features, annotations=args.annotations, rate=args.rate, out=args.out,
                          name=args.name, scenario=args.scenario, test_fraction=args.test_fraction,
                          test_videos=args.test_videos or (), seed=args.seed)
    report = import_features(config)
    for warning in report.rate_warnings(config.rate):
        print_warning(warning)
    print(report.summary(config.rate, config.name))
    if report.unread:  # an .npz of a recording counted in the summary as having no feature file: said why
        print_note(report.unread)
    changed = extractor_change_note(report.folder, report.before, config.name)
    if changed is not None:  # the features training reads by default are no longer the folder's earlier ones
        print_note(changed)
    return 0


@exit_on_input_error
def main(argv: list[str] | None = None) -> int:
    """Entry point of ``recognition-features`` (``import`` as first argument: `build_import_parser`)."""

    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["import"]:
        return _import(argv[1:])
    if argv and not argv[0].startswith("-"):  # extraction takes options only
        raise unknown_command("recognition-features", argv[0], ("import",))
    given = {a.split("=")[0] for a in argv}  # the options, "--rate=1" read as "--rate"
    imported = sorted(given & IMPORT_ONLY)
    if imported and "--videos" not in given:
        raise InputError(f"recognition-features: {', '.join(imported)}: options of recognition-features import (your "
                         "own feature files: recognition-features import --features DIR ...); extraction from videos "
                         "takes --videos")
    args = build_parser().parse_args(argv)
    from recognition.feature_folders import extractor_change_note, stored_split
    from streaming.offline.features import DEFAULT_FPS, FeatureExtractionConfig, extract_feature_folder, folder_rate
    from streaming.readers import quiet_codec_logs

    quiet_codec_logs(args.verbose)
    # Resuming without --fps goes on at the folder's rate: a forgotten --fps is no reason to start again.
    before = stored_split(args.out)
    fps = args.fps if args.fps is not None else folder_rate(args.out, before) or DEFAULT_FPS
    if args.fps is None and not is_rate(fps):  # imported features may run at 0.5 a second
        raise InputError(f"{args.out}: its features run at {fps:g} per second, and video is extracted at "
                         f"{MIN_FPS:g} to {MAX_FPS:g} frames a second; extract into another --out")
    config = FeatureExtractionConfig(
        videos=args.videos,
        annotations=args.annotations,
        out=args.out,
        extractor=args.extractor,
        fps=fps,
        scenario=args.scenario,
        test_fraction=args.test_fraction,
        test_videos=args.test_videos or (),
        seed=args.seed,
        threads=args.threads,
        device=args.device,
        reader=args.reader,
        augment_flips=args.augment_flips,
        **({} if args.augment_copies is None else {"augment_copies": args.augment_copies}),
    )
    report = extract_feature_folder(config, progress=not args.quiet)
    print(report.summary())
    changed = extractor_change_note(args.out, before, args.extractor)
    if changed is not None:  # the features training reads by default are no longer the folder's earlier ones
        print_note(changed)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
