"""The terminal view of a checker's output, by role: `state` (what the view knows, fed one message at a time),
`render` (a pure function from that state to a rich renderable, and the ``--jsonl`` line of a message) and `client`
(the loop that subscribes to the checker, folds what arrives into the state and decides when to redraw; the
``stream-detect view`` command).
"""
