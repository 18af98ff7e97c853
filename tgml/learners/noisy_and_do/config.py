"""Settings of the combined noisy-AND / DO-ensemble learner (`NoisyAndDOConfig`), validated on construction.

A ``[noisy-and-do]`` settings table holds the combination rule and one sub-table per learner
(``[noisy-and-do.noisy-and]``, ``[noisy-and-do.do-ensemble]``), each checked by that learner's config. Torch-free.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar, Final

from graphs.common.errors import InputError
from graphs.common.safe_text import unknown_name
from graphs.common.settings_files import SEED, Bound, check_settings, field_names
from tgml.learners.do.config import DOEnsembleConfig
from tgml.learners.noisy_and.config import NoisyAndConfig
from tgml.learners.noisy_and_do.combination import METHOD_NAME, CombinationConfig

# The two learners' sub-tables, by table name, and the config each one feeds.
SUB_TABLES: Final[dict[str, type]] = {"noisy-and": NoisyAndConfig, "do-ensemble": DOEnsembleConfig}


@dataclass(frozen=True)
class NoisyAndDOConfig:
    """Settings of one combined run: the rule that joins the two graphs and each learner's own settings.

    Attributes:
        combination: rule, threshold and relaxed rule (`tgml.learners.noisy_and_do.combination`).
        noisy_and: the noisy-AND learner's settings (its seed is the run's).
        do_ensemble: the DO ensemble's settings (its seed is the run's).
        seed: the run's seed, given to both learners.
    """

    combination: CombinationConfig = field(default_factory=CombinationConfig)
    noisy_and: NoisyAndConfig = field(default_factory=NoisyAndConfig)
    do_ensemble: DOEnsembleConfig = field(default_factory=DOEnsembleConfig)
    seed: int = 42

    TABLE_KEYS: ClassVar[frozenset[str]] = frozenset({*field_names(CombinationConfig), *SUB_TABLES})

    # The sub-tables are the learners' configs, checked by their own tables.
    BOUNDS: ClassVar[Mapping[str, Bound]] = {"seed": SEED}

    def __post_init__(self) -> None:
        check_settings(self)
        if self.noisy_and.seed != self.seed or self.do_ensemble.seed != self.seed:
            object.__setattr__(self, "noisy_and", dataclasses.replace(self.noisy_and, seed=self.seed))
            object.__setattr__(self, "do_ensemble", dataclasses.replace(self.do_ensemble, seed=self.seed))

    @classmethod
    def from_table(cls, table: Mapping[str, Any], epochs: int | None = None) -> NoisyAndDOConfig:
        """The config of a ``[noisy-and-do]`` table; both learners' sub-tables are required.

        Args:
            table: ``rule``, ``threshold``, ``relaxed``, ``seed`` and the sub-tables ``noisy-and``, ``do-ensemble``.
            epochs: override of both learners' epochs (quick checks), or None.
        """
        seed = table.get("seed", 42)
        combination = CombinationConfig(**{k: v for k, v in table.items() if k in field_names(CombinationConfig)})
        learners: dict[str, Any] = {}
        for name, config_class in SUB_TABLES.items():
            where = f"sub-table [{METHOD_NAME}.{name}]"
            sub = table.get(name)
            if not isinstance(sub, dict):
                raise InputError(f"{METHOD_NAME} needs the {where} of that learner's settings")
            known = field_names(config_class) - {"seed"}
            unknown = sorted(set(sub) - known)
            if unknown:
                raise InputError(unknown_name(f"{where}: setting", unknown[0], sorted(known), None))
            try:
                values = {**sub, "seed": seed, **({"epochs": epochs} if epochs is not None else {})}
                learners[name] = config_class(**values)
            except InputError as err:
                raise InputError(f"{where}: {err}") from None
        return cls(combination, learners["noisy-and"], learners["do-ensemble"], seed)
