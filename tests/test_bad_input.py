"""A table of bad input across the five commands: each case exits with status 2 and one ``error:`` line that names
the culprit (file, field, option or value), never a traceback.

Users found 11 tracebacks, 8 wrong exit statuses and 1 crash in 174 such cases; a second sweep of 765 found 17
tracebacks and 5 wrong exit statuses on the file side (damaged checkpoints and feature arrays, bad segments
accepted, seeds out of range, odd videos); this table keeps them all fixed. Every case runs in-process and fails
before any long work (training, decoding video), so the table stays fast. The odd videos, which need a file
written by OpenCV, follow the table.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVarTuple

import numpy as np
import pytest

from graphs.common.errors import InputError
from graphs.task_graph import load_graph
from recognition.recognition_train_cli import main as recognition_train
from streaming.demo.paths import DEMO_DIR, default_demo_paths
from streaming.offline.features_cli import main as recognition_features
from streaming.stream_detect_cli import main as stream_detect
from tests.cli_errors import cli_error
from tests.recognition.conftest import SMALL_CONFIG, write_feature_folder
from tests.unprivileged import unprivileged
from tgml.bench.prego_bench_cli import main as prego_bench
from tgml.tgml_cli import main as tgml

ROOT = Path(__file__).resolve().parents[1]
GRAPH, DETECTOR = default_demo_paths()
ANNOTATIONS = DEMO_DIR / "demo_annotations.json"
TINY = ROOT / "configs" / "miniroad-tiny.toml"
TOO_MANY = str(4 * (os.cpu_count() or 1) + 1)
TMP = "/tmp/bad-input-table"  # flag cases name paths under the test's own folder: this placeholder is replaced


class Files:
    """Bad input files written on demand in a temporary folder; each method returns the file's path as a string."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def text(self, name: str, content: str | bytes) -> str:
        path = self.root / name
        if isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(content, encoding="utf-8")
        return str(path)

    def json(self, name: str, value: Any) -> str:
        return self.text(name, json.dumps(value))

    def graph(self, change: Callable[[dict[str, Any]], object]) -> str:
        """The demo graph file with one change."""
        data = load_graph(GRAPH).to_dict()
        change(data)
        return self.json("graph.json", data)

    def annotations(self, change: Callable[[dict[str, Any]], object]) -> str:
        """The demo annotation file with one change."""
        data = json.loads(ANNOTATIONS.read_text())
        change(data)
        return self.json("annotations.json", data)

    def checkpoint(self, change: Callable[[dict[str, Any]], object]) -> str:
        """The demo detector checkpoint with one change to its stored dictionary."""
        import torch

        data = torch.load(DETECTOR, weights_only=True)
        change(data)
        path = self.root / "detector.pt"
        torch.save(data, path)
        return str(path)

    def folder(self, name: str) -> str:
        (self.root / name).mkdir(exist_ok=True)
        return str(self.root / name)

    def features(self, change: Callable[[Path], object]) -> str:
        """A small valid feature folder (``rgb_synth``, 2 training videos and 1 test video) with one change."""
        root = write_feature_folder(self.root / "features", n_train=2, n_test=1, frames=40)
        change(root)
        return str(root)

    def small_config(self) -> str:
        return self.text("small.toml", SMALL_CONFIG)

    def fifo(self, name: str) -> str:
        os.mkfifo(self.root / name)
        return str(self.root / name)

    def missing(self, name: str) -> str:
        return str(self.root / name)


Ts = TypeVarTuple("Ts")


def bound(build: Callable[[Files, *Ts], list[str]], *values: *Ts) -> Callable[[Files], list[str]]:
    """``build`` with its arguments after the files bound now: a case made in a loop keeps its own loop values (a
    lambda over the loop variables would read their last values when the test runs)."""
    return lambda f: build(f, *values)


@dataclass(frozen=True)
class Case:
    """One bad command line: the command, its argv built from `Files`, and the text its error line must hold."""

    name: str
    main: Callable[[list[str]], object]
    argv: Callable[[Files], list[str]]
    culprit: str  # "{file}" stands for the last file path in argv


def step0(data: dict[str, Any], key: str, value: Any) -> None:
    data["steps"][0][key] = value


def video0(data: dict[str, Any]) -> dict[str, Any]:
    return next(iter(data["annotations"].values()))


def segment0(data: dict[str, Any], key: str, value: Any) -> None:
    video0(data)["segments"][0][key] = value


def taxonomy(data: dict[str, Any], key: str, value: Any) -> None:
    table = data["taxonomy"]["demo-tea"]
    next(iter(table.values()))[key] = value


# The same broken JSON in every option that reads a JSON file: the reader every loader shares turns each into one line.
BROKEN_JSON: dict[str, Callable[[Files, str], str]] = {
    "missing": lambda f, n: f.missing(n),
    "folder": lambda f, n: f.folder(n),
    "binary": lambda f, n: f.text(n, b"\xff\xfe\x00\x81"),
    "empty": lambda f, n: f.text(n, ""),
    "nested-too-deep": lambda f, n: f.text(n, "[" * 100_000),
    "number-overflow": lambda f, n: f.text(n, '{"a": 1e400}'),
    "nan": lambda f, n: f.text(n, '{"a": NaN}'),
    "huge-integer": lambda f, n: f.text(n, "1" * 5000),
    "key-twice": lambda f, n: f.text(n, '{"a": 1, "a": 2}'),
    "not-an-object": lambda f, n: f.text(n, "[1, 2]"),
    "fifo": lambda f, n: f.fifo(n),  # reading it used to block for ever, waiting for a writer
}
JSON_OPTIONS: dict[str, tuple[Callable[[list[str]], object], Callable[[str], list[str]]]] = {
    "tgml-train-annotations": (tgml, lambda p: ["train", "--annotations", p, "--scenario", "demo-tea", "--out", "o"]),
    "tgml-show": (tgml, lambda p: ["show", p]),
    "tgml-eval-pred": (tgml, lambda p: ["eval", "--pred", p, "--gt", str(GRAPH)]),
    "stream-detect-graph": (stream_detect, lambda p: ["--video", "demo", "--graph", p, "--jsonl"]),
    "stream-detect-checker-graph": (stream_detect, lambda p: ["checker", "--graph", p, "--bind", "tcp://127.0.0.1:0",
                                                              "--publish", "tcp://127.0.0.1:0"]),
    "stream-detect-view-graph": (stream_detect, lambda p: ["view", "--graph", p]),
    "prego-replay-frames": (prego_bench, lambda p: ["replay", "--frames", p, "--graph", str(GRAPH)]),
    "prego-replay-graph": (prego_bench, lambda p: ["replay", "--frames", str(ANNOTATIONS), "--graph", p]),
}


def json_cases() -> list[Case]:
    cases = []
    for option, (main, argv) in JSON_OPTIONS.items():
        for broken, make in BROKEN_JSON.items():
            if broken == "not-an-object" and option == "prego-replay-graph":
                continue  # the frames file is read after the graph: covered by prego-replay-frames
            cases.append(Case(f"{option}/{broken}", main,
                              bound(lambda f, make, argv: argv(make(f, "input.json")), make, argv),
                              "input.json"))
    return cases


GRAPH_FILE: dict[str, tuple[Callable[[dict[str, Any]], object], str]] = {
    "negative-id": (lambda d: step0(d, "id", -1), "steps[0].id = -1 must be an integer in 0..2147483647"),
    "id-over-2^31": (lambda d: step0(d, "id", 2**31), "steps[0].id = 2147483648 must be"),
    "bool-id": (lambda d: step0(d, "id", True), "steps[0].id = true must be an integer"),
    "float-id": (lambda d: step0(d, "id", 1.5), "steps[0].id = 1.5 must be an integer"),
    "no-id": (lambda d: d["steps"][0].pop("id"), "steps[0] has no field 'id'"),
    "step-list": (lambda d: d["steps"].__setitem__(0, [1, "a"]), 'steps[0] = [1, "a"] must be an object'),
    "name-513": (lambda d: step0(d, "name", "x" * 513), "the name of step 1 is 513 characters long; at most 512"),
    "name-number": (lambda d: step0(d, "name", 7), "steps[0].name = 7 must be a string"),
    "2049-steps": (lambda d: d.update(steps=[{"id": k, "name": "s"} for k in range(2049)]), "at most 2048"),
    "scenario-long": (lambda d: d.update(scenario="x" * 600), "scenario name is 600 characters"),
    "scenario-number": (lambda d: d.update(scenario=3), "field 'scenario' must be a string"),
    "string-weights": (lambda d: d.update(weights=[["0.5"] * 8] * 8), "field 'weights' must be a square matrix"),
    "ragged-weights": (lambda d: d.update(weights=[[0.5], [0.5, 0.5]]), "field 'weights' must be a square matrix"),
    "weights-shape": (lambda d: d.update(weights=[[0.5]]), "weights have shape"),
    "cycle": (lambda d: d["edges"].append({"step": 1, "requires": 2}), "cycle"),  # the graph has 2 requires 1
    "edge-to-nowhere": (lambda d: d["edges"].append({"step": 1, "requires": 99}), "edges["),
    "edge-not-object": (lambda d: d["edges"].append([1, 2]), "edges["),
    "format": (lambda d: d.update(format="other"), "field 'format'"),
    "version": (lambda d: d.update(version=3), "unsupported version 3"),
    "no-steps": (lambda d: d.update(steps=[]), "field 'steps' must be a non-empty list"),
    "duplicate-id": (lambda d: d["steps"].append(dict(d["steps"][0])), "appears twice in 'steps'"),
    "duplicate-name": (lambda d: d["steps"].append(dict(d["steps"][0], id=9999)), "two steps are named"),
    "info-list": (lambda d: d.update(info=[]), "field 'info' must be an object"),
}


def graph_cases() -> list[Case]:
    cases = []
    for bad, (change, culprit) in GRAPH_FILE.items():
        for option in ("tgml-show", "stream-detect-graph"):
            main, argv = JSON_OPTIONS[option]
            cases.append(Case(f"graph-{bad}/{option}", main, bound(lambda f, c, a: a(f.graph(c)), change, argv),
                              culprit))
    return cases


ANNOTATION_FILE: dict[str, tuple[Callable[[dict[str, Any]], object], str]] = {
    "string-start-time": (lambda d: segment0(d, "start_time", "1.3"), 'segments[0].start_time = "1.3" is not a number'),
    "bool-end-time": (lambda d: segment0(d, "end_time", True), "segments[0].end_time = true is not a number"),
    "null-start-time": (lambda d: segment0(d, "start_time", None), "segments[0].start_time = null is not a number"),
    "list-end-time": (lambda d: segment0(d, "end_time", [1]), "segments[0].end_time = [1] is not a number"),
    "step-not-in-taxonomy": (lambda d: segment0(d, "step_id", 99), "segments[0].step_id = 99 is not in"),
    "string-step": (lambda d: segment0(d, "step_id", "3"), "segments[0].step_id is missing or not an integer"),
    "has-errors-string": (lambda d: segment0(d, "has_errors", "no"), 'has_errors = "no" is not true or false'),
    "negative-taxonomy-id": (lambda d: taxonomy(d, "id", -4), ".id = -4 must be an integer in 0..2147483647"),
    "taxonomy-id-2^31": (lambda d: taxonomy(d, "id", 2**31), ".id = 2147483648 must be"),
    "taxonomy-name-long": (lambda d: taxonomy(d, "name", "y" * 513), ".name is 513 characters long"),
    "taxonomy-name-missing": (lambda d: taxonomy(d, "name", None), "needs a string 'name'"),
    "no-annotations": (lambda d: d.pop("annotations"), "missing object field 'annotations'"),
    "no-taxonomy": (lambda d: d.pop("taxonomy"), "missing object field 'taxonomy'"),
    "annotations-a-list": (lambda d: d.update(annotations=[]), "field 'annotations' must be an object, not a list"),
    "taxonomy-a-list": (lambda d: d.update(taxonomy=[]), "field 'taxonomy' must be an object, not a list"),
    "segments-not-list": (lambda d: video0(d).update(segments={}), "segments must be a list, not an object"),
    "segments-missing": (lambda d: video0(d).pop("segments"), "] has no 'segments' (the list of its key-steps"),
    "scenario-unknown": (lambda d: video0(d).update(scenario="x"), 'scenario = "x"'),
    # 10,000 unused taxonomy steps: tgml train learned over 10^8 step pairs for over 15 minutes at 3.4 GB.
    "10000-unused-steps": (lambda d: d["taxonomy"]["demo-tea"].update(
        {str(k): {"name": f"unused {k}", "id": k} for k in range(100, 10_100)}),
        "taxonomy['demo-tea'] has 10006 key-steps; a task graph holds at most 2048"),
}


def annotation_cases() -> list[Case]:
    main, argv = JSON_OPTIONS["tgml-train-annotations"]
    return [Case(f"annotations-{bad}", main, bound(lambda f, c: argv(f.annotations(c)), change), culprit)
            for bad, (change, culprit) in ANNOTATION_FILE.items()]


CHECKPOINT: dict[str, tuple[Callable[[dict[str, Any]], object], str]] = {
    "class-name-long": (lambda d: d["class_names"].__setitem__(1, "z" * 513), "class_names[1] is 513 characters"),
    "class-name-number": (lambda d: d["class_names"].__setitem__(1, 5), "class_names[1] = 5 must be a string"),
    "class-step-negative": (lambda d: d["class_step_ids"].__setitem__(1, -1), "class_step_ids[1] = -1 must be"),
    "class-step-2^31": (lambda d: d["class_step_ids"].__setitem__(1, 2**31), "class_step_ids[1] = 2147483648"),
    "class-step-float": (lambda d: d["class_step_ids"].__setitem__(1, 1.5), "class_step_ids[1] = 1.5 must be"),
    # Named as such, not as "evidence names a step that is not one of its classes".
    "class-step-twice": (lambda d: d["class_step_ids"].__setitem__(2, d["class_step_ids"][1]),
                         "class_step_ids names step 1 for more than one class"),
    "fps-zero": (lambda d: d.update(fps=0.0), "fps = 0.0 must be a positive number"),
    "fps-string": (lambda d: d.update(fps="10"), 'fps = "10" must be a positive number'),
    # Only checked finite: every probability NaN (inf - inf), and the stream ended with status 0.
    "evidence-slope-1e308": (lambda d: d["evidence"].update(done_slope=1e308),
                             "field 'evidence': done_slope = 1e+308: expected a number in [0, 1e+06]"),
    "segmenter-onset-10^12": (lambda d: d["info"].update(segmenter={"onset_frames": 10**12}),
                              "info.segmenter.onset_frames = 1000000000000: expected an integer in 0..86400000"),
    "format": (lambda d: d.update(format="other"), 'field \'format\' is "other"'),
    "version": (lambda d: d.update(version=9), "unsupported checkpoint version 9"),
    "names-string": (lambda d: d.update(class_names="abc"), "field 'class_names' must be a list"),
    "config-missing": (lambda d: d.pop("config"), "field 'config' must be an object"),
    "config-huge": (lambda d: d["config"].update(input_dim=10**12), "field 'config' announces a model of 119209.3 GiB"),
    "config-overflow": (lambda d: d["config"].update(input_dim=2**62, embed_dim=2**62), "too large to build"),
    "weights-not-tensor": (lambda d: d["state_dict"].update({"head.1.bias": [0.0] * 13}), "must be a tensor"),
    "weights-extra": (lambda d: d["state_dict"].update(extra=d["state_dict"]["head.1.bias"]), "unexpected extra"),
    "weights-missing": (lambda d: d["state_dict"].pop("head.1.bias"), "missing head.1.bias"),
    "format-tensor": (lambda d: d.update(format=d["state_dict"]["head.1.bias"]), "field 'format' is tensor("),
    "version-string": (lambda d: d.update(version="1"), "unsupported checkpoint version \"1\""),
    "info-not-object": (lambda d: d.update(info=[1]), "field 'info' must be an object"),
}


def _stride0_weights(**sizes: int) -> Callable[[dict[str, Any]], object]:
    """A config change whose weights are stride-0 views of one number: a few kB announcing any model size."""
    def change(data: dict[str, Any]) -> None:
        import torch

        from recognition.model import MiniROAD, MiniROADConfig

        data["config"].update(sizes)
        with torch.device("meta"):
            shapes = {name: t.shape for name, t in MiniROAD(MiniROADConfig(**data["config"])).state_dict().items()}
        data["state_dict"] = {name: torch.zeros(1).expand(shape) for name, shape in shapes.items()}

    return change


# A 6 kB file of stride-0 weights made eval allocate 10.8 GB (hidden_dim 30,000) or 4.5 GB (embed_dim 10^6).
CHECKPOINT.update({
    "stride0-hidden-30000": (_stride0_weights(hidden_dim=30_000), "field 'config' announces a model of 10.1 GiB"),
    "stride0-embed-10^6": (_stride0_weights(embed_dim=10**6), "field 'config' announces a model of"),
})


def _zip_bomb() -> bytes:
    """The demo checkpoint with one record replaced by 256 MB of zeros, deflated to a few hundred kB."""
    import io
    import zipfile

    buffer = io.BytesIO()
    with zipfile.ZipFile(DETECTOR) as source, zipfile.ZipFile(buffer, "w") as archive:
        for entry in source.infolist():
            if entry.filename.endswith("/data/0"):
                archive.writestr(entry.filename, bytes(256 * 2**20), compress_type=zipfile.ZIP_DEFLATED)
            else:
                archive.writestr(entry, source.read(entry))
    return buffer.getvalue()


def _zip_of_text() -> bytes:
    """A zip archive that is not a torch checkpoint (a renamed .zip)."""
    import io
    import zipfile

    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr("notes.txt", "hello")
    return buffer.getvalue()


def checkpoint_cases() -> list[Case]:
    cases = [Case(f"checkpoint-{bad}", stream_detect,
                  bound(lambda f, c: ["--video", "demo", "--detector", f.checkpoint(c), "--jsonl"], change), culprit)
             for bad, (change, culprit) in CHECKPOINT.items()]
    for bad, content in (("text", "not a checkpoint"), ("empty", ""), ("truncated", DETECTOR.read_bytes()[:2000]),
                         ("five-bytes", "hello"), ("zip-of-text", _zip_of_text())):
        cases.append(Case(f"checkpoint-{bad}", stream_detect,
                          bound(lambda f, c: ["--video", "demo", "--detector", f.text("d.pt", c), "--jsonl"], content),
                          "d.pt: not a detector checkpoint"))
    cases.append(Case("checkpoint-zip-bomb", stream_detect,
                      lambda f: ["--video", "demo", "--detector", f.text("d.pt", _zip_bomb()), "--jsonl"],
                      "d.pt: not a detector checkpoint: its archive unpacks to 256 MB from"))
    cases.append(Case("checkpoint-missing", stream_detect,
                      lambda f: ["--video", "demo", "--detector", f.missing("d.pt"), "--jsonl"], "d.pt"))
    return cases


def flag(name: str, main: Callable[[list[str]], object], argv: list[str], culprit: str) -> Case:
    return Case(name, main, lambda f: list(argv), culprit)


def flag_cases(tmp: str) -> list[Case]:
    run = ["--video", "demo", "--jsonl"]
    train = ["--features", tmp, "--config", str(TINY), "--out", f"{tmp}/d.pt"]
    replay = ["replay", "--frames", str(ANNOTATIONS), "--graph", str(GRAPH)]
    tgml_train = ["train", "--annotations", str(ANNOTATIONS), "--scenario", "demo-tea", "--out", f"{tmp}/g.json"]
    cases = []
    for value in ("0", "-1", TOO_MANY, "100000", "x", "1.5"):
        cases += [
            flag(f"stream-detect-threads-{value}", stream_detect, [*run, "--threads", value], "--threads"),
            flag(f"stream-detect-detector-threads-{value}", stream_detect, ["detector", *run[:2], "--threads", value],
                 "--threads"),
            flag(f"recognition-train-threads-{value}", recognition_train, [*train, "--threads", value], "--threads"),
        ]
    for value in ("-1", TOO_MANY, "100000", "x"):
        cases += [
            flag(f"prego-bench-workers-{value}", prego_bench, ["--data", tmp, "--workers", value], "--workers"),
            flag(f"prego-select-workers-{value}", prego_bench,
                 ["select", "--dataset", "epic-tent-o", "--workers", value], "--workers"),
            flag(f"tgml-bench-workers-{value}", tgml, ["bench-captaincook", "--data", tmp, "--workers", value],
                 "--workers"),
        ]
    for value in ("0", "1e-6", "0.5", "-1", "nan", "inf", "1e9", "x"):
        cases.append(flag(f"prego-replay-fps-{value}", prego_bench, [*replay, "--fps", value], "--fps"))
    for value in ("0", "0.5", "-1", "nan", "inf", "1e9", "x"):
        cases += [
            flag(f"checker-stream-timeout-{value}", stream_detect, ["checker", "--demo", "--stream-timeout", value],
                 "--stream-timeout"),
            flag(f"run-stream-timeout-{value}", stream_detect, [*run, "--stream-timeout", value], "--stream-timeout"),
        ]
    # An option typed short is never taken for the one it begins: `prego-bench --seed 7` ran `--seeds 7`.
    cases += [
        flag("prego-bench-seed-is-no-seeds", prego_bench, ["--data", tmp, "--seed", "7"], "--seed"),
        flag("tgml-train-epoch-is-no-epochs", tgml, [*tgml_train, "--epoch", "5"], "--epoch"),
        flag("recognition-train-epoch-is-no-epochs", recognition_train, [*train, "--epoch", "5"], "--epoch"),
        flag("stream-detect-thread-is-no-threads", stream_detect, [*run, "--thread", "2"], "--thread"),
    ]
    cases += [
        flag("stream-detect-stream-id-space", stream_detect, [*run, "--stream-id", "a b"], "--stream-id"),
        flag("stream-detect-stream-id-long", stream_detect, [*run, "--stream-id", "x" * 65], "--stream-id"),
        flag("stream-detect-stream-id-escape", stream_detect, [*run, "--stream-id", "\x1b[2J"], "--stream-id"),
        flag("stream-detect-bind", stream_detect, [*run, "--bind", "localhost:1"], "--bind"),
        flag("stream-detect-publish-port", stream_detect, [*run, "--publish", "tcp://127.0.0.1:70000"], "--publish"),
        flag("stream-detect-connect-port-0", stream_detect, ["view", "--demo", "--connect", "tcp://127.0.0.1:0"],
             "--connect"),
        flag("stream-detect-detector-connect", stream_detect, ["detector", *run[:2], "--connect", "udp://x:1"],
             "--connect"),
        flag("stream-detect-reader", stream_detect, [*run, "--reader", "vlc"], "--reader"),
        flag("stream-detect-unknown-option", stream_detect, [*run, "--colour"], "--colour"),
        flag("stream-detect-fast-and-realtime", stream_detect, [*run, "--fast", "--realtime"], "--realtime"),
        flag("stream-detect-video-missing-file", stream_detect, ["--video", f"{tmp}/none.mp4", "--graph", str(GRAPH),
                                                                 "--detector", str(DETECTOR), "--jsonl"], "none.mp4"),
        flag("stream-detect-unknown-demo", stream_detect, ["--video", "demo:nope", "--jsonl"], "demo:nope"),
        flag("stream-detect-no-detector", stream_detect, ["--video", "cam0", "--graph", str(GRAPH)], "--detector"),
        flag("stream-detect-no-graph", stream_detect, ["--video", "cam0"], "--graph"),
        flag("tgml-show-path-with-escapes", tgml, ["show", f"{tmp}/g\x1b[2J\n.json"],
             "g\\x1b[2J\\x0a.json: graph file"),
        flag("tgml-no-command", tgml, [], "tgml"),
        flag("tgml-unknown-command", tgml, ["learn"], "learn"),
        flag("tgml-train-no-out", tgml, tgml_train[:-2], "--out"),
        flag("tgml-train-unknown-scenario", tgml, ["train", "--annotations", str(ANNOTATIONS), "--scenario", "x",
                                                   "--out", f"{tmp}/g.json"], "'x'"),
        flag("tgml-train-epochs-0", tgml, [*tgml_train, "--epochs", "0"], "epochs"),
        flag("tgml-train-epochs-x", tgml, [*tgml_train, "--epochs", "x"], "--epochs"),
        flag("tgml-train-beta-nan", tgml, [*tgml_train, "--beta", "nan"], "beta"),
        flag("tgml-train-lr-negative", tgml, [*tgml_train, "--lr", "-1"], "lr"),
        flag("tgml-train-early-stop", tgml, [*tgml_train, "--early-stop", "sometimes"], "sometimes"),
        flag("tgml-train-edge-threshold", tgml, [*tgml_train, "--edge-threshold", "1/3"], "--edge-threshold"),
        flag("tgml-train-out-is-input", tgml, ["train", "--annotations", str(ANNOTATIONS), "--scenario", "demo-tea",
                                               "--out", str(ANNOTATIONS)], "would overwrite this input file"),
        flag("tgml-show-dot-format", tgml, ["show", str(GRAPH), "--dot", f"{tmp}/g.bmp"], "unknown output format"),
        flag("tgml-bench-seeds-0", tgml, ["bench-captaincook", "--data", tmp, "--seeds", "0"], "--seeds 0"),
        # 9223372036854775807 hung building the members' seeds; 0 was refused as "captaincook benchmark: ensemble".
        *(flag(f"tgml-bench-ensemble-{value}", tgml, ["bench-captaincook", "--data", tmp, "--ensemble", value],
               f"--ensemble: {value}: expected an integer in 1..1000") for value in ("0", "1001", "1.5")),
        flag("prego-bench-seeds-0", prego_bench, ["--data", tmp, "--seeds", "0"], "--seeds 0"),
        # 10**20 was passed on to the learners, whose config refused it naming DOConfig.epochs, not the option.
        flag("prego-bench-epochs-10^20", prego_bench, ["--data", tmp, "--epochs", str(10**20)],
             f"--epochs {10**20}: expected an integer in 1..100000"),
        flag("prego-bench-perturb-2", prego_bench, ["--data", tmp, "--perturb", "0,2"], "rate 2 is outside [0, 1]"),
        flag("prego-bench-order-only-alone", prego_bench, ["--data", tmp, "--order-only"],
             "--order-only is an option of --annotations FILE"),
        flag("prego-bench-perturb-x", prego_bench, ["--data", tmp, "--perturb", "x"], "--perturb"),
        flag("prego-bench-dataset", prego_bench, ["--data", tmp, "--dataset", "kitchen"], "kitchen"),
        flag("prego-bench-mode", prego_bench, ["--data", tmp, "--mode", "live"], "live"),
        flag("prego-bench-config-pair", prego_bench, ["--data", tmp, "--config", "nofile"], "DATASET=FILE"),
        flag("prego-bench-missing-data", prego_bench, ["--data", f"{tmp}/nowhere", "--method", "count-based"],
             "nowhere"),
        flag("prego-select-folds-x", prego_bench, ["select", "--dataset", "epic-tent-o", "--folds", "x"], "--folds"),
        flag("prego-select-scales", prego_bench, ["select", "--data", tmp, "--dataset", "epic-tent-o", "--scales",
                                                  "0,-1"], "--scales"),
        flag("prego-replay-no-frames", prego_bench, ["replay", "--graph", str(GRAPH)], "--frames"),
        flag("stream-detect-backbone-missing", stream_detect, [*run, "--backbone", f"{tmp}/b.pt"], "b.pt"),
        flag("prego-replay-field", prego_bench, [*replay, "--field", "both"], "--field"),
        flag("prego-replay-sweep", prego_bench, [*replay, "--sweep", "a,b"], "--sweep"),
        # The segmenter's flags were refused as SegmenterConfig's fields, a class the command line never shows.
        *(flag(f"prego-replay-{option[2:]}-{value}", prego_bench, [*replay, option, value], f"{option} {shown}:")
          for option, value, shown in (("--min-duration", "-1", "-1.0"), ("--min-run", "nan", "nan"),
                                       ("--max-delay", "1e400", "inf"))),
        flag("recognition-train-no-out", recognition_train, train[:-2], "--out"),
        flag("recognition-train-epochs-x", recognition_train, [*train, "--epochs", "x"], "--epochs"),
        flag("recognition-train-epochs-0", recognition_train, [*train, "--epochs", "0"], "epochs"),
        flag("recognition-train-seed-negative", recognition_train, [*train, "--seed", "-1"], "seed"),
        flag("recognition-train-config-missing", recognition_train, [*train[:2], "--config", f"{tmp}/c.toml",
                                                                     "--out", f"{tmp}/d.pt"], "c.toml"),
        flag("recognition-train-out-folder", recognition_train, [*train[:4], "--out", tmp], "is a folder"),
    ]
    # Numbers too large to use ended in OverflowError / RuntimeError tracebacks.
    frames = {"v": {"pred": [1, 1, 2, 2] * 30, "gt": [1, 1, 2, 2] * 30}}
    # Named as typed, not as SegmenterConfig's fields.
    for option, value, culprit in (("--max-delay", "1e308", "--max-delay 1e+308: expected a number in (0, 86400] "
                                                            "(seconds)"),
                                   ("--background", str(10**22), "--background 10000000000000000000000: expected an "
                                                                 "integer in 0..2147483647")):
        cases.append(Case(f"prego-replay-{option[2:]}-{value}", prego_bench,
                          bound(lambda f, o, v: ["replay", "--frames", f.json("frames.json", frames), "--graph",
                                                 str(GRAPH), "--no-sweep", o, v], option, value), culprit))
    for method in ("noisy-and", "do", "tgt-text"):
        cases.append(flag(f"tgml-train-lr-1e308-{method}", tgml, [*tgml_train, "--method", method, "--lr", "1e308"],
                          "--lr 1e+308: expected a number in (0, 1e+06]"))
    cases += [Case("recognition-train-lr-1e308", recognition_train,
                   lambda f: ["--features", f.folder("feats"), "--config", f.text("c.toml", "[train]\nlr = 1e308\n"),
                              "--out", f.missing("d.pt")], "lr = 1e+308: expected a number in (0, 1e+06]"),
              flag("tgml-bench-synthetic-sizes-100000", tgml, ["bench-synthetic", "--sizes", "100000"],
                   "--sizes 100000: need integers in 2..2048"),
              flag("tgml-bench-synthetic-executions-10^9", tgml, ["bench-synthetic", "--executions", str(10**9)],
                   "--executions 1000000000: need integers in 1..100000")]
    return cases


def frames_cases() -> list[Case]:
    labels = {"label-10^30": 10**30, "label-negative": -5, "label-2^31": 2**31, "label-bool": True, "label-float": 1.0}
    return [Case(f"prego-replay-frames-{bad}", prego_bench,
                 bound(lambda f, v: ["replay", "--frames", f.json("frames.json", {"v": {"pred": [1, v], "gt": [1, 1]}}),
                                     "--graph", str(GRAPH), "--no-sweep"], value), "frames.json: video 'v'")
            for bad, value in labels.items()] + [
        # gt and pred of different lengths were scored against each other as if they labelled the same frames.
        Case("prego-replay-frames-pred-gt-lengths", prego_bench,
             lambda f: ["replay", "--frames", f.json("frames.json", {"v": {"pred": [1] * 240, "gt": [1] * 100}}),
                        "--graph", str(GRAPH), "--no-sweep"],
             "frames.json: video 'v': 'pred' holds 240 frames and 'gt' 100; both label the same frames"),
        # --sweep values went unchecked under --no-sweep.
        Case("prego-replay-sweep-under-no-sweep", prego_bench,
             lambda f: ["replay", "--frames", f.json("frames.json", {"v": {"pred": [1] * 240, "gt": [1] * 240}}),
                        "--graph", str(GRAPH), "--no-sweep", "--sweep", "1,-2"],
             "--sweep '1,-2': -2 is not a --min-duration the segmenter takes"),
    ]


def toml_cases() -> list[Case]:
    bad_toml = {
        "syntax": ("[train\nepochs = 1", "invalid TOML"),
        "threads-too-many": (f"[train]\nthreads = {TOO_MANY}", "threads"),
        "threads-negative": ("[train]\nthreads = -1", "threads"),
        "unknown-key": ("[train]\nepoch = 3", "epoch"),
        "epochs-string": ('[train]\nepochs = "3"', "epochs"),
    }
    cases = []
    for bad, (content, culprit) in bad_toml.items():
        cases.append(Case(f"recognition-train-config-{bad}", recognition_train,
                          bound(lambda f, c: ["--features", f.folder("feats"), "--config", f.text("c.toml", c),
                                              "--out", f.missing("d.pt")], content), culprit))
    cases.append(Case("tgml-train-config-syntax", tgml,
                      lambda f: ["train", "--annotations", str(ANNOTATIONS), "--scenario", "demo-tea", "--out",
                                 f.missing("g.json"), "--config", f.text("c.toml", "[x\n")], "invalid TOML"))
    cases.append(Case("tgml-train-config-unknown-key", tgml,
                      lambda f: ["train", "--annotations", str(ANNOTATIONS), "--scenario", "demo-tea", "--out",
                                 f.missing("g.json"), "--config", f.text("c.toml", "bogus = 1\n")], "bogus"))
    # 50,000 nested lists ended in a RecursionError traceback, in TOML and in YAML.
    for name, key in (("c.toml", "a = "), ("c.yaml", "a: ")):
        deep = key + "[" * 50_000 + "]" * 50_000
        cases.append(Case(f"recognition-train-config-deep-{name}", recognition_train,
                          bound(lambda f, n, d: ["--features", f.folder("feats"), "--config", f.text(n, d),
                                                 "--out", f.missing("d.pt")], name, deep), "nested too deeply"))
        cases.append(Case(f"tgml-train-config-deep-{name}", tgml,
                          bound(lambda f, n, d: ["train", "--annotations", str(ANNOTATIONS), "--scenario",
                                                 "demo-tea", "--out", f.missing("g.json"), "--config",
                                                 f.text(n, d)], name, deep), "nested too deeply"))
    return cases


def npy_with_header(header: str, data: bytes = b"") -> bytes:
    """An ``.npy`` file (format 1.0) with any header text: numpy's own writer would refuse these."""
    text = header.encode("latin1")
    text += b" " * ((64 - (10 + len(text) + 1) % 64) % 64) + b"\n"
    return b"\x93NUMPY\x01\x00" + len(text).to_bytes(2, "little") + text + data


def _features_file(root: Path) -> Path:
    return root / "rgb_synth" / "video_00.npy"


def _folder_in_place(path: Path) -> None:
    path.unlink()
    path.mkdir()


def _as_npz(root: Path) -> None:
    path = _features_file(root)
    array = np.load(path)
    with path.open("wb") as handle:  # np.savez to a handle: the name keeps its .npy ending
        np.savez(handle, features=array)


FEATURE_ARRAYS: dict[str, tuple[Callable[[Path], object], str]] = {
    # recognition-train: AttributeError, MemoryError (87 TiB) and OverflowError before the header was checked.
    "npz-under-npy": (_as_npz, "is an .npz archive (np.savez), not an .npy array"),
    "absurd-shape": (lambda r: _features_file(r).write_bytes(npy_with_header(
        "{'descr': '<f4', 'fortran_order': False, 'shape': (1000000000000, 24), }", b"\0" * 3840)),
        "announce shape (1000000000000, 24) (96000000000000 bytes), more than"),
    "negative-shape": (lambda r: _features_file(r).write_bytes(npy_with_header(
        "{'descr': '<f4', 'fortran_order': False, 'shape': (-5, 24), }", b"\0" * 3840)), "damaged .npy header"),
    "call-in-header": (lambda r: _features_file(r).write_bytes(npy_with_header(  # literal_eval's repr leaked
        "{'descr': '<f4', 'fortran_order': False, 'shape': f(1), }", b"\0" * 3840)),
        "damaged .npy header (malformed node or string on line 1: an expression)"),
    "long-header": (lambda r: _features_file(r).write_bytes(npy_with_header(  # numpy's text said "damaged"
        "{'descr': '<f4', 'fortran_order': False, 'shape': (40, 24), }" + " " * 20_000, b"\0" * 3840)),
        "video_00.npy: an .npy header of 20086 bytes, more than the 10000 read"),
    "cut-short": (lambda r: _features_file(r).write_bytes(_features_file(r).read_bytes()[:-100]), "cut short"),
    "pickled-objects": (lambda r: np.save(_features_file(r), np.array([[{"a": 1}]] * 40, dtype=object)),
                        "have dtype object, expected floats (float16, float32, float64, ...)"),
    "not-npy": (lambda r: _features_file(r).write_text("features"), "not a NumPy .npy file"),
    "a-folder": (lambda r: _folder_in_place(_features_file(r)), "is a folder"),
    # A row marking background and a key-step was split evenly between them: half a frame of each, silently.
    "two-hot-background": (lambda r: _two_hot(r), "target row 3 marks background (class 0) and a key-step class"),
}


def _huge_value(root: Path) -> None:
    path = root / "rgb_synth" / "video_02.npy"  # the test video
    features = np.load(path)
    features[5, 3] = 1e38
    np.save(path, features)


def _two_hot(root: Path) -> None:
    path = root / "target_perframe" / "video_00.npy"
    targets = np.load(path)
    targets[3] = 0
    targets[3, [0, 2]] = 1
    np.save(path, targets)


SPLIT_FILE: dict[str, tuple[Callable[[dict[str, Any]], object], str]] = {
    "video-twice": (lambda d: d["train"].append(d["train"][0]), "names video \"video_00\" twice"),
    "video-in-both": (lambda d: d["test"].append(d["train"][0]), "\"video_00\" is listed in both 'train' and 'test'"),
    "path-as-name": (lambda d: d["test"].append("../../etc/passwd"), "is not a video name"),
    "step-id-negative": (lambda d: d.update(class_step_ids=[None, -1, 11, 12, 13]), "'class_step_ids' must hold"),
    "step-id-twice": (lambda d: d.update(class_step_ids=[None, 11, 11, 12, 13]), "gives step id 11 to two classes"),
    "fps-nan-string": (lambda d: d.update(fps="nan"), 'field \'fps\' = "nan" must be a number > 0 and at most 1000'),
    "names-not-list": (lambda d: d.update(class_names="abc"), "field 'class_names' must be a list of names"),
    # The identities go into the checkpoint, which eval matches the videos it judges against.
    "identity-not-digest": (lambda d: d.update(video_identities={"video_00": "abc"}),
                            "field 'video_identities' must map video names to content identities"),
}


def _edit_split(root: Path, change: Callable[[dict[str, Any]], object]) -> None:
    data = json.loads((root / "split.json").read_text())
    change(data)
    (root / "split.json").write_text(json.dumps(data))


def feature_cases() -> list[Case]:
    cases = []
    for bad, (change, culprit) in FEATURE_ARRAYS.items():
        cases.append(Case(f"recognition-train-features-{bad}", recognition_train,
                          bound(lambda f, c: ["--features", f.features(c), "--config", f.small_config(), "--out",
                                              f.missing("d.pt")], change), culprit))
    # 1e38 is a finite float32, but the detector's arithmetic on it is not: the test mAP pooled its NaN probabilities
    # without a word (a validation video's ended the run with a segmenter error naming no file). Found once trained,
    # so without a validation split (whose one video is warned of) and quiet: the error is the only line.
    cases.append(Case("recognition-train-features-overflowing-values", recognition_train,
                      lambda f: ["--features", f.features(_huge_value), "--config",
                                 f.text("no-val.toml", SMALL_CONFIG + "val_fraction = 0\n"), "--out",
                                 f.missing("d.pt"), "--quiet"],
                      "video_02.npy: the detector's output is not finite from frame 5 on (float32 arithmetic "
                      "overflowed in the detector; the features reach 1e+38 in absolute value: rescale them"))
    for bad, (edit, culprit) in SPLIT_FILE.items():
        cases.append(Case(f"recognition-train-split-{bad}", recognition_train,
                          bound(lambda f, e: ["--features", f.features(lambda r: _edit_split(r, e)), "--config",
                                              f.small_config(), "--out", f.missing("d.pt")], edit), culprit))
    cases.append(Case("stream-detect-eval-split-video-twice", stream_detect,
                      lambda f: ["eval", "--videos", f.folder("videos"), "--annotations", str(ANNOTATIONS), "--graph",
                                 str(GRAPH), "--detector", str(DETECTOR), "--quiet", "--split",
                                 f.json("split.json", {"train": [], "test": ["demo_001", "demo_001"]})],
                      "names video \"demo_001\" twice"))
    return cases


# The segment check every command that reads annotations shares: the same refusal, word for word, everywhere.
SEGMENTS: dict[str, tuple[Callable[[dict[str, Any]], object], str]] = {
    "end-before-start": (lambda d: segment0(d, "end_time", 0.5),
                         "segments[0] ends at 0.5 s, before it starts (1.333 s)"),
    "no-duration": (lambda d: segment0(d, "end_time", 1.333), "segments[0] has no duration (it starts and ends at"),
    "negative-start": (lambda d: segment0(d, "start_time", -1), "segments[0].start_time = -1 must be a number of "
                                                                 "seconds >= 0"),
    "negative-end": (lambda d: video0(d)["segments"][0].update(start_time=-3.0, end_time=-2.0),
                     "segments[0].start_time = -3 must be"),
    "no-segments": (lambda d: video0(d).update(segments=[]), "annotations['demo_000'].segments is empty"),
    "start-without-end": (lambda d: video0(d)["segments"][0].pop("end_time"), "segments[0] has start_time but no "
                                                                               "end_time"),
}
ANNOTATION_COMMANDS: dict[str, tuple[Callable[[list[str]], object], Callable[[Files, str], list[str]]]] = {
    "tgml-train": (tgml, lambda f, p: ["train", "--annotations", p, "--scenario", "demo-tea", "--out",
                                       f.missing("g.json")]),
    "prego-bench": (prego_bench, lambda f, p: ["--annotations", p, "--scenario", "demo-tea", "--test-videos",
                                               "demo_030,demo_031"]),
    "recognition-features": (recognition_features, lambda f, p: ["--videos", f.folder("videos"), "--annotations", p,
                                                                 "--out", f.missing("features"), "--quiet"]),
    "stream-detect-eval": (stream_detect, lambda f, p: ["eval", "--videos", f.folder("videos"), "--annotations", p,
                                                        "--graph", str(GRAPH), "--detector", str(DETECTOR),
                                                        "--quiet"]),
}


# Real annotation files overlap segments and mark steps never done with start = end = -1: read by every command.
PUBLIC_ANNOTATIONS: dict[str, str] = {  # file under the data folder -> the scenario read (1_20 overlaps)
    "epic-tent-o/train.json": "epic-tent",
    "epic-tent-o/test.json": "epic-tent",
    "assembly101-o/train.json": "assembly101",
    "assembly101-o/test.json": "assembly101",
    "captaincook4d/task_graph_generation_annotations.json": "microwaveeggsandwich",
}


def _detector_for(graph: Path, path: Path) -> Path:
    """An untrained detector whose classes are the graph's steps (eval checks the pair before reading annotations)."""
    from recognition.checkpoint import load_detector, save_detector
    from recognition.model import MiniROAD, MiniROADConfig

    steps = load_graph(graph)
    _, demo = load_detector(DETECTOR)
    model = MiniROAD(MiniROADConfig(input_dim=demo.config.input_dim, embed_dim=8, hidden_dim=8,
                                    num_classes=len(steps.step_ids) + 1))
    save_detector(path, model, ["background", *steps.step_names], [None, *steps.step_ids], demo.feature_extractor,
                  demo.fps, scenario=steps.scenario)
    return path


@pytest.mark.parametrize("name", PUBLIC_ANNOTATIONS)
def test_every_public_annotation_file_is_read_by_every_command_that_reads_annotations(
    name: str, data_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path, scenario = str(data_dir / name), PUBLIC_ANNOTATIONS[name]
    records = {v: r for v, r in json.loads(Path(path).read_text())["annotations"].items() if r["scenario"] == scenario}
    mistaken = [v for v, r in records.items() if any(s.get("has_errors") for s in r["segments"])]
    graph = tmp_path / "g.json"
    assert tgml(["train", "--annotations", path, "--scenario", scenario, "--method", "count-based",
                 "--include-mistakes", "--out", str(graph), "--quiet"]) in (0, None)
    assert graph.is_file() and "error:" not in capsys.readouterr().err
    prego_argv = ["--annotations", path, "--scenario", scenario, "--test-videos", (mistaken or list(records))[0],
                  "--method", "count-based"]
    if mistaken:
        assert prego_bench(prego_argv) in (0, None)
        assert "error:" not in capsys.readouterr().err
    else:  # the PREGO protocol scores mistakes: a file without any is refused for that, after its segments were read
        with pytest.raises(SystemExit):
            prego_bench(prego_argv)
        assert capsys.readouterr().err.strip().splitlines()[-1].endswith(
            "so at least one test video needs one")
    # The two commands that decode video stop at the first annotated video missing from an empty --videos: the
    # annotations were read and accepted before that.
    empty = Path(Files(tmp_path).folder("videos"))
    missing = f"error: --videos {empty}: no video file "  # for annotated video X (features); for N of M (eval)
    for main, argv in ((recognition_features, ["--videos", str(empty), "--annotations", path, "--scenario", scenario,
                                               "--out", str(tmp_path / "features"), "--quiet"]),
                       (stream_detect, ["eval", "--videos", str(empty), "--annotations", path, "--graph", str(graph),
                                        "--detector", str(_detector_for(graph, tmp_path / "d.pt")), "--default-rates",
                                        "--quiet"])):
        with pytest.raises(SystemExit) as stop:
            main(argv)
        err = capsys.readouterr().err.strip().splitlines()
        assert stop.value.code == 2 and err[-1].startswith(missing), err
        assert all(line.startswith("warning: ") for line in err[:-1]), err


def segment_cases() -> list[Case]:
    return [Case(f"segments-{bad}/{command}", main,
                 bound(lambda f, c, a: a(f, f.annotations(c)), change, argv), culprit)
            for bad, (change, culprit) in SEGMENTS.items()
            for command, (main, argv) in ANNOTATION_COMMANDS.items()]


def _first_video_as(key: str) -> Callable[[dict[str, Any]], object]:
    def rename(data: dict[str, Any]) -> None:
        videos = list(data["annotations"].items())
        # renamed whole (the key and its recording_id), so the key alone is at fault, not a half-edited copy
        data["annotations"] = {key: videos[0][1] | {"recording_id": key}, **dict(videos[1:])}

    return rename


# A video key names the files written for it: `../../elsewhere/video_00` wrote video_00.npy outside --out, and an
# absolute key ended in a traceback.
VIDEO_KEYS = {"dot-dot": "../../elsewhere/video_00", "absolute": f"{TMP}/elsewhere/video_00", "dot": ".",
              "long": "v" * 300}


def _scenario_as(name: str) -> Callable[[dict[str, Any]], object]:
    def rename(data: dict[str, Any]) -> None:
        data["taxonomy"] = {name: data["taxonomy"]["demo-tea"]}
        for record in data["annotations"].values():
            record["scenario"] = name

    return rename


# prego-bench --save-graphs names each graph file after the scenario: '../x' wrote it beside the folder.
SAVED_SCENARIOS = {"dot-dot": "../x", "absolute": f"{TMP}/elsewhere/x"}


def video_key_cases() -> list[Case]:
    cases = [Case(f"save-graphs-scenario-{bad}", prego_bench,
                  bound(lambda f, n: ["--annotations", f.annotations(_scenario_as(n.replace(TMP, str(f.root)))),
                                      "--scenario", n.replace(TMP, str(f.root)), "--test-videos", "demo_030,demo_031",
                                      "--save-graphs", f.folder("graphs")], name),
                  "--save-graphs: scenario ")
             for bad, name in SAVED_SCENARIOS.items()]
    return cases + [Case(f"video-key-{bad}/{command}", main,
                         bound(lambda f, k, a: a(f, f.annotations(_first_video_as(k.replace(TMP, str(f.root))))),
                               key, argv),
                         "a video key names the video's file and the files written for it, so it must be a file "
                         "name without a folder")
                    for bad, key in VIDEO_KEYS.items()
                    for command, (main, argv) in ANNOTATION_COMMANDS.items()
                    if command in ("recognition-features", "stream-detect-eval")]


# Every option that takes a seed: -1 ended in numpy's traceback, 10^30 in torch's.
SEED_OPTIONS: dict[str, tuple[Callable[[list[str]], object], list[str]]] = {
    "tgml-train": (tgml, ["train", "--annotations", str(ANNOTATIONS), "--scenario", "demo-tea", "--out",
                          f"{TMP}/g.json", "--seed"]),
    "tgml-bench-captaincook": (tgml, ["bench-captaincook", "--data", TMP, "--first-seed"]),
    # The older name of --first-seed, still accepted, is checked alike.
    "tgml-bench-mistakes-seed-base": (tgml, ["bench-mistakes", "--data", TMP, "--seed-base"]),
    "tgml-bench-queries": (tgml, ["bench-queries", "--data", TMP, "--seed"]),
    "tgml-bench-synthetic": (tgml, ["bench-synthetic", "--first-seed"]),
    "prego-bench-first-seed": (prego_bench, ["--data", TMP, "--first-seed"]),
    "prego-bench-perturb-seed": (prego_bench, ["--data", TMP, "--perturb-seed"]),
    "recognition-features": (recognition_features, ["--videos", TMP, "--annotations", str(ANNOTATIONS), "--out",
                                                    f"{TMP}/f", "--seed"]),
    "recognition-train": (recognition_train, ["--features", TMP, "--out", f"{TMP}/d.pt", "--seed"]),
    "prego-bench-replay": (prego_bench, ["replay", "--frames", str(ANNOTATIONS), "--seed"]),
}


def seed_cases() -> list[Case]:
    cases = [flag(f"seed-{command}-{label}", main, [*argv, value], argv[-1])
             for command, (main, argv) in SEED_OPTIONS.items()
             for label, value in (("negative", "-1"), ("10^30", str(10**30)), ("word", "x"))]
    for command, (main, argv) in {"tgml-bench-captaincook": (tgml, ["bench-captaincook", "--data", TMP]),
                                  "tgml-bench-synthetic": (tgml, ["bench-synthetic"]),
                                  "prego-bench": (prego_bench, ["--data", TMP])}.items():
        cases.append(flag(f"seeds-{command}-10^30", main, [*argv, "--seeds", str(10**30)], "--seeds"))
    # A first seed near the limit and more seeds than fit: the learner's config refused the last one, naming
    # DOConfig.seed or BenchConfig.seeds, which the user never typed.
    for command, (main, argv) in {"tgml-bench-captaincook": (tgml, ["bench-captaincook", "--data", TMP,
                                                                     "--first-seed"]),
                                  "tgml-bench-mistakes": (tgml, ["bench-mistakes", "--data", TMP, "--first-seed"]),
                                  "tgml-bench-synthetic": (tgml, ["bench-synthetic", "--first-seed"]),
                                  "prego-bench": (prego_bench, ["--data", TMP, "--first-seed"])}.items():
        cases.append(flag(f"seeds-{command}-past-the-last-seed", main, [*argv, "4294967295", "--seeds", "2"],
                          f"{argv[-1]} 4294967295 --seeds 2: the last seed would be 4294967296"))
    return cases


def all_cases(tmp: str) -> list[Case]:
    files = json_cases() + graph_cases() + annotation_cases() + checkpoint_cases() + frames_cases() + toml_cases()
    return files + feature_cases() + segment_cases() + video_key_cases() + seed_cases() + flag_cases(tmp)


CASES = all_cases(TMP)


def test_the_table_is_large_and_covers_the_five_commands() -> None:
    assert len(CASES) >= 300 and len({c.name for c in CASES}) == len(CASES)
    assert {c.main for c in CASES} == {stream_detect, tgml, prego_bench, recognition_train, recognition_features}


@pytest.fixture(autouse=True)
def _demo_videos_in_a_temporary_cache(demo_cache: Path) -> None:
    """Cases that reach the demo video render it in the test session's cache."""


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_bad_input_is_one_error_line_naming_the_culprit_and_exit_2(
    case: Case, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # A command's default data folder is $MISTAKE_DATA: set, as the README suggests, it gave "prego-bench replay"
    # without --frames the real frames file, and the case found another fault than the one it is about.
    monkeypatch.delenv("MISTAKE_DATA", raising=False)
    argv = [arg.replace(TMP, str(tmp_path)) for arg in case.argv(Files(tmp_path))]
    line = cli_error(case.main, argv, capsys)
    assert case.culprit.replace(TMP, str(tmp_path)) in line, f"{line!r} does not name {case.culprit!r}"


# -- odd videos -------------------------------------------------------------------------------------------------------
def _avi(path: Path, frames: int = 20, scale: int = 1, rate: int = 10, usec_per_frame: int = 100_000) -> Path:
    """An MJPEG AVI written by OpenCV, its frame-rate fields then set to ``rate / scale`` (and ``usec_per_frame``)."""
    import struct

    import cv2

    writer = cv2.VideoWriter(str(path), cv2.VideoWriter.fourcc(*"MJPG"), 10.0, (64, 48))
    for k in range(frames):
        writer.write(np.full((48, 64, 3), 10 * k % 256, np.uint8))
    writer.release()
    data = bytearray(path.read_bytes())
    stream = data.index(b"strh") + 8 + 20  # fccType, fccHandler, flags, priority, language, initial frames
    data[stream:stream + 8] = struct.pack("<II", scale, rate)
    main = data.index(b"avih") + 8
    data[main:main + 4] = struct.pack("<I", usec_per_frame)
    path.write_bytes(bytes(data))
    return path


def _mp4(path: Path, frames: int) -> Path:
    from tests.streaming.helpers import write_noise_video

    return write_noise_video(path, frames=frames)  # 30 fps


ODD_VIDEOS: dict[str, tuple[Callable[[Path], Path], str]] = {
    # stream-detect read 0 frames, exited 0 and reported every step missing.
    "one-frame": (lambda d: _mp4(d / "short.mp4", 1), "1 frame (0.0333 s) is shorter than one frame at 5 frames per "
                                                       "second: nothing to detect"),
    # 1e-9 fps asked numpy for 745 GiB; 1e9 fps read no frame and exited 0.
    "rate-1e-9": (lambda d: _avi(d / "slow.avi", scale=10**9, rate=1), "its frame-rate field says 1e-09 frames per "
                                                                        "second, not a rate a video has"),
    "rate-1e9": (lambda d: _avi(d / "fast.avi", scale=1, rate=10**9, usec_per_frame=1),
                 "its frame-rate field says 1e+09 frames per second"),
    # FFmpeg opened it as a video of one frame, and eval scored it against 20 s of annotations.
    "png-named-mp4": (lambda d: _png(d / "still.mp4"), "is a PNG image, not a video (whatever its name says)"),
}


def _png(path: Path) -> Path:
    import cv2

    ok, data = cv2.imencode(".png", np.full((48, 64, 3), 90, np.uint8))
    path.write_bytes(data.tobytes())
    return path


@pytest.mark.parametrize("reader", ["auto", "opencv"])
@pytest.mark.parametrize("odd", ODD_VIDEOS)
def test_an_odd_video_is_one_error_line_not_an_empty_success(
    odd: str, reader: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    make, culprit = ODD_VIDEOS[odd]
    video = make(tmp_path)
    line = cli_error(stream_detect, ["--video", str(video), "--graph", str(GRAPH), "--detector", str(DETECTOR),
                                     "--jsonl", "--fast", "--reader", reader], capsys)
    assert line.startswith(f"error: --video {video}: ") and culprit in line


def _avi_announcing(path: Path, frames: int) -> Path:
    """A 20-frame AVI whose stream header (``strh.dwLength``) announces ``frames`` frames."""
    import struct

    _avi(path)
    data = bytearray(path.read_bytes())
    stream = data.index(b"strh") + 8 + 32  # fccType .. dwStart come before dwLength
    data[stream:stream + 4] = struct.pack("<I", frames)
    path.write_bytes(bytes(data))
    return path


@pytest.mark.parametrize("command", ["run", "eval", "recognition-features"])
def test_a_header_announcing_2_to_the_32_frames_is_one_error_line_not_an_abort(command: str, tmp_path: Path) -> None:
    # decord aborted the process (std::bad_alloc, SIGABRT, no output) on this 10 kB file: run as a child process.
    import sys

    from tests.streaming.helpers import STREAM_DETECT

    (tmp_path / "videos").mkdir()
    video = _avi_announcing(tmp_path / "videos" / "demo_000.avi", 2**32 - 1)
    data = json.loads(ANNOTATIONS.read_text())
    data["annotations"] = {"demo_000": data["annotations"]["demo_000"]}
    data["annotations"]["demo_000"]["segments"] = [{"step_id": 3, "start_time": 0.0, "end_time": 1.0}]
    (tmp_path / "labels.json").write_text(json.dumps(data))
    labels, folder = str(tmp_path / "labels.json"), str(tmp_path / "videos")
    argv = {"run": [*STREAM_DETECT, "--video", str(video), "--graph", str(GRAPH), "--detector", str(DETECTOR),
                    "--jsonl", "--fast"],
            "eval": [*STREAM_DETECT, "eval", "--videos", folder, "--annotations", labels, "--graph", str(GRAPH),
                     "--detector", str(DETECTOR), "--quiet", "--no-cache"],
            "recognition-features": [sys.executable, "-m", "streaming.offline.features_cli", "--videos", folder,
                                     "--annotations", labels, "--out", str(tmp_path / "features"), "--quiet"]}[command]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=120)
    assert done.returncode == 2, done.stderr[-500:]
    assert done.stderr.splitlines()[-1].startswith("error: ") and "its header announces 4294967295 frames, more " \
        "than a file of" in done.stderr.splitlines()[-1]


def test_recognition_features_refuses_an_odd_video_before_extracting(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = json.loads(ANNOTATIONS.read_text())
    data["annotations"] = {"demo_000": data["annotations"]["demo_000"]}
    data["annotations"]["demo_000"]["segments"] = [{"step_id": 3, "start_time": 0.0, "end_time": 0.01}]
    labels = tmp_path / "labels.json"
    labels.write_text(json.dumps(data))
    (tmp_path / "videos").mkdir()
    _mp4(tmp_path / "videos" / "demo_000.mp4", 1)
    line = cli_error(recognition_features, ["--videos", str(tmp_path / "videos"), "--annotations", str(labels),
                                            "--out", str(tmp_path / "features"), "--quiet"], capsys)
    assert "demo_000.mp4: 1 frame (0.0333 s) is shorter than one frame at 5 frames per second" in line
    assert not (tmp_path / "features").exists()


def test_a_broken_rate_is_taken_from_the_frame_timestamps_when_they_give_one() -> None:
    from streaming.readers import check_source_rate

    assert check_source_rate("v.mp4", 0.0, lambda: 25.0) == 25.0  # the field is broken, the timestamps are not
    assert check_source_rate("v.mp4", 29.97, lambda: 1e9) == 29.97  # a sane field is kept
    with pytest.raises(InputError, match="v.mp4: its frame-rate field says nan"):
        check_source_rate("v.mp4", float("nan"), lambda: 0.0)


def test_an_unreadable_video_is_permission_denied(tmp_path: Path) -> None:
    # A child without the capabilities that override file modes: skipped as root, as CI runs, the test never ran there.
    prefix = unprivileged()
    if prefix is None:
        pytest.skip("running as root without setpriv: a mode-000 file stays readable")
    video = _mp4(tmp_path / "locked.mp4", 30)
    video.chmod(0)
    done = subprocess.run([*prefix, sys.executable, "-m", "streaming.stream_detect_cli", "--video", str(video),
                           "--graph", str(GRAPH), "--detector", str(DETECTOR), "--jsonl", "--fast"],
                          capture_output=True, text=True, timeout=120)
    assert (done.returncode, done.stderr.splitlines()) == (
        2, [f"error: --video {video}: permission denied, cannot read the video file"]), done.stderr


@pytest.mark.skipif(__import__("torch").cuda.is_available(), reason="this machine has CUDA")
def test_recognition_features_refuses_cuda_without_a_gpu_like_stream_detect(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # It was accepted with the light-v1 extractor, which never asked torch for the device.
    argv = ["--videos", str(tmp_path), "--annotations", str(ANNOTATIONS), "--out", str(tmp_path / "f"),
            "--extractor", "light-v1", "--device", "cuda"]
    line = cli_error(recognition_features, argv, capsys)
    assert line.startswith("error: --device cuda: torch") and line.endswith("sees no CUDA device; use --device cpu "
                                                                            "(or auto)")


def test_a_video_damaged_part_way_gets_its_error_and_no_verdict_on_the_steps_after_the_damage(tmp_path: Path) -> None:
    # The stream's last heartbeats said "ended": the checker then reported every step after the damage as never done
    # and the view printed "cam0 ended: no mistake; never done: ...", a verdict on frames nobody saw.
    from tests.streaming.helpers import STREAM_DETECT, write_damaged_video

    video = write_damaged_video(tmp_path / "cam.mp4")
    argv = [*STREAM_DETECT, "--video", str(video), "--graph", str(GRAPH), "--detector", str(DETECTOR), "--fast"]
    run = subprocess.run([*argv, "--jsonl"], capture_output=True, text=True, timeout=120)
    assert run.returncode == 2
    assert run.stderr.splitlines() == [f"error: --video {video}: cannot decode source frame 141 of 240, the file is "
                                       "damaged or truncated"]
    messages = [json.loads(line) for line in run.stdout.splitlines()]
    assert messages and not [m for m in messages if m["kind"] == "missing" or m.get("ended")]
    shown = subprocess.run(argv, capture_output=True, text=True, timeout=120)
    assert shown.returncode == 2 and "cam0 ended" not in shown.stdout


def test_a_truncated_video_is_refused_by_the_default_reader_as_by_opencvs(tmp_path: Path) -> None:
    # decord (the default) counts the frames it finds: a file cut in half "ended", exit 0, with the steps of its missing
    # half called never done; --reader opencv said the file was truncated.
    from tests.streaming.helpers import STREAM_DETECT, write_truncated_video

    video = write_truncated_video(tmp_path / "cam.avi", frames=240)
    argv = [*STREAM_DETECT, "--video", str(video), "--graph", str(GRAPH), "--detector", str(DETECTOR), "--fast",
            "--jsonl"]
    lines = []
    for reader in ("auto", "opencv"):
        run = subprocess.run([*argv, "--reader", reader], capture_output=True, text=True, timeout=120)
        assert run.returncode == 2, run.stderr
        messages = [json.loads(line) for line in run.stdout.splitlines()]
        assert not [m for m in messages if m["kind"] == "missing" or m.get("ended")]
        lines.append(run.stderr.splitlines())
    assert lines[0] == lines[1] and len(lines[0]) == 1
    assert re.fullmatch(rf"error: --video {re.escape(str(video))}: cannot decode source frame \d+ of 240, the file "
                        "is damaged or truncated", lines[0][0]), lines[0]


def test_a_plain_pickle_given_as_a_checkpoint_is_one_error_line_without_torchs_warning(tmp_path: Path) -> None:
    # torch.load warned of the pickle's protocol on stderr, before the error line; the pickled call never ran.
    import pickle

    from tests.streaming.helpers import STREAM_DETECT

    (tmp_path / "d.pt").write_bytes(pickle.dumps({"format": "x"}, protocol=4))
    run = subprocess.run([*STREAM_DETECT, "--video", "demo", "--jsonl", "--detector", str(tmp_path / "d.pt")],
                         capture_output=True, text=True, timeout=120)
    assert run.returncode == 2
    assert run.stderr.splitlines() == [f"error: {tmp_path / 'd.pt'}: not a detector checkpoint: expected a .pt file "
                                       "written by recognition-train (this one cannot be read as one: another kind of "
                                       "file, or a damaged copy)"]


def test_the_decoders_stay_quiet_unless_verbose(tmp_path: Path) -> None:
    # A damaged mp4 printed 5086 FFmpeg lines before stream-detect eval's error line.
    from tests.streaming.helpers import STREAM_DETECT, write_damaged_video

    data = json.loads(ANNOTATIONS.read_text())
    data["annotations"] = {"demo_000": data["annotations"]["demo_000"]}
    data["annotations"]["demo_000"]["segments"] = data["annotations"]["demo_000"]["segments"][:1]
    (tmp_path / "labels.json").write_text(json.dumps(data))
    (tmp_path / "videos").mkdir()
    video = write_damaged_video(tmp_path / "videos" / "demo_000.mp4")
    argv = [*STREAM_DETECT, "eval", "--videos", str(tmp_path / "videos"), "--annotations",
            str(tmp_path / "labels.json"), "--graph", str(GRAPH), "--detector", str(DETECTOR), "--quiet", "--no-cache"]
    quiet = subprocess.run(argv, capture_output=True, text=True, timeout=120)
    assert quiet.returncode == 2
    assert quiet.stderr.splitlines() == [
        f"error: --videos {video.parent}: {video.name} (annotated video 'demo_000'): cannot decode source frame 141 of "
        "240, the file is damaged or truncated; the results of the videos before it are cached"]
    verbose = subprocess.run([*argv, "--verbose"], capture_output=True, text=True, timeout=120)
    # FFmpeg's own account of the damage comes before the error line.
    assert verbose.returncode == 2 and len(verbose.stderr.splitlines()) > 1
    assert verbose.stderr.splitlines()[-1] == quiet.stderr.strip()


@pytest.mark.parametrize("argv", [
    ["streaming.offline.features_cli", "import", "--features", "{locked}", "--annotations", str(ANNOTATIONS),
     "--rate", "1", "--out", "{tmp}/out"],
    ["recognition.recognition_train_cli", "--features", "{locked}", "--out", "{tmp}/d.pt"],
    ["tgml.bench.prego_bench_cli", "--data", "{locked}"],
    ["tgml.tgml_cli", "captaincook-labels", "--data", "{locked}", "--out", "{tmp}/labels.json"],
], ids=["import", "train", "prego-bench", "captaincook-labels"])
def test_an_unreadable_folder_is_one_error_line_not_a_traceback(argv: list[str], tmp_path: Path) -> None:
    # Path.exists() and iterdir() raise PermissionError on Python 3.11: each of these ended in a traceback, exit 1.
    prefix = unprivileged()
    if prefix is None:
        pytest.skip("running as root without setpriv: a mode-000 folder stays readable")
    locked = tmp_path / "locked"
    (locked / "inside").mkdir(parents=True)
    locked.chmod(0)
    try:
        args = [a.format(locked=locked, tmp=tmp_path) for a in argv]
        done = subprocess.run([*prefix, sys.executable, "-m", *args], capture_output=True, text=True, timeout=120)
    finally:
        locked.chmod(0o755)
    lines = done.stderr.strip().splitlines()
    assert (done.returncode, len(lines)) == (2, 1), done.stderr
    assert lines[0].startswith(f"error: {locked}") and "permission denied" in lines[0], lines
