"""Helpers of the dashboard tests: a dashboard served by a thread of the test, and reading its HTTP answers.

Import it as `from tests.streaming.dashboard.serving import ...` (pytest runs with ``--import-mode=importlib``).
"""

from __future__ import annotations

import asyncio
import json
import threading
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from streaming.dashboard.access import BindAddress
from streaming.dashboard.server import DashboardConfig, Hub, serve


@dataclass
class Served:
    """A dashboard running in a thread: its address and its hub (read it only through `state`)."""

    url: str
    hub: Hub
    loop: asyncio.AbstractEventLoop

    def state(self) -> dict[str, Any]:
        """The snapshot the page would get, read over HTTP (with the token when one is set)."""
        token = self.hub.config.token
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        status, body, _ = get(self.url + "api/state", headers)
        assert status == 200, body
        result: dict[str, Any] = json.loads(body)
        return result


@contextmanager
def serving(
    checker: str, warn: Callable[[str], None] | None = None, say: Callable[[str], None] | None = None, **config: Any
) -> Iterator[Served]:
    """`streaming.dashboard.server.serve` on 127.0.0.1, a free port, in a thread, for the block.

    Args:
        checker: the checker's ``--publish`` endpoint.
        warn: where the dashboard's ``warning:`` lines go (None: stderr).
        say: where its other log lines go (None: stderr).
        config: further `DashboardConfig` fields (``token``, ``alert_frames``, ``address``).
    """
    config.setdefault("address", BindAddress("127.0.0.1", 0))
    hub = Hub(DashboardConfig(checker, **config), warn=warn, say=say)
    loop = asyncio.new_event_loop()
    started = threading.Event()
    urls: list[str] = []
    stop: list[asyncio.Event] = []
    failure: list[BaseException] = []

    def say_url(url: str) -> None:
        urls.append(url)
        started.set()

    async def main() -> None:
        stop.append(asyncio.Event())
        await serve(hub, say_url, stop[0])

    def run() -> None:
        try:
            loop.run_until_complete(main())
        except BaseException as err:  # noqa: BLE001 - handed to the test below
            failure.append(err)
            started.set()

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    assert started.wait(10), "the dashboard did not start"
    if failure:
        raise failure[0]
    try:
        yield Served(urls[0], hub, loop)
    finally:
        loop.call_soon_threadsafe(stop[0].set)
        thread.join(10)
        loop.close()


def get(url: str, headers: dict[str, str] | None = None) -> tuple[int, str, dict[str, str]]:
    """``GET url``: status, body as text, headers (an error status is returned, not raised; no redirect followed)."""

    class NoRedirect(urllib.request.HTTPRedirectHandler):
        def redirect_request(self, *args: Any, **kwargs: Any) -> None:
            return None

    opener = urllib.request.build_opener(NoRedirect)
    request = urllib.request.Request(url, headers=headers or {})
    try:
        with opener.open(request, timeout=10) as response:
            return response.status, response.read().decode("utf-8", "replace"), dict(response.headers)
    except urllib.error.HTTPError as err:
        return err.code, err.read().decode("utf-8", "replace"), dict(err.headers)
