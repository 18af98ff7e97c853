"""Noisy-AND and DO-ensemble evidence combined edge by edge (ours)."""
