"""The one name -> learner table: every command takes its learners from it, and every entry learns a graph."""

from __future__ import annotations

import dataclasses
import math

import pytest

from graphs import InputError, PreconditionChecker
from tgml.bench.captaincook_methods import METHODS as CAPTAINCOOK_METHODS
from tgml.bench.mistake_bench import METHODS as MISTAKE_METHODS
from tgml.bench.prego_bench_cli import bench_parser as prego_parser
from tgml.learners.do.config import DOConfig
from tgml.learners.registry import DEFAULT_LEARNER, LEARNERS, learner
from tgml.tgml_cli import _parser as tgml_parser

# Five executions of a four-step procedure: 1 before 2 before 4; 3 anywhere after 1.
EXECUTIONS = [(1, 2, 3, 4), (1, 3, 2, 4), (1, 2, 3, 4), (1, 3, 2, 4), (1, 2, 4, 3)]
IDS, NAMES = (1, 2, 3, 4), ("take cup", "fill cup", "add sugar", "drink")


def _choices(parser: object, command: str | None) -> list[str]:
    """The choices of ``--method`` in a parser (or in its sub-command ``command``)."""
    if command is not None:
        parser = next(a for a in parser._actions if a.dest == "command").choices[command]  # type: ignore[attr-defined]
    action = next(a for a in parser._actions if a.dest == "method")  # type: ignore[attr-defined]
    return list(action.choices or action.default)


def test_every_command_offers_every_learner_of_the_table() -> None:
    assert _choices(tgml_parser(), "train") == list(LEARNERS)
    assert set(LEARNERS) <= set(_choices(prego_parser(), None))
    assert set(LEARNERS) <= set(CAPTAINCOOK_METHODS) and set(LEARNERS) <= set(MISTAKE_METHODS)
    assert DEFAULT_LEARNER == "noisy-and"


# tgt-text is tested in test_tgt_text.py (it loads a sentence encoder).
@pytest.mark.parametrize("name", [n for n in LEARNERS if n != "tgt-text"])
def test_every_learner_learns_a_graph_the_checker_reads(name: str) -> None:
    entry = learner(name)
    config = entry.config(None)
    if "epochs" in {f.name for f in dataclasses.fields(config)}:
        config = dataclasses.replace(config, epochs=30)
    result = entry.learn(EXECUTIONS, IDS, NAMES, entry.with_seed(config, 7), "tea")
    assert result.graph.step_ids == IDS and result.graph.scenario == "tea"
    assert not PreconditionChecker.replay(result.graph, EXECUTIONS[0]).history[0].is_mistake
    assert math.isnan(result.sequence_accuracy) or 0 <= result.sequence_accuracy <= 1


def test_a_settings_table_keeps_the_config_class_defaults_for_what_it_leaves_out() -> None:
    do = learner("do")
    assert do.config({"epochs": 12}, seed=3) == DOConfig(epochs=12, seed=3)  # augment and relaxed: DOConfig's
    assert "seed" not in do.setting_keys and "objective" not in learner("msgi").setting_keys
    assert learner("msgi").config(None).objective == "accuracy" and learner("msg2").config({}).objective == "precision"
    with pytest.raises(InputError, match="do: setting 'cut': not one of the"):
        do.config({"cut": 0.5})
    with pytest.raises(InputError, match="learner 'dao': not one of the .* known \\(noisy-and, do, "):
        learner("dao")
