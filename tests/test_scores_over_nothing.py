"""One convention for a score over nothing, whichever command reports it: not measured (None, shown "-").

The PREGO tables used to print 0 for the precision of a class never predicted, segment F1 was 1 for a video with
nothing to find, and stream-detect eval showed "-": the same emptiness read three ways.
"""

from __future__ import annotations

import numpy as np
import pytest

from graphs.edge_metrics import edge_scores
from graphs.mistake_metrics import mistake_scores
from graphs.precision_recall import NOT_MEASURED, mean_and_std, precision_recall_f1, shown
from recognition.segment_metrics import MatchCounts
from streaming.offline.eval_scores import MistakeCounts


@pytest.mark.parametrize(("counts", "expected"), [
    ((2, 4, 3), (0.5, 2 / 3, 4 / 7)),
    ((0, 0, 3), (None, 0.0, 0.0)),  # things to find, nothing predicted: every one missed
    ((0, 2, 0), (0.0, None, None)),  # nothing to find: false alarms have a precision, recall and F1 measure nothing
    ((0, 0, 0), (None, None, None)),
    ((0, 2, 3), (0.0, 0.0, 0.0)),
])
def test_a_score_over_nothing_is_not_measured(counts: tuple[int, int, int], expected: tuple) -> None:
    assert precision_recall_f1(*counts) == pytest.approx(expected)


def test_every_score_of_the_project_follows_it() -> None:
    nothing = np.zeros((4, 4), dtype=bool)
    edges = edge_scores(nothing, nothing)
    assert (edges.precision, edges.recall, edges.f1) == (None, None, None)
    assert MatchCounts().f1 is None and MatchCounts(fp=2).f1 is None and MatchCounts(fn=1).f1 == 0.0
    assert (MistakeCounts().precision, MistakeCounts().recall, MistakeCounts().f1) == (None, None, None)
    assert MistakeCounts(mistakes=2).f1 == 0.0
    never_alerted = mistake_scores([[False, False, False]])  # the last step is the mistake, never flagged
    assert never_alerted.mistake.precision is None and never_alerted.mistake.recall == 0.0
    assert never_alerted.mistake.f1 == 0.0 and never_alerted.avg_f1 == pytest.approx(40.0)
    correct_only = mistake_scores([[False, True]], has_mistake=[False])  # no mistake to find
    assert correct_only.mistake.recall is None and correct_only.mistake.f1 is None and correct_only.avg_f1 is None


def test_tables_show_it_and_averages_keep_it() -> None:
    assert shown(None) == NOT_MEASURED and shown(12.345) == "12.3"
    assert mean_and_std([[1.0, None], [2.0, 3.0]]) == ([1.5, None], [0.5, None])
