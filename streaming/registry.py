"""The tables from a name to a part of the detector pipeline: feature extractors, checkers and sinks.

Same shape as the learners' table (`tgml.learners.registry`): each entry names its part by import path
(``"module:attribute"``), imported only when the part is built, so that reading a table (a parser's choices, an error
line listing the known names) loads neither torch nor OpenCV.

- `EXTRACTORS`: a checkpoint's ``feature_extractor`` -> a factory ``(name, backbone, device) -> FeatureExtractor``
  (`streaming.extractors.make_extractor` reads it). A new backbone is one class in `streaming.extractors` (or a
  module of its own) and one entry here.
- `CHECKERS`: ``--checker`` -> what builds the pre-condition checker of one stream. The table lives on the ground
  floor (`graphs.checker_settings.CHECKERS`, which `graphs.checker_settings.CheckerSettings` builds through, and
  which `graphs/` may hold where `streaming/` may not); this is that same table, not a copy.
- `SINKS`: where messages can go (`streaming.detector.sinks.Sink`): each entry names the class; a new sink is one
  class with ``send(message)`` and one entry here. A sink of the detector's messages (key-steps, heartbeats) is
  handed to `streaming.detector.wiring.build_pipeline`; a sink of the checker's (alerts, statuses: the view, the
  webhook) to the checker (`streaming.checker.service.CheckerService`) or to a viewer of its socket
  (`streaming.view.client.Viewer`).
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final, Protocol, TypeVar

from graphs.checker_settings import CHECKERS as GRAPH_CHECKERS
from graphs.common.errors import InputError
from graphs.common.safe_text import unknown_name


@dataclass(frozen=True)
class Entry:
    """One part of a table.

    Attributes:
        name: what commands and files call it.
        target: ``"module:attribute"`` of the part (a factory or a class).
        summary: one line for help texts and error lines.
        needs: the optional extra it needs beyond the core install, or "".
    """

    name: str
    target: str
    summary: str
    needs: str = ""

    def load(self) -> Any:
        """The part itself (its module imported now)."""
        module, _, attribute = self.target.partition(":")
        return getattr(importlib.import_module(module), attribute)


def table(*entries: Entry) -> Mapping[str, Entry]:
    """Entries by name (names must be distinct)."""
    out = {e.name: e for e in entries}
    if len(out) != len(entries):
        raise ValueError("registry: two entries share a name")
    return out


class Named(Protocol):
    """What `lookup` asks of an entry of any table (`Entry`, `graphs.checker_settings.CheckerEntry`)."""

    @property
    def name(self) -> str: ...


E = TypeVar("E", bound=Named)


def lookup(entries: Mapping[str, E], name: str, what: str) -> E:
    """The entry called ``name``, or one `InputError` line listing the known ones (``what``: the option or field)."""
    entry = entries.get(name)
    if entry is None:
        raise InputError(unknown_name(what, name, entries, None))
    return entry


_PRETRAINED: Final = "streaming.extractors:pretrained_extractor"
EXTRACTORS: Final = table(
    Entry("efficientnet-lite0", _PRETRAINED, "EfficientNet-Lite0 on ImageNet, 1280 values per frame (CPU or CUDA)"),
    Entry("efficientnet-lite0-grid", _PRETRAINED, "Lite0, global and 2x2-grid averages: 6400 values per frame"),
    Entry("efficientnet-lite2", _PRETRAINED, "EfficientNet-Lite2 at 260x260, 1280 values per frame", needs="lite2"),
    Entry("efficientnet-lite2-grid", _PRETRAINED, "Lite2 with the 2x2 grid: 6400 values per frame", needs="lite2"),
    Entry("light-v1", "streaming.extractors:light_extractor", "built in, numpy only: colour, texture and layout on a "
          "4x4 grid, 80 values per frame"),
    Entry("torchscript", "streaming.extractors:torchscript_extractor", "your TorchScript backbone (--backbone "
          "model.pt): (B, 3, H, W) normalised RGB -> (B, D)"),
)
CHECKERS: Final = GRAPH_CHECKERS
SINKS: Final = table(
    Entry("checker", "streaming.transport:Publisher", "the checker's ZeroMQ socket (--connect)"),
    Entry("checker-link", "streaming.local_checker:CheckerLink", "a checker in the same process (eval, "
          "--annotate-out)"),
    Entry("jsonl", "streaming.detector.sinks:JsonLinesSink", "one JSON line per message"),
    Entry("webhook", "streaming.detector.webhook:WebhookSink", "each alert POSTed as JSON (--webhook URL)"),
    Entry("view", "streaming.view.client:View", "the checker's output shown: the terminal view, or --jsonl lines"),
    Entry("alert-frames", "streaming.detector.alert_frames:StreamFrames", "the frame of each key-step as a JPEG "
          "(--alert-frames DIR)"),
)
