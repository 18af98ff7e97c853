"""The learners: one folder each (``do/``, ``noisy_and/``, ``tgt_text/``, ``noisy_and_do/``; the gradient-free
baselines live in `graphs` and are adapted in `graph_baselines`), what they share (`result`), and the one table from a
name to a learner (`registry`)."""
