"""What one fold of ``tgml bench-live`` trains: its graphs, its detector and the detector's outputs, the entry
`tgml.bench.live.cache` keeps.

The cache's key holds a digest of the source this module and what it imports run (`tgml.bench.live.cache`): a change
to how a fold is trained misses the cache, one to how its outputs are checked and scored does not.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from pathlib import Path

from graphs.annotations import Annotations, TrainingVideos
from graphs.task_graph import TaskGraph
from recognition.feature_folders import choose_validation_videos
from recognition.model import FastStepper
from tgml.bench.live.cache import TrainedFold, fold_key, load_fold, save_fold
from tgml.bench.live.chain import stepper_outputs
from tgml.bench.live.detector import LiveDetectorSettings, train_fold_detector
from tgml.bench.live.observed import observed_graphs
from tgml.bench.live.recordings import LiveRecording, Recipe
from tgml.bench.process_pool import report_progress
from tgml.learners.registry import DEFAULT_LEARNER, learner


def learn_graph(annotations: Annotations, recipe: Recipe, test: Sequence[LiveRecording], seed: int) -> TaskGraph:
    """The recipe's graph by the default learner, from its graph-generation recordings less the test fold's."""
    names = {v.video for v in annotations.scenario_videos(recipe.scenario)}
    exclude = tuple(r.recording_id for r in test if r.recording_id in names)
    chosen = annotations.training_selection(recipe.scenario, TrainingVideos(exclude=exclude))
    entry = learner(DEFAULT_LEARNER)
    config = entry.with_seed(entry.config(None), seed)
    return entry.learn(chosen.sequences, chosen.step_ids, chosen.step_names, config, recipe.scenario).graph


def fold_detector_settings(detector: LiveDetectorSettings, seed: int, detectors_seed: int,
                           train: Sequence[LiveRecording], test: Sequence[LiveRecording]) -> LiveDetectorSettings:
    """A fold's detector settings: seeded by ``detectors_seed``, its validation recordings named, drawn as the trainer
    draws them (`recognition.feature_folders.choose_validation_videos`) but with the run's ``seed``, so that another
    detector seed trains on the same split."""
    settings = detector.with_epochs(None, detectors_seed)
    train_settings = settings.train
    validation = choose_validation_videos([r.recording_id for r in train], train_settings.val_fraction,
                                          train_settings.val_videos, seed, [r.recording_id for r in test])
    return dataclasses.replace(settings, train=dataclasses.replace(train_settings, val_videos=validation))


def train_fold(recipe: Recipe, train: list[LiveRecording], test: list[LiveRecording], annotations: Annotations,
               settings: LiveDetectorSettings, seed: int) -> TrainedFold:
    """Learn the fold's graphs, train its detector and run its live stepper over the test and validation recordings
    (what `tgml.bench.live.cache` keeps)."""
    report_progress("learning its graph")
    graph = learn_graph(annotations, recipe, test, seed)
    detector = train_fold_detector(recipe, train, test, settings)
    stepper = FastStepper(detector.model)
    held = [r for r in train if r.recording_id in detector.validation]
    report_progress("learning its validation graph, its detector over its recordings")
    val_graph = learn_graph(annotations, recipe, [*test, *held], seed)
    return TrainedFold(graph.to_dict(), val_graph.to_dict(), detector.kept_epoch, detector.validation_outputs,
                       {r.recording_id: stepper_outputs(stepper, r.features, str(r.path)) for r in test},
                       {r.recording_id: stepper_outputs(stepper, r.features, str(r.path)) for r in held})


def fold_entry(recipe: Recipe, fold: int, train: list[LiveRecording], test: list[LiveRecording],
               annotations: Annotations, settings: LiveDetectorSettings, seed: int, cache: Path | None,
               observed: bool) -> tuple[TrainedFold, bool]:
    """A fold's entry: read from ``cache`` when it holds it, else trained (`train_fold`) and kept there; with
    ``observed``, its observed pre-conditions too (`tgml.bench.live.observed`), added to an entry that lacks them.

    Returns:
        The entry, and whether the cache gave it whole (nothing trained here: neither the fold nor the detectors of
        its observed pre-conditions).

    Raises:
        InputError: a damaged or foreign entry in ``cache`` (`tgml.bench.live.cache.load_fold`).
    """
    key = fold_key(recipe.scenario, fold, train, test, settings.train, seed, DEFAULT_LEARNER)
    recordings = [*train, *test]
    trained = (load_fold(cache, key, [r.recording_id for r in test], [r.recording_id for r in train],
                         {r.recording_id: len(r.features) for r in recordings}, len(recipe.class_step_ids),
                         settings.train.model_config(test[0].features.shape[1], len(recipe.class_step_ids)).outputs)
               if cache is not None else None)
    from_cache = trained is not None
    if trained is None:
        trained = train_fold(recipe, train, test, annotations, settings, seed)
        if cache is not None:
            save_fold(cache, key, trained)
    if observed and trained.observed is None:
        fitting = [r for r in train if r.recording_id not in trained.validation_outputs]
        graphs = observed_graphs(recipe, fitting, trained.validation_outputs, TaskGraph.from_dict(trained.graph),
                                 TaskGraph.from_dict(trained.val_graph), settings, seed)
        if graphs is not None:  # None: too few fitting recordings, nothing trained
            from_cache = False
            trained = dataclasses.replace(trained, observed=graphs)
            if cache is not None:
                save_fold(cache, key, trained)
    return trained, from_cache
