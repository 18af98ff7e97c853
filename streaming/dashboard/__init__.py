"""``stream-detect dashboard``: a web page of every stream and alert of one checker, pushed live to the browser.

`state` folds the checker's messages into tiles and an alert feed (pure, no I/O); `feed` reads the checker's output
over ZeroMQ in a thread; `access` decides who may read the page; `graph_svg` draws the task graph safely; `server` is
the aiohttp application and its push channel; `cli` the sub-command's options. The page itself is plain HTML, CSS
and JavaScript in ``static/``, served as they are (no build step, nothing fetched from elsewhere).
"""
