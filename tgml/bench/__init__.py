"""The benchmark harness: PREGO (`prego-bench`) and CaptainCook4D (`tgml bench-captaincook`).

It sits above the learner: it imports `tgml` and `recognition`, and no learner module imports it.
"""
