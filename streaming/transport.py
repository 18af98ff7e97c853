"""ZeroMQ sockets with the reliability rules of the ZeroMQ guide; the socket limits are named here.

- every receive is polled with a timeout (`POLL_MS`), never a blocking ``recv``;
- ``LINGER`` is 0, so closing never hangs on unsent messages;
- a peer sends a `Heartbeat` every `HEARTBEAT_S`; state travels in messages so a restarted peer
  rebuilds it (Clone pattern, see `streaming.messages`);
- oversized or malformed messages are dropped and counted (`Receiver.stats`), never raised;
- memory and time per peer are bounded: a message is received frame by frame and one of more than 2 frames is
  dropped without keeping its frames (`MAX_FRAMES`), each frame is at most `HARD_MAX_BYTES` (libzmq disconnects a
  peer that sends a larger one), at most `RECV_HWM` messages wait per peer, one poll takes at most
  `RECV_BATCH` messages or `RECV_BUDGET_S` seconds of receiving, and a receiver may give each topic (each
  stream) a budget per poll, beyond which messages are dropped before they are decoded;
- ZeroMQ never says that nobody listens at a connected endpoint, so a sender that must reach its
  peer connects with ``wait_s`` (`connect`; the detector waits `CONNECT_WAIT_S`).

Endpoints are ZeroMQ strings: ``tcp://127.0.0.1:5555`` (port 0 or ``*`` picks a free port on bind;
IPv6 addresses in brackets, ``tcp://[::1]:5555``), ``ipc:///tmp/x.sock``, ``inproc://name``. A port or
an ipc path already in use is an `InputError` (one line, exit 2).
"""

from __future__ import annotations

import errno
import re
import socket
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from typing import Final

import zmq

from graphs.errors import InputError
from streaming.messages import MAX_MESSAGE_BYTES, Message, MessageError, decode, encode

POLL_MS: Final = 100  # longest a loop blocks in one receive before checking its stop flag
HEARTBEAT_S: Final = 0.5  # detector heartbeat period; the checker's periodic status uses the same
LINGER_MS: Final = 0  # unsent messages are discarded on close instead of blocking shutdown
SEND_HWM: Final = 10_000  # queued outgoing messages per peer before PUB drops (never blocks the sender)
RECV_BATCH: Final = 256  # most messages taken per poll, so one busy peer cannot starve the loop
RECV_BUDGET_S: Final = 0.02  # most time one poll spends receiving, so a flood cannot hold the loop
# Messages queued per connected peer before libzmq stops reading from it. A detector sends a few messages a
# second, so 128 is a minute of backlog; at most 128 x 64 KiB = 8 MiB of well-formed traffic waits per peer.
RECV_HWM: Final = 128
VIEW_RECV_HWM: Final = 10_000  # a viewer trusts its checker, whose periodic re-sends come in bursts
MAX_FRAMES: Final = 2  # topic and payload: a message with more is dropped as it is received, never kept
CONNECT_WAIT_S: Final = 10.0  # longest a detector waits for its checker to answer before it refuses to run
# libzmq drops a frame larger than this, and the connection of the peer that sent it, before Python sees it. Up to
# it, an oversized payload is received and counted as malformed (a sender's bug is reported, not silent). libzmq
# holds a whole multipart message before delivering its first frame, so this bounds the memory of each frame.
HARD_MAX_BYTES: Final = 2 * MAX_MESSAGE_BYTES

DEFAULT_EVENTS_ENDPOINT: Final = "tcp://127.0.0.1:5555"  # checker's input (detectors connect here)
DEFAULT_ALERTS_ENDPOINT: Final = "tcp://127.0.0.1:5556"  # checker's output (viewers connect here)

_ENDPOINT = re.compile(r"(tcp://[^\s]+:(\d+|\*)|ipc://[^\s]+|inproc://[^\s]+)")
MAX_PORT: Final = 65_535


def check_endpoint(endpoint: str, option: str = "endpoint", peer: bool = False) -> str:
    """Validate a ZeroMQ endpoint string.

    Args:
        endpoint: e.g. ``tcp://127.0.0.1:5555``.
        option: the command-line option it came from, named in the error.
        peer: the endpoint names a peer to connect to, so a tcp port must be a real one (1-65535);
            to bind, 0 and ``*`` (a free port) are allowed too.

    Returns:
        The endpoint unchanged.
    """
    match = _ENDPOINT.fullmatch(endpoint) if isinstance(endpoint, str) else None
    if match is None:
        raise InputError(f"{option} {endpoint!r} is not a ZeroMQ endpoint (tcp://HOST:PORT, ipc://PATH, inproc://NAME)")
    port = match.group(2)
    if port is not None:
        lowest = 1 if peer else 0
        if (peer and port == "*") or (port != "*" and not lowest <= int(port) <= MAX_PORT):
            rule = f"1-{MAX_PORT} (the port the peer listens on)" if peer else f"0-{MAX_PORT} (0 or *: a free one)"
            raise InputError(f"{option} {endpoint}: the port must be {rule}")
    return endpoint


def _configure(sock: zmq.Socket, endpoint: str, recv_hwm: int = RECV_HWM) -> None:
    sock.setsockopt(zmq.LINGER, LINGER_MS)
    sock.setsockopt(zmq.MAXMSGSIZE, HARD_MAX_BYTES)
    if sock.type == zmq.PUB:
        sock.setsockopt(zmq.SNDHWM, SEND_HWM)
    else:
        sock.setsockopt(zmq.RCVHWM, recv_hwm)
    if endpoint.startswith("tcp://["):  # libzmq refuses IPv6 addresses unless asked ("No such device")
        sock.setsockopt(zmq.IPV6, 1)


def _ipc_in_use(endpoint: str) -> bool:
    """Whether a process listens on an ``ipc://`` path (libzmq would silently take the path over)."""
    path = endpoint[len("ipc://") :]
    if not path or path.startswith("@"):  # abstract namespace: the kernel refuses a second bind itself
        return False
    probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        probe.settimeout(1.0)
        probe.connect(path)
    except OSError:  # no file, a stale file nobody listens on, or not a socket
        return False
    finally:
        probe.close()
    return True


def bind(ctx: zmq.Context, kind: int, endpoint: str, option: str = "--bind") -> tuple[zmq.Socket, str]:
    """Create a socket and bind it.

    Args:
        ctx: the ZeroMQ context.
        kind: socket type (``zmq.PUB``, ``zmq.SUB``).
        endpoint: where to bind; a tcp port of 0 picks a free one.
        option: the option the endpoint came from, named in errors.

    Returns:
        ``(socket, endpoint actually bound)``.
    """
    check_endpoint(endpoint, option)
    in_use = f"{option} {endpoint}: address already in use (is another checker running?)"
    if endpoint.startswith("ipc://") and _ipc_in_use(endpoint):
        raise InputError(in_use)
    target = endpoint[:-2] + ":*" if endpoint.startswith("tcp://") and endpoint.endswith(":0") else endpoint
    sock = ctx.socket(kind)
    _configure(sock, endpoint)
    try:
        sock.bind(target)
    except zmq.ZMQError as err:
        sock.close()
        if err.errno == errno.EADDRINUSE:
            raise InputError(in_use) from None
        raise InputError(f"{option} {endpoint}: cannot bind ({err.strerror})") from None
    last = sock.getsockopt(zmq.LAST_ENDPOINT)
    return sock, last.decode() if isinstance(last, bytes) else str(last)


def connect(
    ctx: zmq.Context,
    kind: int,
    endpoint: str,
    option: str = "--connect",
    wait_s: float = 0.0,
    recv_hwm: int = RECV_HWM,
) -> zmq.Socket:
    """Create a socket and connect it (ZeroMQ reconnects by itself if the peer restarts).

    ZeroMQ connects in the background and never says that nobody is there: a PUB socket aimed at the
    wrong endpoint silently drops everything. With ``wait_s`` the first connection must be made (a
    ZeroMQ handshake with the peer) within that many seconds, or the call fails.

    Args:
        ctx: the ZeroMQ context.
        kind: socket type.
        endpoint: the peer's bound endpoint.
        option: the option the endpoint came from, named in errors.
        wait_s: if > 0, wait up to this long for the peer to answer.
        recv_hwm: messages queued before libzmq stops reading (`RECV_HWM`; a viewer uses `VIEW_RECV_HWM`).

    Returns:
        The connected socket.

    Raises:
        InputError: a bad endpoint, or no peer answered within ``wait_s``.
    """
    check_endpoint(endpoint, option, peer=True)
    sock = ctx.socket(kind)
    _configure(sock, endpoint, recv_hwm)
    # The monitor must watch before the connection starts, or a fast handshake is missed.
    monitor = sock.get_monitor_socket(zmq.EVENT_HANDSHAKE_SUCCEEDED) if wait_s > 0 else None
    try:
        try:
            sock.connect(endpoint)
        except zmq.ZMQError as err:
            raise InputError(f"{option} {endpoint}: cannot connect ({err.strerror})") from None
        if monitor is not None and not monitor.poll(int(wait_s * 1000)):
            raise InputError(f"{option} {endpoint}: nothing answered within {wait_s:g} s (is the checker there?)")
    except BaseException:
        sock.close()
        if monitor is not None:
            monitor.close()
        raise
    if monitor is not None:
        sock.disable_monitor()
        monitor.close()
    return sock


def subscribe(sock: zmq.Socket, prefixes: tuple[bytes, ...] = (b"",)) -> zmq.Socket:
    """Subscribe a SUB socket to topic prefixes (default: everything)."""
    for prefix in prefixes:
        sock.setsockopt(zmq.SUBSCRIBE, prefix)
    return sock


class Publisher:
    """Sends messages on a PUB socket; never blocks (a full queue drops, as PUB does).

    Args:
        sock: a bound or connected PUB socket.
    """

    def __init__(self, sock: zmq.Socket) -> None:
        self.sock = sock

    def send(self, message: Message) -> None:
        """Encode and send one message."""
        self.sock.send_multipart(encode(message), copy=False)


@dataclass
class ReceiveStats:
    """What a receiver took in: valid messages and the malformed ones it dropped.

    The viewer shows ``malformed``; the checker's end-of-run line (`CheckerService.summary`) shows all three.
    """

    received: int = 0
    malformed: int = 0
    over_budget: int = 0  # dropped undecoded: their topic had used its share of a poll (`Receiver` topic_budget)
    last_error: str = ""


class Receiver:
    """Polls a SUB socket with a timeout and returns only valid messages.

    Args:
        sock: a SUB socket, already subscribed.
        clock: monotonic clock bounding the time one poll spends receiving.
        topic_budget: if set, the most messages of one topic (one kind of one stream) a poll decodes; the rest are
            dropped undecoded and counted in ``stats.over_budget``, so a flood from one stream costs little.
    """

    def __init__(
        self, sock: zmq.Socket, clock: Callable[[], float] = time.monotonic, topic_budget: int | None = None
    ) -> None:
        self.sock = sock
        self.poller = zmq.Poller()
        self.poller.register(sock, zmq.POLLIN)
        self.stats = ReceiveStats()
        self.clock = clock
        self.topic_budget = topic_budget

    def poll(self, timeout_ms: int = POLL_MS) -> list[Message]:
        """Wait up to ``timeout_ms`` for messages, then take what is queued (at most `RECV_BATCH` messages, and
        for at most `RECV_BUDGET_S`; the rest wait for the next poll).

        Args:
            timeout_ms: longest wait for the first message.

        Returns:
            The decoded messages, in arrival order; malformed ones are counted in ``stats`` and skipped.
        """
        if not self.poller.poll(timeout_ms):
            return []
        out: list[Message] = []
        deadline = self.clock() + RECV_BUDGET_S
        per_topic: Counter[bytes] = Counter()
        for _ in range(RECV_BATCH):
            try:
                frames, count = self._receive()
            except zmq.Again:
                break
            if self.topic_budget is not None and count == MAX_FRAMES:
                per_topic[frames[0]] += 1
                if per_topic[frames[0]] > self.topic_budget:
                    self.stats.over_budget += 1
                    continue
            try:
                if count > MAX_FRAMES:
                    raise MessageError(f"expected {MAX_FRAMES} frames, got {count}")
                out.append(decode(frames))
                self.stats.received += 1
            except MessageError as err:
                self.stats.malformed += 1
                self.stats.last_error = str(err)
            if self.clock() > deadline:
                break
        return out

    def _receive(self) -> tuple[list[bytes], int]:
        """One message, frame by frame: its first `MAX_FRAMES` frames and how many it had.

        libzmq delivers a multipart message whole or not at all, so once the first frame is here the rest are too;
        they are taken one by one, and the frames of an over-long message past `MAX_FRAMES` are released at once,
        never gathered.

        Raises:
            zmq.Again: nothing is waiting.
        """
        frames = [self.sock.recv(zmq.NOBLOCK)]
        count = 1
        while self.sock.getsockopt(zmq.RCVMORE):
            frame = self.sock.recv(zmq.NOBLOCK, copy=False)  # no copy: a dropped frame never becomes a Python bytes
            count += 1
            if count <= MAX_FRAMES:
                frames.append(frame.bytes)
        return frames, count
