"""The dashboard in a real browser (headless Chromium through selenium), fed by a real checker and a detector on the
demo video: the alert appears within 2 s of being published, with the picture of its frame, an acknowledgement shows
on a second open page, and a step named with HTML shows as text. And, fed by a checker in the test, what the page
says when it cannot know: tiles while the checker is down and after a restarted checker forgot a stream, a --graph
that is not the checker's, when an alert was raised; while the page has lost its dashboard (closed, or silent with its
socket open), and once a restarted one (another graph, another token) is back; keyboard-only selection and
acknowledgement, the alert marked once the selected one is gone, the day of an old alert, a console free of errors;
15 streams and a 64-character stream id at 1,280 and 390 px; the tiles' order (live streams with an alert first)
and the notice of a new alert that came out of sight.

Skips, saying why, where selenium, Debian's ``chromium`` or its ``chromium-driver`` is missing (`.ci/run` installs
them as root where a Debian mirror answers).
"""

from __future__ import annotations

import itertools
import os
import queue
import re
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
import zmq

from graphs.task_graph import TaskGraph, load_graph, save_graph
from streaming.dashboard.access import BindAddress
from streaming.demo.paths import default_demo_paths
from streaming.transport import Publisher, bind, connect
from tests.streaming.dashboard.serving import get, serving
from tests.streaming.dashboard.test_state import alert, status
from tests.streaming.helpers import MISTAKE_STEP, STREAM_DETECT, beat, keystep, running_checker, tea_graph, wait_for

HOSTILE = '<script>window.pwned=1</script><img src=x onerror="window.pwned=2">boil_water'
TOKEN = "browser-test-token-0123456789"
STARTUP_S = 120.0  # a command that loads torch and the backbone on a busy 2-core machine


@pytest.fixture
def chromium_tmp() -> Iterator[Path]:
    """A folder for Chromium's temporary files, removed after the test.

    Ended by chromedriver, Chromium leaves its singleton socket's folder in ``$TMPDIR``: one more in the machine's
    ``/tmp`` per test and per run otherwise. Not under ``tmp_path``: the socket's path would pass the 107 bytes a Unix
    socket's name may hold, and Chromium would not start.
    """
    with tempfile.TemporaryDirectory(prefix="chromium-") as folder:
        yield Path(folder)


def browser(chromium_tmp: Path) -> Any:
    """A headless Chromium driven by Debian's chromedriver, its temporary files in ``chromium_tmp``, or a skip saying
    what is missing."""
    webdriver = pytest.importorskip("selenium.webdriver", reason="selenium is not installed (the dev extra has it)")
    driver_path = shutil.which("chromedriver")
    chromium = shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")
    if driver_path is None or chromium is None:
        pytest.skip("headless Chromium is not installed (apt-get install chromium chromium-driver; .ci/run does)")
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = chromium
    for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--window-size=1280,900",
                 "--disable-background-timer-throttling", "--disable-renderer-backgrounding"):
        options.add_argument(flag)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})  # the console, for driver.get_log("browser")
    service = Service(executable_path=driver_path, env={**os.environ, "TMPDIR": str(chromium_tmp)})
    return webdriver.Chrome(service=service, options=options)


class Command:
    """A command of the project run as a child process, its stderr read line by line by a thread."""

    def __init__(self, *args: str) -> None:
        env = {**os.environ, "PYTHONUNBUFFERED": "1"}
        self.process = subprocess.Popen([*STREAM_DETECT, *args], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                        text=True, env=env)  # fmt: skip
        self.lines: queue.Queue[str] = queue.Queue()
        self.seen: list[str] = []
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.process.stderr is not None
        for line in self.process.stderr:
            self.lines.put(line.rstrip("\n"))

    def wait_for_line(self, pattern: str, timeout_s: float = STARTUP_S) -> re.Match[str]:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            try:
                line = self.lines.get(timeout=0.2)
            except queue.Empty:
                if self.process.poll() is not None:
                    break
                continue
            self.seen.append(line)
            if (match := re.search(pattern, line)) is not None:
                return match
        raise AssertionError(f"no line matching {pattern!r}; stderr: {self.seen[-20:]}")

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(15)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(5)


@contextmanager
def commands() -> Iterator[list[Command]]:
    started: list[Command] = []
    try:
        yield started
    finally:
        for command in reversed(started):
            command.stop()


def hostile_graph(tmp_path: Path) -> Path:
    """The demo graph, its mistake step (boil_water) renamed with HTML that would run if it were ever parsed."""
    graph = load_graph(default_demo_paths()[0])
    names = [HOSTILE if step == MISTAKE_STEP else name for step, name in zip(graph.step_ids, graph.step_names,
                                                                            strict=True)]  # fmt: skip
    path = tmp_path / "hostile.json"
    save_graph(TaskGraph(graph.step_ids, tuple(names), graph.adjacency, graph.weights, graph.scenario), path)
    return path


def wait_until(driver: Any, script: str, timeout_s: float) -> Any:
    """Run ``script`` in the page until it returns something truthy; that value."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        value = driver.execute_script(script)
        if value:
            return value
        time.sleep(0.05)
    raise AssertionError(f"the page never satisfied: {script}")


ALERT_CARD = "return document.querySelector('#alert-feed li.alert');"


@pytest.mark.slow
def test_the_demo_alert_reaches_every_open_page_in_time_as_text(
    tmp_path: Path, demo_cache: Path, chromium_tmp: Path
) -> None:
    driver = browser(chromium_tmp)
    token_file = tmp_path / "token"
    token_file.write_text(TOKEN + "\n")
    try:
        with commands() as started:
            checker = Command("checker", "--graph", str(hostile_graph(tmp_path)), "--bind", "tcp://127.0.0.1:0",
                              "--publish", "tcp://127.0.0.1:0")  # fmt: skip
            started.append(checker)
            events, alerts = checker.wait_for_line(r"detectors connect to (\S+), viewers to (\S+)").groups()
            frames = tmp_path / "frames"
            dashboard = Command("dashboard", "--connect", alerts, "--graph", str(hostile_graph(tmp_path)),
                                "--bind", "127.0.0.1:0", "--token-file", str(token_file),
                                "--alert-frames", str(frames))  # fmt: skip
            started.append(dashboard)
            url = dashboard.wait_for_line(r"serving (http://\S+)").group(1)
            assert get(url)[0] == 401  # the token guards the page

            driver.get(f"{url}?token={TOKEN}")
            assert driver.current_url == url  # the token left the address bar
            wait_until(driver, "return document.getElementById('checker-link').textContent.includes('connected')", 30)
            first = driver.current_window_handle
            driver.switch_to.new_window("tab")
            driver.get(url)
            second = driver.current_window_handle
            wait_until(driver, "return document.getElementById('page-link').textContent.includes('live')", 30)

            started.append(Command("detector", "--video", "demo", "--fast", "--connect", events,
                                   "--stream-id", "kitchen", "--alert-frames", str(frames)))  # fmt: skip
            driver.switch_to.window(first)
            wait_until(driver, ALERT_CARD, STARTUP_S)
            card = driver.execute_script(
                "const c = document.querySelector('#alert-feed li.alert'); return {shown: Number(c.dataset.shown), "
                "published: Number(c.dataset.published), step: c.querySelector('.step').textContent, "
                "text: c.textContent, pwned: window.pwned === undefined ? null : window.pwned, "
                "injected: document.querySelectorAll('#alert-feed img[src=\"x\"], #alert-feed script').length};"
            )
            assert card["shown"] - card["published"] < 2.0, card
            assert card["step"] == HOSTILE and "fill_kettle" in card["text"] and "kitchen" in card["text"]
            assert card["pwned"] is None and card["injected"] == 0
            # The graph drawing names the step as text too, and marks it.
            graph = driver.execute_script(
                "const v = document.getElementById('graph-view'); return {text: v.textContent, "
                "marked: v.querySelectorAll('.hl-alert').length, missing: v.querySelectorAll('.hl-missing').length};"
            )
            assert "2: <script>window.pwned=1</s" in graph["text"]  # drawn as text (the label wraps at 28 characters)
            assert graph["marked"] >= 1 and graph["missing"] >= 1
            # Each mark's word sits in the drawing, clear of every other box and of every arrowhead (they were
            # drawn above the boxes, where the arrows come in).
            clashes = driver.execute_script(
                "const v = document.getElementById('graph-view'); const svg = v.querySelector('svg');"
                "const r = (e) => e.getBoundingClientRect(); const area = r(svg);"
                "const hit = (a, b) => a.left < b.right && b.left < a.right && a.top < b.bottom && b.top < a.bottom;"
                "const shapes = [...v.querySelectorAll('g.node > :is(polygon, path, ellipse), g.edge polygon')];"
                "return [...v.querySelectorAll('text.hl-tag')].map((w) => { const a = r(w);"
                "  const own = w.parentNode.querySelector(':scope > :is(polygon, path, ellipse)');"
                "  return {tag: w.textContent, inside: a.left >= area.left && a.right <= area.right,"
                "          hits: shapes.filter((s) => s !== own && hit(a, r(s))).length}; });"
            )
            assert len(clashes) == 2 and all(c["inside"] and c["hits"] == 0 for c in clashes), clashes
            # The detector saved the frame of the step; the alert shows it (served with the page's cookie).
            wait_until(driver, "const i = document.querySelector('#alert-feed li.alert figure.frame img'); "
                               "return i && i.complete && i.naturalWidth > 0;", 20)  # fmt: skip
            tile = wait_until(driver, "const t = document.querySelector('article.tile[data-stream=\"kitchen\"]'); "
                                      "return t && t.textContent;", 10)  # fmt: skip
            assert "kitchen" in tile and "allowed next" in tile

            # Clicked in the page: the demo's confirmed copy of the alert may redraw the card between a lookup from
            # here and the click (selenium's stale element).
            wait_until(driver, "const b = document.querySelector('#alert-feed li.alert button.ack'); "
                               "if (b) b.click(); return Boolean(b);", 10)  # fmt: skip
            driver.switch_to.window(second)
            acked = wait_until(driver, "const c = document.querySelector('#alert-feed li.alert'); "
                                       "return c && c.dataset.state === 'acked' && c.textContent;", 10)  # fmt: skip
            assert "ACKNOWLEDGED" in acked
            assert driver.execute_script("return window.pwned === undefined")
            shot = os.environ.get("DASHBOARD_SCREENSHOT")
            if shot:  # docs/dashboard.png is made this way (see docs/dashboard.md)
                driver.switch_to.window(first)
                driver.set_window_size(1280, 900)
                driver.save_screenshot(shot)
    finally:
        driver.quit()


TILE = ("const t = document.querySelector('article.tile[data-stream=\"station\"]'); if (!t) return null; "
        "const dd = (name) => [...t.querySelectorAll('dt')].find((d) => d.textContent === name)?.nextElementSibling"
        ".textContent ?? null; return {state: t.querySelector('.state').textContent, now: dd('now'), "
        "heard: dd('last heard'), next: [...t.querySelectorAll('.next-list li')].map((l) => l.textContent), "
        "counts: document.getElementById('counts').textContent};")


def page_tile(driver: Any, label: str, timeout_s: float = 20.0) -> dict[str, Any]:
    """The station's tile once its state label starts with ``label``."""
    result: dict[str, Any] = wait_until(driver, f"const r = (() => {{ {TILE} }})(); "
                                                f"return r && r.state.startsWith({label!r}) && r;", timeout_s)
    return result


def test_the_page_says_what_it_cannot_know_and_when_an_alert_was_raised(tmp_path: Path, chromium_tmp: Path) -> None:
    driver = browser(chromium_tmp)
    graph = tea_graph()
    names = dict(zip(graph.step_ids, graph.step_names, strict=True)) | {2: "attach_legs"}  # not the checker's name
    seq = itertools.count()
    steps = tuple({"step": step, "name": name, "requires": []} for step, name in names.items())  # drawn as a list
    try:
        with serving(f"ipc://{tmp_path}/out", warn=lambda line: None, say=lambda line: None, names=names,
                     steps=steps) as served:  # fmt: skip
            with running_checker(tmp_path, stream_timeout_s=600.0) as (ctx, _service, _thread):
                detector = Publisher(connect(ctx, zmq.PUB, f"ipc://{tmp_path}/in", wait_s=5.0))
                driver.get(served.url)
                wait_until(driver, "return document.getElementById('checker-link').textContent.includes('connec"
                                   "ted')", 30)  # fmt: skip
                # get_cup (3) being done after fill_kettle (1): it is "now", not "allowed next" (it was listed first)
                assert wait_for(lambda: any(t["stream"] == "station" for t in served.state()["tiles"]), 20,
                                step=lambda: detector.send(beat("station", seq=next(seq), history=(1,), current=3,
                                                                timestamp=time.time())))  # fmt: skip
                live = page_tile(driver, "\u25b6 LIVE")
                assert live["now"] == "get_cup" and live["next"] and not any("get_cup" in n for n in live["next"])
                assert "1 live" in live["counts"]
                sent = time.time()
                detector.send(keystep(history=(2,), stream_id="kettle", timestamp=sent))  # boil_water: an alert
                assert wait_for(lambda: any(r.alert.replayed for r in list(served.hub.state.alerts)), 10)
                card = wait_until(driver, "const c = document.querySelector('#alert-feed li.alert'); return c && "
                                          "{raised: Number(c.dataset.raised), text: c.textContent};", 10)  # fmt: skip
                # raised when the checker raised it, and no "(re-sent)": this page saw it live, re-sends since
                assert abs(card["raised"] - sent) < 1e-3 and "(re-sent)" not in card["text"], card
                # A later copy redraws the card (the page's own update path): an acknowledgement being sent stays
                # pending on the new card, and keyboard focus stays on it.
                redrawn = driver.execute_script(
                    "const c = document.querySelector('#alert-feed li.alert'); const b = c.querySelector('button.ack');"
                    "b.disabled = true; b.textContent = 'Acknowledging\u2026'; c.focus();"
                    "updateAlert(state.alerts.get(Number(c.dataset.id)));"
                    "const n = document.querySelector('#alert-feed li.alert'); const a = n.querySelector('button.ack');"
                    "return {redrawn: n !== c, disabled: a.disabled, text: a.textContent,"
                    "        focused: document.activeElement === n};"
                )
                assert redrawn == {"redrawn": True, "disabled": True, "text": "Acknowledging\u2026", "focused": True}
                banner = wait_until(driver, "const b = document.getElementById('name-warning'); "
                                            "return !b.hidden && b.textContent;", 10)  # fmt: skip
                assert '"attach_legs"' in banner and '"boil_water"' in banner
                # the graph's step 2 is not the alert's step: nothing marked on it
                assert driver.execute_script("return document.querySelectorAll('#graph-view li').length") == 6
                assert driver.execute_script("return document.querySelectorAll('#graph-view .hl-alert').length") == 0
            unknown = page_tile(driver, "? UNKNOWN")  # the checker is gone: no tile claims live
            assert unknown["now"] == "-" and "not answering" in unknown["heard"] and "0 live" in unknown["counts"]
            with running_checker(tmp_path):  # restarted; the detector is gone, so it never hears of the station
                silent = page_tile(driver, "? NO WORD since")
                assert silent["now"] == "-" and "0 live" in silent["counts"] and "not answering" in silent["counts"]
                # The long state label wraps under the stream's name, which it squeezed to a column of 2 letters
                # ("stati / on"), on the very tiles a supervisor must read; at any width.
                for width in (760, 1280, 1920):
                    driver.set_window_size(width, 900)
                    lines = driver.execute_script(
                        "const h = document.querySelector('article.tile[data-stream=\"station\"] h3');"
                        "const r = document.createRange(); r.selectNodeContents(h);"
                        "return new Set([...r.getClientRects()].map((b) => Math.round(b.top))).size;")
                    assert lines == 1, f"the stream's name takes {lines} lines at {width} px"
    finally:
        driver.quit()


def graph_steps(names: dict[int, str]) -> tuple[dict[str, Any], ...]:
    """A --graph's steps as the dashboard's page lists them when nothing is drawn (no pre-conditions)."""
    return tuple({"step": step, "name": name, "requires": []} for step, name in names.items())


BADGES = ("return {page: document.getElementById('page-link').textContent, "
          "checker: document.getElementById('checker-link').textContent};")


def test_a_page_that_lost_its_dashboard_says_so_and_comes_back_as_the_new_one_is(
    tmp_path: Path, chromium_tmp: Path
) -> None:
    driver = browser(chromium_tmp)
    graph = tea_graph()
    names = dict(zip(graph.step_ids, graph.step_names, strict=True))
    wrong = names | {2: "attach_legs"}  # not the checker's name of step 2
    checker = f"ipc://{tmp_path}/out"
    quiet: dict[str, Any] = {"warn": lambda line: None, "say": lambda line: None, "token": TOKEN}
    seq = itertools.count()
    try:
        with running_checker(tmp_path, stream_timeout_s=600.0) as (ctx, _service, _thread):
            detector = Publisher(connect(ctx, zmq.PUB, f"ipc://{tmp_path}/in", wait_s=5.0))
            with serving(checker, names=wrong, steps=graph_steps(wrong), **quiet) as served:
                address = BindAddress("127.0.0.1", urlsplit(served.url).port or 0)
                driver.get(f"{served.url}?token={TOKEN}")
                # boil_water (2) before fill_kettle: an alert on the station
                assert wait_for(lambda: any(t["stream"] == "station" for t in served.state()["tiles"]), 20,
                                step=lambda: detector.send(beat("station", seq=next(seq), history=(2,),
                                                                timestamp=time.time())))  # fmt: skip
                page_tile(driver, "\u25b6 LIVE")
                wait_until(driver, "const c = document.querySelector('#alert-feed li.alert'); if (c) c.click(); "
                                   "return c && c.classList.contains('selected') && "
                                   "!document.getElementById('name-warning').hidden;", 10)  # fmt: skip
            # The dashboard is gone (restarted, say): the page hears nothing, so it claims nothing. It said "checker
            # connected" and "LIVE" for as long as the dashboard was away.
            lost = page_tile(driver, "? UNKNOWN")
            assert "lost the dashboard" in lost["heard"] and "0 live" in lost["counts"], lost
            badges = driver.execute_script(BADGES)
            assert "not answering" in badges["page"] and "connected" not in badges["checker"], badges
            # The footer's counts stopped too: they kept reading as current.
            footer = driver.execute_script("return document.getElementById('footer').textContent;")
            assert footer.startswith("this page has lost the dashboard; as last told at "), footer
            # An acknowledgement cannot go anywhere: the button says so (it said "Acknowledging..." until the page
            # reconnected, though nothing was sent).
            button = driver.execute_script("const b = document.querySelector('#alert-feed li.alert button.ack'); "
                                           "b.click(); return {disabled: b.disabled, text: b.textContent};")
            assert not button["disabled"] and "Not sent" in button["text"], button

        # The checker restarted too, and the dashboard is back, given the checker's own graph this time. The page
        # is kept offline until the new dashboard holds the kettle's alert, so that its first snapshot has it.
        offline = {"latency": 0, "downloadThroughput": -1, "uploadThroughput": -1}
        driver.execute_cdp_cmd("Network.enable", {})
        driver.execute_cdp_cmd("Network.emulateNetworkConditions", offline | {"offline": True})
        with running_checker(tmp_path, stream_timeout_s=600.0) as (ctx, _service, _thread):
            detector = Publisher(connect(ctx, zmq.PUB, f"ipc://{tmp_path}/in", wait_s=5.0))
            with serving(checker, names=names, steps=graph_steps(names), address=address, **quiet) as served:
                detector.send(keystep(history=(2,), stream_id="kettle", timestamp=time.time()))
                assert wait_for(lambda: len(served.state()["alerts"]) == 1, 20)
                driver.execute_cdp_cmd("Network.emulateNetworkConditions", offline | {"offline": False})
                wait_until(driver, "return document.getElementById('checker-link').textContent.includes('connec"
                                   "ted')", 30)  # fmt: skip
                # The new dashboard numbers its alerts from 1 again: another stream's alert took the number of the
                # one selected before, and the page marked it as the user's choice.
                kettle = wait_until(driver, "const c = document.querySelector('#alert-feed li.alert'); return c && "
                                            "{selected: c.classList.contains('selected'), "
                                            "caption: document.getElementById('graph-caption').textContent};",
                                    20)  # fmt: skip
                assert not kettle["selected"] and kettle["caption"].startswith("Marked (newest alert)"), kettle
                assert "kettle" in kettle["caption"]
                live = f"return (() => {{ {TILE} }})()?.state === '\u25b6 LIVE'"
                assert wait_for(lambda: driver.execute_script(live), 20,
                                step=lambda: detector.send(beat("station", seq=next(seq), history=(1,),
                                                                timestamp=time.time())))  # fmt: skip
                # It drops the warning about the other graph, and lists the new one (both stayed until a reload).
                back = driver.execute_script("return {banner: document.getElementById('name-warning').hidden, "
                                             "steps: document.getElementById('graph-view').textContent};")
                assert back["banner"] is True and "boil_water" in back["steps"] and "attach_legs" not in back["steps"]
                wait_until(driver, "const b = document.querySelector('#alert-feed li.alert button.ack'); "
                                   "return b && !b.disabled && b.textContent === 'Acknowledge';", 20)  # fmt: skip

            # Back with another token: the page is refused, which it told as "not answering", for ever.
            with serving(checker, names=names, address=address, **(quiet | {"token": TOKEN + "-rotated"})):
                refused = wait_until(driver, "const t = document.getElementById('page-link').textContent; "
                                             "return t.includes('refuses') && t;", 30)  # fmt: skip
                assert "?token=" in refused
    finally:
        driver.quit()


def test_a_page_whose_dashboard_falls_silent_says_so_though_its_socket_stays_open(
    tmp_path: Path, chromium_tmp: Path
) -> None:
    # A dashboard frozen (its machine powered off or swapping, a link cut on the way) closes no socket: the page said
    # "page live", "checker connected" and every stream LIVE for as long as that lasted.
    driver = browser(chromium_tmp)
    seq = itertools.count()
    release = threading.Event()
    try:
        with running_checker(tmp_path, stream_timeout_s=600.0) as (ctx, _service, _thread):
            detector = Publisher(connect(ctx, zmq.PUB, f"ipc://{tmp_path}/in", wait_s=5.0))

            def heartbeat() -> None:
                detector.send(beat("station", seq=next(seq), history=(1,), timestamp=time.time()))

            with serving(f"ipc://{tmp_path}/out", warn=lambda line: None, say=lambda line: None) as served:
                driver.get(served.url)
                assert wait_for(lambda: any(t["stream"] == "station" for t in served.state()["tiles"]), 20,
                                step=heartbeat)  # fmt: skip
                page_tile(driver, "\u25b6 LIVE")
                try:
                    served.loop.call_soon_threadsafe(release.wait, 90.0)  # its event loop answers nothing now
                    lost = page_tile(driver, "? UNKNOWN", 25.0)
                    assert "lost the dashboard" in lost["heard"], lost
                    badges = driver.execute_script(BADGES)
                    assert "not answering" in badges["page"] and "connected" not in badges["checker"], badges
                finally:
                    release.set()
                # Answering again: the page is back, as it is after a restart.
                assert wait_for(lambda: driver.execute_script(f"return (() => {{ {TILE} }})()?.state === "
                                                              "'\u25b6 LIVE'"), 30, step=heartbeat)  # fmt: skip
                assert "page live" in driver.execute_script(BADGES)["page"]
    finally:
        release.set()
        driver.quit()


DAY_S = 86_400.0
CAPTION = "return document.getElementById('graph-caption').textContent;"


def test_keyboard_alone_selects_and_acknowledges_and_the_page_names_what_it_marks(
    tmp_path: Path, chromium_tmp: Path
) -> None:
    from selenium.webdriver.common.action_chains import ActionChains
    from selenium.webdriver.common.keys import Keys

    driver = browser(chromium_tmp)
    graph = tea_graph()
    names = dict(zip(graph.step_ids, graph.step_names, strict=True))
    try:
        with serving(f"ipc://{tmp_path}/out", warn=lambda line: None, say=lambda line: None, names=names,
                     steps=graph_steps(names)) as served:  # fmt: skip
            served.hub.state.max_alerts = 3  # before any alert: the page keeps as many as the dashboard says
            with running_checker(tmp_path, stream_timeout_s=600.0) as (ctx, _service, _thread):
                detector = Publisher(connect(ctx, zmq.PUB, f"ipc://{tmp_path}/in", wait_s=5.0))
                driver.get(served.url)
                wait_until(driver, "return document.getElementById('checker-link').textContent.includes('connec"
                                   "ted')", 30)  # fmt: skip
                detector.send(keystep(history=(2,), stream_id="cam0", timestamp=time.time() - 2 * DAY_S))
                wait_until(driver, ALERT_CARD, 10)
                keys = ActionChains(driver)
                focus = "const a = document.activeElement; return a.tagName + '.' + a.className;"
                for _ in range(5):  # Tab through the page to the alert
                    keys.send_keys(Keys.TAB).perform()
                    if driver.execute_script(focus).startswith("LI.alert"):
                        break
                assert driver.execute_script(focus).startswith("LI.alert")
                keys.send_keys(Keys.ENTER).perform()
                assert wait_until(driver, CAPTION, 5).startswith("Marked (selected alert)")
                keys.send_keys(Keys.TAB).perform()
                assert driver.execute_script(focus) == "BUTTON.ack"
                # A later copy of the alert (an early alert confirmed) redraws its card: focus stays on the button (it
                # moved to the card, and the Enter meant for Acknowledge un-selected the alert instead).
                driver.execute_script("const c = document.querySelector('#alert-feed li.alert');"
                                      "updateAlert(state.alerts.get(Number(c.dataset.id)));")
                assert driver.execute_script(focus) == "BUTTON.ack"
                # Enter on Acknowledge acknowledges; it also un-selected the alert (the key reached the card), and
                # focus fell to the page's top (a disabled button cannot hold it), so Tab started over.
                keys.send_keys(Keys.ENTER).perform()
                acked = wait_until(driver, "const c = document.querySelector('#alert-feed li.alert'); "
                                           "return c.dataset.state === 'acked' && {selected: "
                                           "c.classList.contains('selected'), focused: document.activeElement === c};",
                                   10)  # fmt: skip
                assert acked == {"selected": True, "focused": True}
                assert driver.execute_script(CAPTION).startswith("Marked (selected alert)")
                # Raised two days ago: the time says which day (HH:MM:SS alone read as today); a time beyond what
                # the browser's dates hold reads as in the terminal view, not "Invalid Date".
                raised = driver.execute_script(
                    "const c = document.querySelector('#alert-feed li.alert'); return [...c.querySelectorAll('dt')]"
                    ".find((d) => d.textContent === 'raised').nextElementSibling.textContent;")
                assert re.fullmatch(r"\d\d:\d\d:\d\d, .*\d.*", raised), raised
                assert driver.execute_script("return clock(1e300);") == "--:--:--"

                # Newer alerts push the selected one out of what the page keeps: the newest is marked, and the
                # caption says so (it said "selected alert" of an alert no longer there).
                for stream in ("cam1", "cam2", "cam3"):
                    detector.send(keystep(history=(2,), stream_id=stream, timestamp=time.time()))
                caption = wait_until(driver, "return document.querySelectorAll('#alert-feed li.alert').length === 3 "
                                             "&& !document.querySelector('#alert-feed li[data-id=\"1\"]') && "
                                             "document.getElementById('graph-caption').textContent;", 10)  # fmt: skip
                assert caption.startswith("Marked (newest alert)") and "cam3" in caption, caption
                # One more pushes out cam1's alert, which nobody acknowledged: the header still counts it (the count
                # covered only the alerts kept, and read as if it had been dealt with).
                detector.send(keystep(history=(2,), stream_id="cam4", timestamp=time.time()))
                counts = wait_until(driver, "const t = document.getElementById('counts').textContent; "
                                            "return t.includes('older') && t;", 10)  # fmt: skip
                assert "3 alert(s), 3 not acknowledged (and 1 older, no longer kept)" in counts, counts
                # Midnight passes on a page left open (a wall screen, for days): today's alerts are yesterday's now,
                # and their times say so (drawn once, they read as today's for ever).
                raised_at = ("const c = document.querySelector('#alert-feed li.alert'); return [...c.querySelectorAll"
                             "('dt')].find((d) => d.textContent === 'raised').nextElementSibling.textContent;")
                assert re.fullmatch(r"\d\d:\d\d:\d\d", driver.execute_script(raised_at))
                driver.execute_script("const Real = Date; window.Date = class extends Real { constructor(...a) {"
                                      "super(...(a.length ? a : [Real.now() + 86400000])); } "
                                      "static now() { return Real.now() + 86400000; } };")
                assert re.fullmatch(r"\d\d:\d\d:\d\d, .*\d.*", wait_until(
                    driver, f"const t = (() => {{ {raised_at} }})(); return t.includes(',') && t;", 5))  # fmt: skip
                # Nothing in the console (every visit logged a 404 for /favicon.ico).
                assert [e for e in driver.get_log("browser") if e["level"] == "SEVERE"] == []
                # A restarted dashboard numbers the same alert otherwise (here 7, beside another stream's alert
                # that took the old number): the selection follows the alert, not its number.
                followed = driver.execute_script(
                    "const a = state.alerts.get(Math.max(...state.alerts.keys())); select(a.id);"
                    "const other = {...a, stream: 'cam9', alert_id: 'cam9#1'};"
                    "snapshot({names: state.names, max_alerts: state.maxAlerts, alerts: [{...a, id: 7}, other],"
                    "          tiles: [...state.tiles.values()], link: state.link, name_conflicts: []});"
                    "return {selected: state.selected, "
                    "        marked: document.querySelector('#alert-feed li.selected')?.dataset.id ?? null};")
                assert followed == {"selected": 7, "marked": "7"}, followed
    finally:
        driver.quit()


LONG_STREAM = "north_east_corner_of_assembly_bay_twelve_wide_angle_camera_0001"  # 64 characters, no hyphen to break at


def test_many_streams_and_long_names_keep_every_alert_in_sight(tmp_path: Path, chromium_tmp: Path) -> None:
    driver = browser(chromium_tmp)
    streams = [f"cam{i:02d}" for i in range(14)] + [LONG_STREAM]
    seq = itertools.count()
    try:
        with (serving(f"ipc://{tmp_path}/out", warn=lambda line: None, say=lambda line: None) as served,
              running_checker(tmp_path, stream_timeout_s=600.0) as (ctx, _service, _thread)):
            detector = Publisher(connect(ctx, zmq.PUB, f"ipc://{tmp_path}/in", wait_s=5.0))
            driver.get(served.url)
            def beat_all() -> None:
                for stream in streams:
                    detector.send(beat(stream, seq=next(seq), history=(1,), timestamp=time.time()))

            assert wait_for(lambda: len(served.state()["tiles"]) == len(streams), 20, step=beat_all)
            detector.send(keystep(history=(2,), stream_id=LONG_STREAM, seq=next(seq), timestamp=time.time()))
            wait_until(driver, f"return document.querySelectorAll('article.tile').length === {len(streams)} && "
                               f"document.querySelector('#alert-feed li.alert');", 10)  # fmt: skip
            for width, height in ((1280, 900), (390, 844)):
                driver.set_window_size(width, height)
                # The stream's name runs out of its card at no width (the feed's scroll bar hid its end).
                spill = wait_until(driver, "const c = document.querySelector('#alert-feed li.alert'); "
                                           "return c.offsetWidth > 0 && {over: c.scrollWidth - c.clientWidth, "
                                           "page: document.documentElement.scrollWidth - innerWidth};", 5)
                assert spill["over"] <= 0 and spill["page"] <= 0, (width, spill)
                # Reading the last tile leaves the newest alert and the header's counts in sight: the tiles of
                # 15 streams made the page 5,000 px tall at 1,280 px, the alerts 4,000 px above the last tile; at
                # phone width the alerts came 7,000 px down, under every tile.
                if width >= 1200:
                    driver.execute_script("document.querySelector('article.tile:last-child').scrollIntoView();")
                else:
                    driver.execute_script("window.scrollTo(0, 0);")
                seen = driver.execute_script(
                    "const r = (s) => document.querySelector(s).getBoundingClientRect();"
                    "const seen = (b) => b.top >= 0 && b.top < innerHeight;"
                    "return {alert: seen(r('#alert-feed li.alert')), counts: seen(r('#counts'))};")
                assert seen["alert"] and (width < 1200 or seen["counts"]), (width, seen)
    finally:
        driver.quit()


def test_an_open_page_drops_the_tiles_the_dashboard_dropped(tmp_path: Path, chromium_tmp: Path) -> None:
    # The page removed no tile ever: one left open while cameras came and went kept every stream it was ever sent,
    # long after the dashboard had let them go.
    driver = browser(chromium_tmp)
    seq = itertools.count()
    try:
        with serving(f"ipc://{tmp_path}/out", warn=lambda line: None, say=lambda line: None) as served:
            served.hub.state.forget_s = 1.0  # an attribute: the code before it ignores it, and the assertion says so
            driver.get(served.url)
            with running_checker(tmp_path) as (ctx, _service, _thread):
                detector = Publisher(connect(ctx, zmq.PUB, f"ipc://{tmp_path}/in", wait_s=5.0))
                for k in range(5):
                    detector.send(beat(f"gone-{k}", seq=next(seq), ended=True, timestamp=time.time()))
                wait_until(driver, "return document.querySelectorAll('article.tile').length === 5", 20)
            with running_checker(tmp_path) as (ctx, _service, _thread):  # restarted: it never hears of gone-*
                detector = Publisher(connect(ctx, zmq.PUB, f"ipc://{tmp_path}/in", wait_s=5.0))
                assert wait_for(lambda: [t["stream"] for t in served.state()["tiles"]] == ["kitchen"], 10,
                                step=lambda: detector.send(beat("kitchen", seq=next(seq), timestamp=time.time())))
                shown = wait_until(driver, "const t = [...document.querySelectorAll('article.tile')]"
                                           ".map((n) => n.dataset.stream); return t.length === 1 && t;", 5)
        assert shown == ["kitchen"]
    finally:
        driver.quit()


def test_the_header_counts_an_alert_pushed_out_unacknowledged_at_once(tmp_path: Path, chromium_tmp: Path) -> None:
    # The count of alerts no longer kept came with the link, on its 1 s timer: the alert that pushed out one nobody
    # acknowledged made the header count one fewer "not acknowledged" for up to a second, as if it had been dealt with.
    driver = browser(chromium_tmp)
    try:
        with serving(f"ipc://{tmp_path}/out", warn=lambda line: None, say=lambda line: None) as served:
            served.hub.state.max_alerts = 1  # before any alert: the page keeps as many as the dashboard says
            with running_checker(tmp_path, stream_timeout_s=600.0) as (ctx, _service, _thread):
                detector = Publisher(connect(ctx, zmq.PUB, f"ipc://{tmp_path}/in", wait_s=5.0))
                driver.get(served.url)
                detector.send(keystep(history=(2,), stream_id="cam0", timestamp=time.time()))
                wait_until(driver, "return document.getElementById('counts').textContent.includes('1 not ack')", 30)
                driver.execute_script(  # every text the header shows once cam1's alert (the second) is on the page
                    "window.shown = []; const c = document.getElementById('counts');"
                    "new MutationObserver(() => document.querySelector('#alert-feed li[data-id=\"2\"]') && "
                    "window.shown.push(c.textContent))"
                    ".observe(c, {childList: true, characterData: true, subtree: true});")
                detector.send(keystep(history=(2,), stream_id="cam1", timestamp=time.time()))
                wait_until(driver, "return window.shown.some((t) => t.includes('older'))", 10)
                shown = driver.execute_script("return window.shown;")
        assert shown and all("1 alert(s), 1 not acknowledged (and 1 older, no longer kept)" in t for t in shown), shown
    finally:
        driver.quit()


FINISHED = ("return [...document.querySelectorAll('#finished-list li.session')].map((s) => ({stream: s.dataset.stream, "
            "never: s.classList.contains('never'), text: s.textContent}));")


def test_a_sessions_end_report_stays_on_the_page_after_its_tile_goes_and_after_a_reload(
    tmp_path: Path, chromium_tmp: Path
) -> None:
    # The end report was shown on its tile alone, and the tile goes some 11 minutes after the session ended (10 after
    # the checker let the stream go): a supervisor who looked later never learned that a step was forgotten.
    driver = browser(chromium_tmp)
    graph = tea_graph()
    names = dict(zip(graph.step_ids, graph.step_names, strict=True))
    seq = itertools.count()
    try:
        with serving(f"ipc://{tmp_path}/out", warn=lambda line: None, say=lambda line: None, names=names) as served:
            served.hub.state.forget_s = 1.0  # an attribute: the code before it ignores it
            with running_checker(tmp_path, stream_timeout_s=1.0) as (ctx, _service, _thread):  # freed 12 s idle
                detector = Publisher(connect(ctx, zmq.PUB, f"ipc://{tmp_path}/in", wait_s=5.0))
                driver.get(served.url)
                wait_until(driver, "return document.getElementById('checker-link').textContent.includes('connec"
                                   "ted')", 30)  # fmt: skip
                fresh = driver.execute_script("return document.getElementById('no-streams').innerText;")
                assert wait_for(lambda: any(t["stream"] == "station" for t in served.state()["tiles"]), 20,
                                step=lambda: detector.send(keystep(history=(1,), stream_id="station", seq=next(seq),
                                                                   timestamp=time.time())))  # fmt: skip
                detector.send(beat("station", seq=next(seq), history=(1,), ended=True, timestamp=time.time()))
                page_tile(driver, "\u25a0 ENDED")
                wait_until(driver, "return !document.querySelector('article.tile[data-stream=\"station\"]')", 40)
                [gone] = driver.execute_script(FINISHED)  # the tile went; the session's end report stayed
                # No tile left: the page must not read as if no camera had ever sent here, with the session listed.
                empty = driver.execute_script("const p = document.getElementById('no-streams'); "
                                              "return !p.hidden && p.innerText;")
                driver.refresh()  # and a page opened now gets it too, as it gets the alerts
                wait_until(driver, "return document.getElementById('page-link').textContent.includes('live')", 30)
                [reloaded] = wait_until(driver, f"const s = (() => {{ {FINISHED} }})(); return s.length && s;", 10)
    finally:
        driver.quit()
    for shown in (gone, reloaded):
        assert shown["stream"] == "station" and shown["never"], shown
        assert "\u2717 never done: " in shown["text"] and "add_milk" in shown["text"], shown
        assert "1 step(s) done, last fill_kettle" in shown["text"] and "ended " in shown["text"], shown
    assert "(re-sent)" not in reloaded["text"]  # this dashboard saw it end
    assert empty and "yet" not in empty and "Finished sessions" in empty, empty
    assert "Finished sessions" not in fresh, fresh  # nothing listed there yet: not pointed at


NO_STREAMS = "const p = document.getElementById('no-streams'); return !p.hidden && p.innerText;"


def test_the_empty_stream_list_says_when_the_checker_itself_is_not_answering(tmp_path: Path,
                                                                              chromium_tmp: Path) -> None:
    # "No stream now: start a detector that sends to this checker" was said also while the checker itself was not
    # started, or stopped: nothing was known of the streams then, and starting a detector would not have helped.
    driver = browser(chromium_tmp)
    endpoint = f"ipc://{tmp_path}/out"

    def says(text: str) -> str:
        found: str = wait_until(driver, f"const t = (() => {{ {NO_STREAMS} }})(); return t && t.includes("
                                        f"{text!r}) && t;", 30)  # fmt: skip
        return found

    try:
        with serving(endpoint, warn=lambda line: None, say=lambda line: None) as served:
            driver.get(served.url)
            before = says("never answered")  # no checker yet
            with running_checker(tmp_path):
                running = says("start a detector")
            after = says("has not answered since")  # stopped; it had no stream when last heard
    finally:
        driver.quit()
    assert before.startswith("Streams unknown: the checker at " + endpoint), before
    assert running.startswith("No stream now: start a detector"), running
    assert after.startswith(f"No stream as last heard: the checker at {endpoint} has not answered since "), after
    assert "start a detector" not in before + after


def test_a_camera_stopped_by_hand_reads_stopped_and_a_file_that_played_out_ended(tmp_path: Path,
                                                                                  chromium_tmp: Path) -> None:
    # Both tiles read "\u25a0 ENDED" and "session ended; never done: ...": a supervisor could not tell the camera
    # someone stopped (Ctrl-C, SIGTERM) from the recording that reached its end.
    driver = browser(chromium_tmp)
    seq = itertools.count()

    def tile(stream: str) -> str:
        return (f"const t = document.querySelector('article.tile[data-stream=\"{stream}\"]'); return t && "
                "t.querySelector('.never') && [t.querySelector('.state').textContent, "
                "t.querySelector('.never').textContent];")

    try:
        with serving(f"ipc://{tmp_path}/out", warn=lambda line: None, say=lambda line: None) as served:
            driver.get(served.url)
            with running_checker(tmp_path) as (ctx, _service, _thread):
                detector = Publisher(connect(ctx, zmq.PUB, f"ipc://{tmp_path}/in", wait_s=5.0))
                for stream, stopped in (("tape", False), ("camera", True)):  # get_cup done, then the session's end
                    detector.send(beat(stream, seq=next(seq), history=(3,), timestamp=time.time()))
                    detector.send(beat(stream, seq=next(seq), history=(3,), ended=True, stopped=stopped,
                                       timestamp=time.time()))
                tape, camera = (wait_until(driver, tile(stream), 30) for stream in ("tape", "camera"))
                counts = driver.execute_script("return document.getElementById('counts').textContent;")
        assert tape[0] == "\u25a0 ENDED" and tape[1].startswith("session ended; never done: "), tape
        assert camera[0] == "\u25a0 STOPPED" and camera[1].startswith("session stopped; not done by the stop: "), camera
        assert "0 live, 0 lost, 0 not answering, 1 ended, 1 stopped" in counts, counts
    finally:
        driver.quit()


def test_a_tile_whose_next_steps_all_wait_on_the_one_under_way_says_after_it(tmp_path: Path,
                                                                              chromium_tmp: Path) -> None:
    # With pour_water under way and add_milk, the only step left, waiting on it, the tile said "allowed next: none",
    # which reads as nothing can follow; the terminal view, by the same rule (streaming/next_steps.py), says
    # "after pour_water".
    driver = browser(chromium_tmp)
    seq = itertools.count()
    script = ("const t = document.querySelector('article.tile[data-stream=\"cam0\"]'); "
              "return t && t.querySelector('.state').textContent.includes('LIVE') && "
              "t.querySelector('.next').textContent;")
    try:
        graph = tea_graph()
        names = dict(zip(graph.step_ids, graph.step_names, strict=True))
        with serving(f"ipc://{tmp_path}/out", warn=lambda line: None, say=lambda line: None, names=names) as served:
            driver.get(served.url)
            with running_checker(tmp_path) as (ctx, _service, _thread):
                detector = Publisher(connect(ctx, zmq.PUB, f"ipc://{tmp_path}/in", wait_s=5.0))
                detector.send(beat("cam0", seq=next(seq), history=(1, 2, 3, 4), current=5, timestamp=time.time()))
                shown = wait_until(driver, script, 30)
    finally:
        driver.quit()
    assert shown == "allowed next: after pour_water", shown


def test_a_next_step_the_rule_gives_no_probability_is_named_without_a_number(tmp_path: Path,
                                                                             chromium_tmp: Path) -> None:
    # Under the binary rule only the successors of the step done last get a probability: after get_cup, fill_kettle
    # is allowed with a score of 0. The tile said "fill_kettle 0%", which reads as "it cannot come next"; the terminal
    # view names it without a number.
    driver = browser(chromium_tmp)
    script = ("const t = document.querySelector('article.tile[data-stream=\"cam0\"]'); "
              "const items = t ? [...t.querySelectorAll('.next-list li')].map((l) => l.textContent) : []; "
              "return items.length === 2 && items;")
    try:
        graph = tea_graph()
        names = dict(zip(graph.step_ids, graph.step_names, strict=True))
        with serving(f"ipc://{tmp_path}/out", warn=lambda line: None, say=lambda line: None, names=names) as served:
            driver.get(served.url)
            with running_checker(tmp_path) as (ctx, _service, _thread):
                detector = Publisher(connect(ctx, zmq.PUB, f"ipc://{tmp_path}/in", wait_s=5.0))
                detector.send(beat("cam0", seq=0, history=(3,), timestamp=time.time()))
                shown = wait_until(driver, script, 30)
    finally:
        driver.quit()
    assert shown == ["add_teabag 100%", "fill_kettle"], shown


def test_a_next_step_with_a_probability_under_half_a_percent_is_not_shown_as_0_percent(tmp_path: Path,
                                                                                        chromium_tmp: Path) -> None:
    # The weighted rule gives an allowed step it thinks unlikely a probability such as 0.0047: "0%" read as "it cannot
    # come next", as a score of 0 did, yet it is allowed and the rule gives it a chance.
    driver = browser(chromium_tmp)
    script = ("const t = document.querySelector('article.tile[data-stream=\"cam0\"]'); "
              "const items = t ? [...t.querySelectorAll('.next-list li')].map((l) => l.textContent) : []; "
              "return items.length === 2 && items;")
    ctx = zmq.Context()
    try:
        sock, endpoint = bind(ctx, zmq.XPUB, f"ipc://{tmp_path}/fake-checker")  # speaks for a checker
        fake = Publisher(sock)
        graph = tea_graph()
        names = dict(zip(graph.step_ids, graph.step_names, strict=True))
        with serving(endpoint, warn=lambda line: None, say=lambda line: None, names=names) as served:
            driver.get(served.url)
            assert wait_for(lambda: fake.new_subscribers() > 0, 10)
            fake.send(status(current=None, allowed=(4, 1), allowed_scores=(0.9953, 0.0047), timestamp=time.time()))
            shown = wait_until(driver, script, 30)
    finally:
        driver.quit()
        ctx.destroy(linger=0)
    assert shown == ["add_teabag 100%", "fill_kettle <1%"], shown


TILE_ORDER = "return [...document.querySelectorAll('article.tile')].map((t) => t.dataset.stream);"


def test_live_streams_with_an_alert_come_first_then_live_lost_and_ended_ones(tmp_path: Path,
                                                                              chromium_tmp: Path) -> None:
    # The tiles came in name order alone: under a flood of made-up stream ids (or a site of a few dozen cameras) the
    # one stream with an alert was tile 256 of 256, 30,000 px down its column at 1,366 x 768, lost tiles before it.
    driver = browser(chromium_tmp)
    ctx = zmq.Context()
    standing: dict[str, dict[str, Any]] = {
        "aaa-live": {"alerts": 0}, "aaa-lost": {"alerts": 0, "lost": True}, "bbb-ended": {"alerts": 0, "ended": True},
        "kitchen": {"alerts": 1}, "zzz-live": {"alerts": 0},
    }  # fmt: skip

    def speak() -> None:  # the checker re-sends every status twice a second
        for stream, fields in standing.items():
            fake.send(status(stream, current=None, timestamp=time.time(), **fields))

    def order_is(expected: list[str]) -> bool:
        return bool(driver.execute_script(TILE_ORDER) == expected)

    try:
        sock, endpoint = bind(ctx, zmq.XPUB, f"ipc://{tmp_path}/fake-checker")  # speaks for a checker
        fake = Publisher(sock)
        with serving(endpoint, warn=lambda line: None, say=lambda line: None) as served:
            driver.get(served.url)
            assert wait_for(lambda: fake.new_subscribers() > 0, 10)
            first = ["kitchen", "aaa-live", "zzz-live", "aaa-lost", "bbb-ended"]
            assert wait_for(lambda: order_is(first), 15, step=speak), driver.execute_script(TILE_ORDER)
            standing["kitchen"] |= {"lost": True}  # its camera went silent: among the lost now
            then = ["aaa-live", "zzz-live", "aaa-lost", "kitchen", "bbb-ended"]
            assert wait_for(lambda: order_is(then), 15, step=speak), driver.execute_script(TILE_ORDER)
    finally:
        driver.quit()
        ctx.destroy(linger=0)


NOTICE = ("const n = document.getElementById('new-alert'); const b = n?.getBoundingClientRect(); "
          "return n && !n.hidden && b.top >= 0 && b.bottom <= innerHeight && n.textContent;")
NEWEST_IN_SIGHT = ("const c = document.querySelector('#alert-feed li.alert'); const b = c.getBoundingClientRect(); "
                   "return b.top >= 0 && b.top < innerHeight && document.getElementById('new-alert').hidden && "
                   "document.activeElement === c && c.dataset.id;")


def test_a_new_alert_out_of_sight_on_a_phone_scrolled_down_is_announced_until_shown(tmp_path: Path,
                                                                                      chromium_tmp: Path) -> None:
    # At 390 px the tiles of 30 streams come under the alerts: a supervisor reading the last tiles was 6,000 px below
    # the feed, the header's count scrolled away too, and a new alert came where nobody looked.
    driver = browser(chromium_tmp)
    ctx = zmq.Context()
    streams = [f"cam{i:02d}" for i in range(30)]

    def speak() -> None:
        for stream in streams:
            fake.send(status(stream, timestamp=time.time()))

    try:
        sock, endpoint = bind(ctx, zmq.XPUB, f"ipc://{tmp_path}/fake-checker")  # speaks for a checker
        fake = Publisher(sock)
        with serving(endpoint, warn=lambda line: None, say=lambda line: None) as served:
            driver.set_window_size(390, 844)
            driver.get(served.url)
            assert wait_for(lambda: fake.new_subscribers() > 0, 10)
            assert wait_for(lambda: driver.execute_script("return document.querySelectorAll('article.tile').length")
                            == len(streams), 15, step=speak)  # fmt: skip
            # In sight (the page at its top): no notice.
            fake.send(alert(0, stream="cam00", timestamp=time.time()))
            wait_until(driver, ALERT_CARD, 10)
            assert driver.execute_async_script(  # once the browser has laid it out and reported what is in sight
                "const done = arguments[0]; requestAnimationFrame(() => requestAnimationFrame(() => "
                "done(document.getElementById('new-alert')?.hidden ?? true)));")
            driver.execute_script("window.scrollTo(0, document.documentElement.scrollHeight);")
            fake.send(alert(1, stream="cam29", step_name="add_milk", timestamp=time.time()))
            said = wait_until(driver, NOTICE, 10)
            assert "New alert out of sight: add_milk on stream cam29" in said, said
            driver.execute_script("document.getElementById('new-alert').click();")
            assert wait_until(driver, NEWEST_IN_SIGHT, 10) == "2"
    finally:
        driver.quit()
        ctx.destroy(linger=0)
