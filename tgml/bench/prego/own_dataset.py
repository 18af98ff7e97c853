"""`prego-bench --annotations FILE`: the PREGO GT-mode benchmark on a dataset of the user's, in the annotation format.

One annotation file holds the training and the test videos of a scenario. The test videos are named either on the
command line (``--test-videos a,b``: every other video of the scenario trains) or by a split file (``--split FILE``,
``{"train": [...], "test": [...]}`` as ``recognition-features`` writes it; videos in neither list are not used).

Mistakes come from the annotation format's ``has_errors`` flag: a test video is cut right after its first segment
with ``has_errors: true``, so its last step is the mistake, as the PREGO protocol wants. A test video without any
such segment is a correct execution: it is kept whole and all its steps count as correct. Training videos are used
whole, like the built-in datasets' training splits (their ``has_errors`` flags are not read).

Settings: ``tgml/bench/settings/prego-defaults.toml`` (nothing tuned on any dataset); ``--config FILE`` in the format
of ``prego-<dataset>.toml`` replaces its tables and may add ``[do-cv]`` / ``[do-ensemble]``, which have no defaults.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

import numpy as np

from graphs.annotations import Annotations, choose_scenario, load_annotations
from graphs.common.errors import InputError, print_warning
from graphs.common.safe_text import count_of, first_few, meant_name
from recognition.feature_folders import load_split
from tgml.bench.prego.data import BenchData
from tgml.bench.prego.methods import SETTINGS_DIR, load_method_settings

DEFAULT_SETTINGS: Final = SETTINGS_DIR / "prego-defaults.toml"


@dataclass(frozen=True)
class AnnotationSource:
    """A dataset of the user's: one annotation file, the scenario to run and which of its videos are test videos.

    Args:
        annotations: the annotation file (training and test videos together).
        scenario: the scenario (procedure) whose videos are used; its taxonomy is the graph's key-steps.
        test_videos: names of the test videos (all other videos of the scenario train), or None with ``split``.
        split: a ``{"train": [...], "test": [...]}`` file naming both lists, or None with ``test_videos``.
        settings: a settings file whose tables replace those of `DEFAULT_SETTINGS`, or None.
        order_only: read only the order of the segments, their times unchecked (``--order-only``); by default the
            times get the check every command shares (overlaps accepted, with a warning).
    """

    annotations: Path
    scenario: str
    test_videos: tuple[str, ...] | None = None
    split: Path | None = None
    settings: Path | None = None
    order_only: bool = False

    def __post_init__(self) -> None:
        if (self.test_videos is None) == (self.split is None):
            raise InputError("--annotations: name the test videos with exactly one of --test-videos and --split")
        if not self.scenario:
            raise InputError("--scenario: give the scenario of the annotation file to run")
        if self.test_videos is not None:
            if not self.test_videos or any(not name for name in self.test_videos):
                raise InputError(f"--test-videos {','.join(self.test_videos)!r}: expected names like a,b")
            repeated = next((v for k, v in enumerate(self.test_videos) if v in self.test_videos[:k]), None)
            if repeated is not None:
                raise InputError(f"--test-videos: video {repeated!r} is listed twice")

    @property
    def name(self) -> str:
        """The dataset's name in tables, results and saved graph files: its scenario."""
        return self.scenario


def only_scenario(path: Path) -> str:
    """The scenario of an annotation file whose videos are all of one (``--annotations`` without ``--scenario``), by
    the rule of every command that reads one scenario (`graphs.annotations.choose_scenario`).

    Raises:
        InputError: the file holds no video, or videos of several scenarios: which to run is the user's choice.
    """
    return choose_scenario(load_annotations(path, check_times=False), None)  # times unchecked: no warning said twice


def first_mistake_cut(has_errors: Sequence[bool]) -> tuple[int, bool]:
    """Where the PREGO protocol cuts a test video: right after its first mistaken segment.

    Args:
        has_errors: per segment, the annotation's ``has_errors`` flag.

    Returns:
        ``(length, has_mistake)``: the number of segments kept (up to and including the first mistake, or all of
        them when there is none) and whether the kept sequence ends with a mistake.
    """
    flagged = np.flatnonzero(np.asarray(has_errors, dtype=bool))
    if flagged.size == 0:
        return len(has_errors), False
    return int(flagged[0]) + 1, True


def read_split(path: Path) -> tuple[list[str], list[str]]:
    """The train and test lists of a split file (``train`` / ``test``, or MiniROAD's ``*_session_set`` keys).

    Returns:
        ``(train, test)`` video names as listed.
    """
    split = load_split(path)
    return list(split.train), list(split.test)


def _check_named(names: Sequence[str], annotations: Annotations, scenario: str, source: str) -> None:
    """Every named video must be a video of the scenario in the annotation file."""
    for name in names:
        video = annotations.videos.get(name)
        if video is None:
            # The closest video of the scenario: a typo in --test-videos was left to be found in the file. Not one
            # named already (v1,v11 got "did you mean 'v1'?", a video listed twice if taken).
            ours = [v.video for v in annotations.scenario_videos(scenario) if v.video not in names]
            raise InputError(f"{source}: video {name!r} is not in {annotations.path}{meant_name(name, ours, 0)}")
        if video.scenario != scenario:
            raise InputError(f"{source}: video {name!r} of {annotations.path} is of scenario {video.scenario!r}, "
                             f"not {scenario!r}")


def load_annotation_dataset(source: AnnotationSource) -> BenchData:
    """Read a dataset of the user's and cut its test videos at their first mistake (module docstring).

    Args:
        source: the file, the scenario and the test videos.

    Returns:
        The dataset: training sequences whole, GT test sequences cut, correct test videos listed.
    """
    annotations = load_annotations(source.annotations, check_times=not source.order_only,
                                   scenario_read=source.scenario, scenario_required=True)
    step_ids, step_names = annotations.steps_of(source.scenario)
    videos = [v.video for v in annotations.scenario_videos(source.scenario)]
    if source.split is not None:
        train_names, test_names = read_split(source.split)
        _check_named([*train_names, *test_names], annotations, source.scenario, str(source.split))
        train_set, test_set = set(train_names), set(test_names)
        where = str(source.split)
    else:
        assert source.test_videos is not None
        _check_named(source.test_videos, annotations, source.scenario, "--test-videos")
        test_set = set(source.test_videos)
        train_set = set(videos) - test_set
        where = "--test-videos"
    # File order for both splits, so the order the videos are listed in never changes a learned graph.
    train = [annotations.videos[v] for v in videos if v in train_set]
    test = [annotations.videos[v] for v in videos if v in test_set]
    if not train:
        raise InputError(f"{where}: no training video of scenario {source.scenario!r} in {annotations.path}")
    if not test:
        raise InputError(f"{where}: no test video of scenario {source.scenario!r} in {annotations.path}")
    test_seqs: dict[str, tuple[int, ...]] = {}
    correct: set[str] = set()
    for video in test:
        if not video.steps:
            raise InputError(f"{annotations.path}: test video {video.video!r} has no segments")
        length, has_mistake = first_mistake_cut(video.has_errors)
        test_seqs[video.video] = video.steps[:length]
        if not has_mistake:
            correct.add(video.video)
    if len(correct) == len(test):
        raise InputError(
            f"{annotations.path}: none of the {len(test)} test videos has a segment with has_errors: true; the PREGO "
            "protocol scores the detection of mistakes, so at least one test video needs one"
        )
    mistaken = [v.video for v in train if any(v.has_errors)]
    if mistaken:  # said, since tgml train on the same file leaves them out and learns another graph
        print_warning(f"{annotations.path}: {count_of(len(mistaken), 'training video')} marked has_errors "
                      f"({first_few(mistaken, 3)}) learned from whole, as the benchmarks' training splits are; "
                      "tgml train leaves them out (a mistaken order learned as allowed can drop the pre-condition it "
                      "breaks)")
    return BenchData(
        source.name,
        source.scenario,
        step_ids,
        step_names,
        tuple(v.steps for v in train),
        test_seqs,
        correct_videos=frozenset(correct),
    )


def own_method_settings(source: AnnotationSource, methods: Sequence[str]) -> dict[str, dict[str, Any]]:
    """Method settings of a dataset of the user's: the shipped defaults, their tables replaced by ``--config``'s.

    Args:
        source: the dataset (its ``settings`` file, if any).
        methods: the methods to run; each needs a table.

    Returns:
        ``{method: {setting: value}}``, every value checked by the config it feeds.
    """
    settings = load_method_settings("defaults", DEFAULT_SETTINGS)
    if source.settings is not None:
        settings |= load_method_settings("own", source.settings)
    for method in methods:
        if method not in settings:
            where = (
                f"{source.settings} has no [{method}] table" if source.settings is not None
                else "give --config FILE with a [" + method + "] table"
            )
            raise InputError(f"--method {method} needs settings tuned for your dataset: {where} (the format of "
                             "tgml/bench/settings/prego-<dataset>.toml)")
    return settings
