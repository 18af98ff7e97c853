"""The checker beside a detector (`CheckerLink`): what `stream-detect eval` scores and `--annotate-out` draws."""

from __future__ import annotations

from streaming.checker.core import CheckerCore
from streaming.local_checker import CheckerLink
from streaming.messages import StepEvent
from tests.streaming.helpers import keystep, tea_graph


def test_eval_keeps_every_answer_and_each_is_handed_over_once() -> None:
    link = CheckerLink(CheckerCore(tea_graph()))
    link.now = 1.5
    link.send(keystep((1,), seq=0))
    first = link.take()
    assert first and all(t == 1.5 for t, _ in first) and any(isinstance(m, StepEvent) for _, m in first)
    link.send(keystep((1, 3), seq=1))
    second = link.take()
    assert second and link.take() == []
    assert link.received == first + second  # kept for the scores at the end of the run


def test_a_live_camera_keeps_no_backlog_of_answers() -> None:
    link = CheckerLink(CheckerCore(tea_graph()), keep=False)
    for k, history in enumerate([(1,), (1, 3), (1, 3, 5)]):
        link.send(keystep(history, seq=k))
        assert any(isinstance(m, StepEvent) for _, m in link.take())
        assert link.received == [] and link.onset_starts == {}
