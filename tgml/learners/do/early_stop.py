"""When DO training stops: a rule over each epoch's Sequence Accuracy (`tgml.sequence_accuracy`, docs/method.md)."""

from __future__ import annotations

from tgml.learners.do.config import parse_early_stop


class EarlyStopping:
    """Decides after each epoch whether training should stop, from that epoch's SA (docs/method.md).

    ``sa-plateau``: stop when SA > ``plateau_min`` and the best SA has not improved for ``patience`` epochs.
    ``sa-threshold:X``: stop as soon as SA > X.

    Args:
        rule: the early-stopping rule (see `parse_early_stop`).
        plateau_min: SA level the plateau rule requires.
        patience: epochs without improvement the plateau rule waits for.
    """

    def __init__(self, rule: str, plateau_min: float = 0.95, patience: int = 25) -> None:
        self.kind, self.threshold = parse_early_stop(rule)
        self.plateau_min = plateau_min
        self.patience = patience
        self.best = -1.0
        self._stale = 0

    @property
    def active(self) -> bool:
        """True if a rule is set (SA must then be computed every epoch)."""
        return self.kind != "none"

    def update(self, epoch: int, sa: float) -> bool:
        """Record the SA of ``epoch`` (1-based); True if training should stop now."""
        if sa > self.best:
            self.best, self._stale = sa, 0
        else:
            self._stale += 1
        if self.kind == "sa-threshold":
            return sa > self.threshold
        if self.kind == "sa-plateau":
            return sa > self.plateau_min and self._stale >= self.patience
        return False
