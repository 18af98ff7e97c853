"""Offline work over recorded video: feature extraction for training the detector (`features`, `features_cli`,
`frame_augment`) and the scored evaluation of whole runs (`eval_run`, `eval_scores`, `eval_plots`).

It reuses the live parts (readers, extractors, detector, checker) unchanged; nothing live imports it, so the modules of
`streaming` outside this package are exactly what runs live.
"""
