"""Noisy-AND TGML: every pre-condition of a step is kept (our learner, the default of ``tgml train``)."""
