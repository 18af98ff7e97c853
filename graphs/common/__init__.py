"""What every floor builds on, apart from the graph domain: the user-error type and the argument parser
(`errors`), signal handling (`interrupts`), the atomic writer and the checked file readers (`files`,
`array_files`), settings files (`settings_files`), the bounds of shared options (`options`), text made safe to show
(`safe_text`) and lazily loaded package names (`lazy_exports`).

Standard library and numpy only; nothing here imports another package of the project, not even the rest of `graphs`.
"""
