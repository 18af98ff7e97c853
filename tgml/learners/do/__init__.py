"""Direct Optimization (TGML, Seminara et al. 2024): the paper's learner, its seed ensemble and their settings."""
