"""``tgml bench-live``: the live chain (detector stepper, online segmenter, pre-condition checker) on real
CaptainCook4D recordings' per-second features, k-fold per recipe (docs/live-benchmark.md)."""
