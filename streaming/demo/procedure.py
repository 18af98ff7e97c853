"""The built-in demo procedure ("make tea"): key-steps, their true partial order, sampled executions.

Ground-truth pre-conditions (step -> what it needs)::

    fill_kettle  -> START         get_cup     -> START
    boil_water   -> fill_kettle   add_teabag  -> get_cup
    pour_water   -> boil_water, add_teabag
    add_milk     -> pour_water

`DEMO_EXECUTIONS` are the three videos ``--video demo`` can play: ``mistake`` switches the kettle on
before filling it (the checker must alert on ``boil_water``), ``correct`` is a valid order (no alert),
``missing`` is the correct order without its last step (no alert; when it ends, the checker reports ``add_milk``
never done). The mistake breaks a single-pre-condition edge, which TGML recovers reliably from few executions.
"""

from __future__ import annotations

from typing import Any, Final

import numpy as np

SCENARIO: Final = "demo-tea"
STEP_IDS: Final = (1, 2, 3, 4, 5, 6)
STEP_NAMES: Final = ("fill_kettle", "boil_water", "get_cup", "add_teabag", "pour_water", "add_milk")
PRECONDITIONS: Final[dict[int, tuple[int, ...]]] = {1: (), 2: (1,), 3: (), 4: (3,), 5: (2, 4), 6: (5,)}

DEMO_EXECUTIONS: Final[dict[str, tuple[int, ...]]] = {
    "mistake": (3, 2, 1, 4, 5, 6),  # boil_water (2) before fill_kettle (1)
    "correct": (3, 1, 2, 4, 5, 6),
    "missing": (3, 1, 2, 4, 5),  # add_milk (6) never done
}
DEMO_SEEDS: Final[dict[str, int]] = {"mistake": 1001, "correct": 1002, "missing": 1003}


def name_of(step: int) -> str:
    """Readable name of a demo step."""
    return STEP_NAMES[STEP_IDS.index(step)]


def sample_correct_order(rng: np.random.Generator) -> tuple[int, ...]:
    """A uniformly random step at a time among those whose pre-conditions are done (a linear extension).

    Args:
        rng: random generator.

    Returns:
        A valid complete execution order.
    """
    done: list[int] = []
    while len(done) < len(STEP_IDS):
        ready = [s for s in STEP_IDS if s not in done and all(r in done for r in PRECONDITIONS[s])]
        done.append(int(rng.choice(ready)))
    return tuple(done)


def annotation_file(executions: dict[str, list[tuple[int, float, float]]]) -> dict[str, Any]:
    """The annotation JSON of demo executions, in the format of the datasets' annotation files.

    Args:
        executions: video name -> ``[(step, start_s, end_s), ...]``.

    Returns:
        ``{"annotations": ..., "taxonomy": ...}`` ready for ``tgml train``.
    """
    annotations = {
        video: {
            "scenario": SCENARIO,
            "recording_id": video,
            "segments": [
                {
                    "step_id": step,
                    "start_time": round(start, 3),
                    "end_time": round(end, 3),
                    "description": name_of(step).replace("_", " "),
                    "has_errors": False,
                    "step_name": name_of(step),
                }
                for step, start, end in segments
            ],
        }
        for video, segments in executions.items()
    }
    taxonomy = {SCENARIO: {str(s): {"name": name_of(s), "id": s} for s in STEP_IDS}}
    return {"annotations": annotations, "taxonomy": taxonomy}
