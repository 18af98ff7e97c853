"""The tables from a name to a part of the pipeline: every entry loads, and the names agree with what uses them."""

from __future__ import annotations

import pytest

from graphs.checker_settings import CHECKERS as GRAPH_CHECKERS
from graphs.common.errors import InputError
from streaming.extractors import BACKBONES, EXTRACTOR_NAMES, LIGHT_NAME, make_extractor
from streaming.registry import CHECKERS, EXTRACTORS, SINKS, lookup


def test_every_entry_names_a_part_that_exists() -> None:
    for entries in (EXTRACTORS, CHECKERS, SINKS):
        for entry in entries.values():
            assert callable(entry.load()), entry


def test_the_tables_hold_the_names_the_commands_accept() -> None:
    assert set(EXTRACTOR_NAMES) == {*BACKBONES, LIGHT_NAME}
    assert set(EXTRACTORS) == {*EXTRACTOR_NAMES, "torchscript"}
    assert CHECKERS is GRAPH_CHECKERS  # one table on the ground floor, not a copy that could drift


def test_every_sink_takes_a_message() -> None:
    assert all(callable(getattr(entry.load(), "send", None)) for entry in SINKS.values())


def test_an_unknown_name_is_one_line_listing_the_known_ones() -> None:
    with pytest.raises(InputError, match=r"^--checker 'psychic': not one of the 2 known \(probabilistic, binary\)$"):
        lookup(CHECKERS, "psychic", "--checker")
    with pytest.raises(InputError, match="known: efficientnet-lite0, .*light-v1, torchscript"):
        make_extractor("resnet-9000")
    assert make_extractor(LIGHT_NAME).name == LIGHT_NAME


def test_a_checker_that_weighs_evidence_refuses_a_detector_whose_rates_were_never_measured() -> None:
    from recognition.checkpoint import DetectorCheckpoint
    from recognition.model import MiniROADConfig
    from streaming.detector.loading import check_measured_rates

    unmeasured = DetectorCheckpoint(MiniROADConfig(num_classes=2), ("background", "fill"), (None, 1), "light-v1", 5.0)
    weighing = [name for name, entry in CHECKERS.items() if entry.weighs_evidence]
    assert weighing == ["probabilistic"]
    with pytest.raises(InputError) as refused:
        check_measured_rates(unmeasured, "det.pt", "probabilistic", default_rates=False)
    line = str(refused.value)
    assert line.startswith("det.pt: holds no measured miss and false-detection rates, which the probabilistic checker")
    assert "or run with --checker binary, or with --default-rates" in line
    check_measured_rates(unmeasured, "det.pt", "probabilistic", default_rates=True)
    check_measured_rates(unmeasured, "det.pt", "binary", default_rates=False)
