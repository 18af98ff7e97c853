"""The baselines that learn without gradients (`graphs.count_based`, `graphs.eligibility_search`) as `Learner`
functions of the registry. They live on the ground floor (numpy only); these adapters give them the learners' result.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from graphs.count_based import CountBasedConfig, count_based_graph
from graphs.eligibility_search import EligibilitySearchConfig, eligibility_search_graph
from tgml.learners.result import LearnResult


def learn_count_based(
    sequences: Sequence[Sequence[int]], step_ids: Sequence[int], step_names: Sequence[str], config: CountBasedConfig,
    scenario: str = "", progress: bool = False,
) -> LearnResult:
    """The Count-Based graph (no epochs, no loss: 0 and NaN; Sequence Accuracy not computed)."""
    graph = count_based_graph(sequences, step_ids, step_names, config, scenario)
    return LearnResult(graph, 0, math.nan, math.nan)


def learn_eligibility(
    sequences: Sequence[Sequence[int]], step_ids: Sequence[int], step_names: Sequence[str],
    config: EligibilitySearchConfig, scenario: str = "", progress: bool = False,
) -> LearnResult:
    """The MSGI / MSG² graph of the greedy eligibility search (``config.objective`` says which)."""
    graph = eligibility_search_graph(sequences, step_ids, step_names, config, scenario)
    return LearnResult(graph, 0, math.nan, math.nan)
