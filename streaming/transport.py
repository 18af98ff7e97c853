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
  stream) a budget of valid messages per poll, beyond which messages are dropped before they are decoded;
- ZeroMQ never says that nobody listens at a connected endpoint, and a PUB socket drops what it sends before the
  subscriber's subscription has reached it, so a sender that must reach its peer connects with ``wait_s``
  (`connect`; the detector waits `CONNECT_WAIT_S`): its socket is an XPUB, which sends as a PUB does and receives
  the peer's subscriptions, and the call returns once the peer subscribed to the checker's input topics;
- a bound XPUB (the checker's output) learns of each new subscriber (`Publisher.new_subscribers`), so the checker
  can greet it: the sign a viewer waits for before it counts on receiving everything;
- beyond loopback, sockets use CURVE (`streaming.curve_keys`): `bind` makes a CURVE server socket, `connect` a
  CURVE client, and a refused handshake is named (`HandshakeWatch`) on the client's side and counted
  (`HandshakeCounter`) on the server's. `check_exposure` refuses to bind beyond loopback without CURVE unless the
  user says ``--insecure``.

Endpoints are ZeroMQ strings: ``tcp://127.0.0.1:5555`` (port 0 or ``*`` picks a free port on bind;
IPv6 addresses in brackets, ``tcp://[::1]:5555``), ``ipc:///tmp/x.sock``, ``inproc://name``. A port or
an ipc path already in use is an `InputError` (one line, exit 2).

Loopback is a literal address in 127.0.0.0/8 or ``::1``; ``ipc://`` and ``inproc://`` stay on this machine. Any
other host is "beyond loopback": ``*``, ``0.0.0.0``, a network address, and also every name (``localhost``, an
interface name such as ``lo``, short forms such as ``127.1``, which libzmq reads as it likes), so the rule never
depends on what a name resolves to. CURVE applies to ``tcp://`` and ``ipc://`` (on ipc it authenticates other local
users' processes); ``inproc://`` has no handshake, so CURVE options there are refused.
"""

from __future__ import annotations

import contextlib
import errno
import ipaddress
import itertools
import os
import re
import socket
import stat
import time
from collections import Counter
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Final

import zmq
from zmq.utils.monitor import parse_monitor_message

from graphs.common.backoff import capped_doubling
from graphs.common.errors import InputError
from streaming.curve_keys import CurveClient, CurveServer
from streaming.messages import INPUT_TOPICS, MAX_MESSAGE_BYTES, Message, MessageError, decode, encode

POLL_MS: Final = 100  # longest a loop blocks in one receive before checking its stop flag
HEARTBEAT_S: Final = 0.5  # detector heartbeat period; the checker's periodic status uses the same
# A checker, or one stream on it, unheard this long is not answering: the checker re-sends every stream's status each
# HEARTBEAT_S, so four periods of silence are no lost message (the view and the dashboard say so).
SILENT_S: Final = 4 * HEARTBEAT_S
# The shortest --stream-timeout a checker takes: one lost heartbeat must not mark a live stream lost. A detector's
# stream silent this long may be marked lost already, so its last heartbeat, if not `ended`, would bring it back.
MIN_STREAM_TIMEOUT_S: Final = 2 * HEARTBEAT_S


def gone_silent(since: float, now: float) -> bool:
    """Nothing heard since ``since`` for `SILENT_S` or more (two readings of one clock): the one rule of the view,
    the dashboard and its log for a checker, or a stream on it, that stopped answering."""
    return now - since >= SILENT_S


# A stream whose status the checker, while answering, has not re-sent for this long is one it let go: it re-sends
# every stream it holds each HEARTBEAT_S and frees an ended or lost one a minute after it went idle (or a restarted
# checker never knew it). A view or a dashboard that kept such streams filled up with old sessions where cameras come
# and go, every one drawn at each refresh.
FORGET_S: Final = 600.0


def let_go(heard: Mapping[str, float], answering_since: float, now: float, forget_s: float = FORGET_S) -> list[str]:
    """The streams of ``heard`` (stream -> when its latest status arrived) whose status has not come for ``forget_s``
    of the checker answering (since ``answering_since``): the one rule of the view's rows and the dashboard's tiles.
    Time without the checker answering does not count: after a long outage every stream looked let go at the
    checker's first message, before it had re-sent those it holds."""
    return [stream for stream, at in heard.items() if now - max(at, answering_since) >= forget_s]


def answering_start(since: float | None, heard: float | None, now: float) -> float:
    """Since when the checker has answered without a silence of `SILENT_S`, once a message arrives at ``now``:
    ``since`` as it was, unless nothing came before (``heard`` None) or the last message came `SILENT_S` ago or more.
    The one rule of the view and the dashboard for the time `let_go` counts."""
    return now if since is None or heard is None or gone_silent(heard, now) else since


LINGER_MS: Final = 0  # unsent messages are discarded on close instead of blocking shutdown
SEND_HWM: Final = 10_000  # queued outgoing messages per peer before PUB drops (never blocks the sender)
RECV_BATCH: Final = 256  # most messages taken per poll, so one busy peer cannot starve the loop
RECV_BUDGET_S: Final = 0.02  # most time one poll spends receiving, so a flood cannot hold the loop
# Messages queued per connected peer before libzmq stops reading from it. A detector sends a few messages a
# second, so 128 is a minute of backlog; at most 128 x 64 KiB = 8 MiB of well-formed traffic waits per peer.
RECV_HWM: Final = 128
VIEW_RECV_HWM: Final = 10_000  # a viewer trusts its checker, whose periodic re-sends come in bursts
MAX_FRAMES: Final = 2  # topic and payload: a message with more is dropped as it is received, never kept
PING_MS: Final = 1000  # a watched connection (detector, view, dashboard) pings its checker this often
PING_TIMEOUT_MS: Final = 5000  # and takes it for gone without an answer for this long (libzmq answers, not Python)
# Longest an XPUB spends reading its subscriptions in one call (`Publisher.new_subscribers`): a peer that subscribes
# in a loop cannot hold the sender; the rest wait for the next call. Read until none is left otherwise: libzmq keeps
# each one queued until it is read, so reading fewer than arrive (256 a call once) let a peer queue gigabytes.
SUBSCRIPTIONS_READ_S: Final = 0.01
# What peers may cost a bound XPUB (the checker's viewers' socket) in subscriptions before it is re-opened, which
# drops every connection and with it everything libzmq holds for them (`Publisher.flood`). libzmq bounds neither: it
# keeps every distinct prefix any peer subscribed to in its subscription tree, about 48 bytes a byte of prefix (40,000
# prefixes of 1 KiB took a checker to 2 GB in 6 s), and every subscription message, repeats included, until it is
# read (2 million repeats: 1.8 GB).
# Distinct prefixes since the socket was opened, each counted as its length plus `PREFIX_COST`: 256 streams with 6
# prefixes of the longest topic each are 165 kB; the tree then holds at most about 25 MB.
SUBSCRIPTION_BYTES: Final = 512 * 1024
PREFIX_COST: Final = 32  # what one more prefix costs beyond its bytes (the tree's nodes, the set here)
# Subscription messages (and anything else peers send up) read within one `SUBSCRIPTION_WINDOW_S`: a viewer sends a
# few per connection, so this is thousands of viewers connecting at once; 20 MB of queued messages at most.
SUBSCRIPTIONS_PER_WINDOW: Final = 20_000
SUBSCRIPTION_WINDOW_S: Final = 1.0
# That count is of messages read, and the checker reads for `SUBSCRIPTIONS_READ_S` a loop: peers that send faster
# than that (60,000 subscriptions of 900 bytes a second were read at under 20,000) were never refused while libzmq
# queued the rest, 800 MB in 14 s. A guarded XPUB whose reads found subscriptions still coming at the end of their
# time, call after call, for a whole `SUBSCRIPTION_WINDOW_S`, is flooded too: what waits is at most a window's worth.
# An XPUB's subscriptions are read every this many sends (a read that finds none costs about as much as a send).
READ_SUBSCRIPTIONS_EVERY: Final = 64
HANDSHAKE_CHECK_S: Final = 0.25  # a watched publisher reads its handshake events at most this often
SUBSCRIBED: Final = b"\x01"  # the first byte of a subscription message an XPUB receives (0: an unsubscription)
CONNECT_WAIT_S: Final = 10.0  # longest a detector waits for its checker to answer before it refuses to run
# libzmq drops a frame larger than this, and the connection of the peer that sent it, before Python sees it. Up to
# it, an oversized payload is received and counted as malformed (a sender's bug is reported, not silent). libzmq
# holds a whole multipart message before delivering its first frame, so this bounds the memory of each frame.
HARD_MAX_BYTES: Final = 2 * MAX_MESSAGE_BYTES
# What an XPUB takes from a peer in one frame: its handshake (a CURVE client's is about 280 bytes, more with
# ZMQ_METADATA properties: room for about 700 bytes of them) and its subscriptions (a byte and a topic prefix, at most
# MAX_TOPIC_BYTES long). libzmq keeps every message sent up to an XPUB, however large, until the application reads
# it, and builds its subscription tree from every prefix: 100 kB frames or 5 kB prefixes took a checker to
# gigabytes. A larger frame drops the connection of the peer that sent it.
XPUB_MAX_BYTES: Final = 1024

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


KEYS_HINT: Final = "make keys with 'stream-detect keys --out keys'"


def _tcp_host(endpoint: str) -> str | None:
    """The host part of a ``tcp://`` endpoint (brackets removed), None for other transports."""
    if not endpoint.startswith("tcp://"):
        return None
    host = endpoint[len("tcp://") :].rsplit(":", 1)[0]
    return host[1:-1] if host.startswith("[") and host.endswith("]") else host


def unresolved_host(endpoint: str) -> str | None:
    """The host name of a ``tcp://`` endpoint when this machine's resolver says no such name exists, else None.

    libzmq resolves a name in the background and retries for ever, so a typo looked like a peer that is not there.
    Only a definite answer counts: a resolver that cannot be reached now (a network still coming up) is no typo. In
    libzmq's ``tcp://SOURCE;HOST:PORT`` form the host is the part after the semicolon.
    """
    host = _tcp_host(endpoint)
    host = host.rsplit(";", 1)[-1] if host else host
    if not host or host == "*":
        return None
    try:
        ipaddress.ip_address(host.strip("[]"))
        return None
    except ValueError:
        pass
    try:
        socket.getaddrinfo(host, None)
    except UnicodeError:  # a label the resolver cannot even encode (over 63 characters): asked of no server
        return host
    except socket.gaierror as err:
        return host if err.errno == socket.EAI_NONAME else None
    return None


WILDCARD_HOSTS: Final = frozenset({"*", "0.0.0.0", "::"})  # a bind on every interface, so on each address too


def same_endpoint(a: str, b: str) -> bool:
    """Whether two checked endpoints to bind name one address, so the second bind could only fail: the same tcp port
    on the same host (or on a wildcard host, which takes the port on every address), the same ipc path (``./x`` and
    ``x`` alike), or the same inproc name. A tcp port of 0 or ``*`` (a free one each) never clashes.

    Args:
        a: one endpoint.
        b: the other.

    Returns:
        True when binding both would take one address twice.
    """
    for transport in ("ipc://", "inproc://"):
        if a.startswith(transport) and b.startswith(transport):
            x, y = a[len(transport) :], b[len(transport) :]
            if transport == "ipc://" and not x.startswith("@") and "*" not in (x, y):
                x, y = os.path.abspath(x), os.path.abspath(y)
            return x == y and x != "*"
    host_a, host_b = _tcp_host(a), _tcp_host(b)
    if host_a is None or host_b is None:
        return False
    port_a, port_b = (0 if port == "*" else int(port) for port in (a.rsplit(":", 1)[1], b.rsplit(":", 1)[1]))
    if port_a == 0 or port_a != port_b:
        return False
    return host_a == host_b or bool({host_a, host_b} & WILDCARD_HOSTS)


def is_local(endpoint: str) -> bool:
    """Whether an endpoint stays on this machine: ``ipc://``, ``inproc://``, or tcp on a literal loopback address.

    Args:
        endpoint: a checked endpoint.

    Returns:
        False for ``*``, ``0.0.0.0``, any other address, and every host name (names are never resolved).
    """
    host = _tcp_host(endpoint)
    if host is None:
        return endpoint.startswith(("ipc://", "inproc://"))
    try:
        address = ipaddress.ip_address(host)
    except ValueError:  # a name, an interface, '*', or a short form ('127.1', '0') that libzmq would accept
        return False
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return address.ipv4_mapped.is_loopback
    return address.is_loopback


def check_exposure(endpoint: str, option: str, curve: bool, insecure: bool) -> None:
    """Refuse to bind beyond loopback without CURVE (anyone on the network could forge key-steps or read alerts),
    and refuse CURVE on ``inproc://`` (no handshake there, so it would silently not apply).

    Args:
        endpoint: where a socket will bind.
        option: the option it came from, named in the error.
        curve: the socket will use CURVE.
        insecure: the user accepted an open socket beyond loopback (``--insecure``).

    Raises:
        InputError: the endpoint is beyond loopback without CURVE or ``insecure``, or CURVE on inproc.
    """
    if curve and endpoint.startswith("inproc://"):
        raise InputError(f"{option} {endpoint}: CURVE does not apply to inproc:// (no handshake); use tcp:// or ipc://")
    if curve or insecure or is_local(endpoint):
        return
    host = _tcp_host(endpoint) or ""
    try:
        ipaddress.ip_address(host)
        where = "is reachable beyond this machine"
    except ValueError:
        where = ("names its host by name (names are not resolved: only 127.0.0.1 or [::1] counts as this machine)"
                 if host != "*" else "is reachable beyond this machine")
    raise InputError(
        f"{option} {endpoint} {where}: anyone there could send forged key-steps and read the alerts; {KEYS_HINT} and "
        "pass --curve-secret keys/checker.key_secret --curve-clients keys/clients (bind 127.0.0.1 to stay on this "
        "machine, or --insecure on a network you trust)"
    )


def _configure(sock: zmq.Socket, endpoint: str, recv_hwm: int = RECV_HWM) -> None:
    sock.setsockopt(zmq.LINGER, LINGER_MS)
    sock.setsockopt(zmq.MAXMSGSIZE, XPUB_MAX_BYTES if sock.type == zmq.XPUB else HARD_MAX_BYTES)
    if sock.type in (zmq.PUB, zmq.XPUB):
        sock.setsockopt(zmq.SNDHWM, SEND_HWM)
        if sock.type == zmq.XPUB:  # every subscriber's subscription, not only a topic's first: each one is greeted
            sock.setsockopt(zmq.XPUB_VERBOSE, 1)
    else:
        sock.setsockopt(zmq.RCVHWM, recv_hwm)
    if endpoint.startswith("tcp://["):  # libzmq refuses IPv6 addresses unless asked ("No such device")
        sock.setsockopt(zmq.IPV6, 1)


def _ipc_path(endpoint: str) -> str | None:
    """The socket file of an ``ipc://`` endpoint (None: another transport, or the abstract namespace, where the
    kernel refuses a second bind itself and no file is left behind)."""
    path = endpoint[len("ipc://") :] if endpoint.startswith("ipc://") else ""
    return path if path and not path.startswith("@") else None


# What a socket that could not be made for want of file handles or kernel memory fails with.
OUT_OF_HANDLES: Final = frozenset({errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM})


def _connect_errno(path: str, timeout: float) -> int:
    """The errno of connecting to the Unix socket file ``path`` (0: a process listening there took the connection);
    ``timeout`` 0 does not wait."""
    try:
        probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    except OSError as err:  # no file handle left for the probe (EMFILE)
        return err.errno or errno.EINVAL
    try:
        probe.settimeout(timeout)
        return probe.connect_ex(path)
    except OSError as err:  # raised rather than returned (a path too long for a Unix socket, a timeout)
        return err.errno or errno.EINVAL
    finally:
        probe.close()


def _ipc_in_use(endpoint: str) -> bool:
    """Whether a process listens on an ``ipc://`` path (libzmq would silently take the path over): it took the
    probe's connection, its queue of connections not yet accepted is full (EAGAIN), or the file is a socket this
    process may not connect to (EACCES, EPERM: another user's, which libzmq's bind would remove wherever the folder
    lets it); no file, a stale file nobody listens on, or not a socket: not in use.

    Raises:
        zmq.ZMQError: no file handle or kernel memory left to probe with (EMFILE, ENFILE, ENOBUFS, ENOMEM):
            nothing can tell, and libzmq's bind removes the file before it finds no handle for its own socket,
            whoever listens on it. (As an OSError it ended the checker's re-open of its ipc:// sockets, out of
            handles, in a traceback.)
    """
    path = _ipc_path(endpoint)
    if path is None:
        return False
    found = _connect_errno(path, 1.0)
    if found in OUT_OF_HANDLES:
        raise zmq.ZMQError(found)
    if found in (errno.EACCES, errno.EPERM):
        # Only a socket file that is there is another user's: a folder on the way that this process may not enter
        # refuses the probe too, and there the bind's own error ("Permission denied") says what is wrong.
        return ipc_file(endpoint) is not None
    return found in (0, errno.EAGAIN)


@dataclass(frozen=True)
class IpcFile:
    """The socket file a bind to an ``ipc://`` path made: libzmq (4.3) never removes it, so a stopped checker left
    ``in.sock`` and ``out.sock`` behind in its folder."""

    path: str
    identity: tuple[int, int]  # (st_dev, st_ino) as bound: a file another process bound there since is not ours


def ipc_file(endpoint: str) -> IpcFile | None:
    """The socket file behind an endpoint just bound (None: another transport, the abstract namespace, no file)."""
    path = _ipc_path(endpoint)
    if path is None:
        return None
    try:
        found = os.lstat(path)
    except OSError:
        return None
    return IpcFile(path, (found.st_dev, found.st_ino)) if stat.S_ISSOCK(found.st_mode) else None


IPC_RELEASE_S: Final = 0.5  # longest wait for libzmq's I/O thread to close a listener after its socket was closed


def _listened_on(path: str) -> bool | None:
    """Whether a process listens on a Unix socket file: only a refused connection says that none does (a full
    backlog or a permission error do not); None: no handle or memory left to probe it, nothing can tell."""
    found = _connect_errno(path, 0.0)
    return None if found in OUT_OF_HANDLES else found != errno.ECONNREFUSED


def remove_ipc_file(file: IpcFile | None) -> None:
    """Remove a socket file once its socket is closed, unless another process has bound the path since, whose file
    it would take away: the file is another inode, or someone listens on it.

    The inode alone does not tell: ext4 hands the number of a file just freed to the next one made in the folder, so
    a checker restarted at the same path while the old one was stopping (libzmq unlinks the old file and binds) got
    the old file's ``(st_dev, st_ino)``, and the old one removed the new one's live socket file. libzmq closes the
    listener in its I/O thread after ``close`` returns: its own listener is waited for (`IPC_RELEASE_S`, a few
    probes); one still listening after that is another process's, and its file is left alone.
    """
    if file is None:
        return
    deadline = time.monotonic() + IPC_RELEASE_S
    delay = 0.002
    with contextlib.suppress(OSError):  # gone already, or a folder that became unwritable: nothing to clean
        while True:
            found = os.lstat(file.path)
            if (found.st_dev, found.st_ino) != file.identity:
                return
            listened = _listened_on(file.path)
            if listened is None:
                # Out of handles (peers holding them at a checker's ports): probed again and again, a re-open that
                # failed half-way held the checker's loop IPC_RELEASE_S at every try. Left: the next bind takes
                # over a file nobody listens on, and the checker's end removes it.
                return
            if not listened:
                os.unlink(file.path)
                return
            if time.monotonic() + delay > deadline:
                return
            time.sleep(delay)
            delay *= 2


def _listener(endpoint: str, backlog: int) -> socket.socket | None:
    """A TCP socket listening at ``endpoint``, made as libzmq makes its own (address reused, IPv6 taking IPv4 too,
    a link-local address's zone, the socket's backlog), for libzmq to take (``ZMQ_USE_FD``); None for an endpoint
    that is not tcp at a literal address and port.

    libzmq 4.3.5 looks for an interface of the host's name (``getifaddrs``) on every tcp bind, and aborts the whole
    process when that finds no file handle left (ip_resolver.cpp:542); a checker re-opening its sockets while peers
    hold its handles would die there, about one try in ten. Made here, a missing handle is an `OSError`.

    Raises:
        OSError: the socket could not be made, bound or listened on.
    """
    host, port = _tcp_host(endpoint) or "", endpoint.rsplit(":", 1)[-1]
    try:
        address = ipaddress.ip_address(host.split("%", 1)[0])
    except ValueError:
        return None
    if not port.isdigit():
        return None
    family = socket.AF_INET6 if address.version == 6 else socket.AF_INET
    # Numeric only (no name is looked up), and with the zone of a link-local address (LAST_ENDPOINT names it:
    # tcp://[fe80::1%eth0]:PORT): a (host, port) pair binds scope 0, which the kernel refuses ("Invalid argument"),
    # so every re-open of a checker bound there failed for good.
    try:
        where = socket.getaddrinfo(host, int(port), family, socket.SOCK_STREAM, 0, socket.AI_NUMERICHOST)[0][4]
    except socket.gaierror:
        # A zone's interface is looked up with a socket of its own: with no handle left that fails as "Name or
        # service not known". A socket of the listener's kind says so (EMFILE) when that is why.
        socket.socket(family, socket.SOCK_STREAM).close()
        raise
    listener = socket.socket(family, socket.SOCK_STREAM)
    try:
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        if family == socket.AF_INET6:
            listener.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)
        listener.bind(where)
        listener.listen(backlog)
    except BaseException:
        listener.close()
        raise
    return listener


class EndpointInUse(InputError):
    """An endpoint to bind is taken: by another program, or (bound again, `bind`'s ``again``) by this process's own
    listener, just closed, that libzmq has not let go yet (it closes listeners in its I/O thread, a few ms later)."""


def bind(
    ctx: zmq.Context, kind: int, endpoint: str, option: str = "--bind", curve: CurveServer | None = None,
    again: bool = False,
) -> tuple[zmq.Socket, str]:
    """Create a socket and bind it.

    Args:
        ctx: the ZeroMQ context.
        kind: socket type (``zmq.XPUB`` or ``zmq.PUB``, ``zmq.SUB``).
        endpoint: where to bind; a tcp port of 0 picks a free one.
        option: the option the endpoint came from, named in errors.
        curve: the server's keys: the socket is a CURVE server, and the context's ZAP handler
            (`streaming.curve_keys.start_authenticator`, started before) decides which clients get in.
        again: the endpoint is one bound before (``LAST_ENDPOINT``: a literal address and port), bound again in a
            process that may be out of file handles: a tcp listener is made here (`_listener`).

    Returns:
        ``(socket, endpoint actually bound)``.

    Raises:
        zmq.ZMQError: no file handle or kernel memory left for the socket, or with ``again`` to bind it
            (`OUT_OF_HANDLES`).
        EndpointInUse: the endpoint is in use (with ``again``: taken by another program meanwhile, or not let go yet
            by this process's listener just closed).
        InputError: the endpoint cannot be bound.
    """
    check_endpoint(endpoint, option)
    # Not "another checker": any program may hold it (the dashboard's port given as the checker's, say).
    other = {"ipc": "path", "inproc": "name"}.get(endpoint.split("://", 1)[0], "port")
    # Bound again, the endpoint was this process's a moment ago, and its owner (a checker re-opening its sockets)
    # tries it again until it is free: another one would reach no client.
    in_use = (f"{option} {endpoint}: address already in use (" + (
        "another program took it since it was bound here: stop that program, and it is bound again)" if again
        else f"another program is using it: pick another {other})"))
    if endpoint.startswith("ipc://") and _ipc_in_use(endpoint):
        raise EndpointInUse(in_use)
    target = endpoint[:-2] + ":*" if endpoint.startswith("tcp://") and endpoint.endswith(":0") else endpoint
    sock = ctx.socket(kind)
    listener = None
    try:
        _configure(sock, endpoint)
        if curve is not None:
            sock.setsockopt(zmq.CURVE_SERVER, 1)
            sock.setsockopt(zmq.CURVE_SECRETKEY, curve.secret)
            sock.setsockopt(zmq.CURVE_PUBLICKEY, curve.public)
        if again and (listener := _listener(target, sock.getsockopt(zmq.BACKLOG))) is not None:
            sock.setsockopt(zmq.USE_FD, listener.fileno())
        sock.bind(target)
    except (zmq.ZMQError, OSError) as err:
        sock.close()
        if listener is not None:
            listener.close()
        if again and err.errno in OUT_OF_HANDLES:  # not the endpoint's fault: the caller tries again later
            raise zmq.ZMQError(err.errno) from None
        if err.errno == errno.EADDRINUSE:
            raise EndpointInUse(in_use) from None
        raise InputError(f"{option} {endpoint}: cannot bind ({err.strerror})") from None
    if listener is not None:
        listener.detach()  # libzmq's now: it closes it with the socket
    last = sock.getsockopt(zmq.LAST_ENDPOINT)
    return sock, last.decode() if isinstance(last, bytes) else str(last)


def connect(
    ctx: zmq.Context,
    kind: int,
    endpoint: str,
    option: str = "--connect",
    wait_s: float = 0.0,
    recv_hwm: int = RECV_HWM,
    curve: CurveClient | None = None,
    topics: tuple[bytes, ...] = INPUT_TOPICS,
) -> zmq.Socket:
    """Create a socket and connect it (ZeroMQ reconnects by itself if the peer restarts).

    ZeroMQ connects in the background and never says that nobody is there: a PUB socket aimed at the
    wrong endpoint silently drops everything. With ``wait_s`` the first connection must be made (a
    ZeroMQ handshake with the peer) within that many seconds, or the call fails; a handshake the peer refuses
    (a key it does not allow, the wrong checker key, CURVE on one side only) fails at once, saying which.

    A PUB socket drops what it sends until the subscriber's subscriptions have reached it, and cannot tell when
    that is; so with ``wait_s`` a PUB is opened as an XPUB (it sends exactly as a PUB does, and receives the
    subscriptions as messages) and the call also waits, within the same ``wait_s``, until the peer has subscribed
    to every prefix of ``topics``: from then on nothing sent is lost for want of a subscription.

    Args:
        ctx: the ZeroMQ context.
        kind: socket type.
        endpoint: the peer's bound endpoint.
        option: the option the endpoint came from, named in errors.
        wait_s: if > 0, wait up to this long for the peer to answer (and a PUB for its subscriptions).
        recv_hwm: messages queued before libzmq stops reading (`RECV_HWM`; a viewer uses `VIEW_RECV_HWM`).
        curve: this client's CURVE keys and the checker's public key; None: no encryption (NULL mechanism).
        topics: the prefixes a waiting PUB waits to see subscribed (default: those the checker's input takes).

    Returns:
        The connected socket (an XPUB for a PUB with ``wait_s``: send to it through a `Publisher`, which reads
        the subscriptions that come again after every reconnection).

    Raises:
        InputError: a bad endpoint, CURVE on inproc, a refused handshake, or no peer answered (or subscribed)
            within ``wait_s``.
    """
    if wait_s <= 0:
        return _open(ctx, kind, endpoint, option, recv_hwm, curve, watch=False)[0]
    sock, watch = connect_waiting(ctx, kind, endpoint, option, wait_s, recv_hwm, curve, topics)
    watch.close()
    return sock


def connect_waiting(
    ctx: zmq.Context,
    kind: int,
    endpoint: str,
    option: str,
    wait_s: float,
    recv_hwm: int = RECV_HWM,
    curve: CurveClient | None = None,
    topics: tuple[bytes, ...] = INPUT_TOPICS,
) -> tuple[zmq.Socket, HandshakeWatch]:
    """`connect` with ``wait_s``, and the `HandshakeWatch` left on the socket: a detector checks it as it runs
    (`Publisher`), so a key revoked while it is connected ends it with the refusal's line instead of a run that
    goes on sending into a checker that turns every handshake away.

    Args:
        ctx / kind / endpoint / option / recv_hwm / curve / topics: as `connect`.
        wait_s: longest wait for the peer's answer (and a PUB's subscriptions); > 0.

    Returns:
        ``(socket, watch)``; close the watch before the socket.

    Raises:
        InputError: as `connect`.
    """
    if kind == zmq.PUB:
        kind = zmq.XPUB
    sock, watch = _open(ctx, kind, endpoint, option, recv_hwm, curve, watch=True)
    assert watch is not None
    deadline = time.monotonic() + wait_s
    try:
        if not watch.wait(wait_s):
            if watch.reconnects:  # something there, closing each connection before its handshake
                raise InputError(f"{option} {endpoint}: the peer there closed every connection before its handshake "
                                 f"ended ({watch.port_hint()})")
            raise InputError(f"{option} {endpoint}: nothing answered within {wait_s:g} s (is the checker there?)")
        if kind == zmq.XPUB and not _await_subscriptions(sock, topics, deadline, watch):
            raise InputError(f"{option} {endpoint}: the peer answered but did not subscribe to "
                             f"{b', '.join(topics).decode()} within {wait_s:g} s (is it the checker's --bind "
                             "endpoint?)")
    except BaseException:
        watch.close()
        sock.close()
        raise
    return sock, watch


def _await_subscriptions(
    sock: zmq.Socket, topics: tuple[bytes, ...], deadline: float, watch: HandshakeWatch
) -> bool:
    """Read an XPUB's subscription messages (byte 1, then the prefix) until every topic is subscribed.

    Returns:
        False if the deadline passed first.

    Raises:
        InputError: a later handshake was refused meanwhile (the peer changed its keys).
    """
    wanted = set(topics)
    while wanted:
        left_ms = int((deadline - time.monotonic()) * 1000)
        if left_ms <= 0 or not sock.poll(left_ms):
            return False
        message = sock.recv()
        if message[:1] == SUBSCRIBED:
            wanted.discard(message[1:])
        watch.check()
    return True


def connect_watched(
    ctx: zmq.Context,
    kind: int,
    endpoint: str,
    option: str = "--connect",
    recv_hwm: int = RECV_HWM,
    curve: CurveClient | None = None,
) -> tuple[zmq.Socket, HandshakeWatch]:
    """`connect` without waiting, with a `HandshakeWatch` that stays on the socket (a viewer checks it as it runs:
    it may start before the checker, and must still learn that the checker refuses it).

    Args:
        ctx: the ZeroMQ context.
        kind: socket type.
        endpoint: the peer's bound endpoint.
        option: the option the endpoint came from, named in errors.
        recv_hwm: messages queued before libzmq stops reading.
        curve: this client's CURVE keys; None: no encryption.

    Returns:
        ``(socket, watch)``; close the watch before the socket.
    """
    sock, watch = _open(ctx, kind, endpoint, option, recv_hwm, curve, watch=True)
    assert watch is not None
    return sock, watch


def _open(
    ctx: zmq.Context,
    kind: int,
    endpoint: str,
    option: str,
    recv_hwm: int,
    curve: CurveClient | None,
    watch: bool,
) -> tuple[zmq.Socket, HandshakeWatch | None]:
    """A configured socket connecting to ``endpoint``, watched from before its first handshake if asked."""
    check_endpoint(endpoint, option, peer=True)
    unknown = unresolved_host(endpoint)  # the detector, the view and the dashboard alike, before any wait
    if unknown is not None:
        raise InputError(f"{option} {endpoint}: no host is named {unknown!r} here (the name does not resolve: a "
                         "typo, or a name only another network knows?)")
    if curve is not None and endpoint.startswith("inproc://"):
        raise InputError(f"{option} {endpoint}: CURVE does not apply to inproc:// (no handshake)")
    sock = ctx.socket(kind)
    _configure(sock, endpoint, recv_hwm)
    if watch:
        # ZMTP pings: a checker whose host vanished (power, cable, a frozen process) closes nothing, and TCP alone
        # would take minutes to say so; an unanswered ping cuts the connection, which the watch then sees.
        sock.setsockopt(zmq.HEARTBEAT_IVL, PING_MS)
        sock.setsockopt(zmq.HEARTBEAT_TIMEOUT, PING_TIMEOUT_MS)
    if curve is not None:
        curve.apply(sock)
    # The monitor must watch before the connection starts, or a fast handshake is missed.
    watcher = HandshakeWatch(sock, endpoint, option, curve is not None) if watch else None
    try:
        sock.connect(endpoint)
    except zmq.ZMQError as err:
        if watcher is not None:
            watcher.close()
        sock.close()
        raise InputError(f"{option} {endpoint}: cannot connect ({err.strerror})") from None
    return sock, watcher


_HANDSHAKE_EVENTS: Final = (
    zmq.EVENT_HANDSHAKE_SUCCEEDED
    | zmq.EVENT_DISCONNECTED
    | zmq.EVENT_HANDSHAKE_FAILED_AUTH
    | zmq.EVENT_HANDSHAKE_FAILED_PROTOCOL
    | zmq.EVENT_HANDSHAKE_FAILED_NO_DETAIL
)


class HandshakeRefused(InputError):
    """The peer refused this client's handshake: its key is not allowed (or no longer is), the wrong checker key,
    CURVE on one side only. A sink that meets it ends the run (`streaming.detector.sinks.Fanout`): it is no defect
    of one message."""


# A running client ends at the first refusal of its key (ZAP said no: revoked) or of its mechanism; any other failed
# handshake may be a checker killed mid-handshake, so it ends the client only when this many come with no success
# between them (a checker restarted with another key pair).
FAILED_HANDSHAKES_TO_END: Final = 3


RECONNECT_FIRST_S: Final = 0.1  # the wait before connecting again after a refused handshake, doubled each time
RECONNECT_MAX_S: Final = 5.0


def reconnect_delay(failed_in_row: int) -> float:
    """Seconds to wait before connecting again after ``failed_in_row`` failed handshakes in a row: none after a
    connection that had succeeded (a checker restart, a dropped oversized frame), then 0.1 s doubled up to 5 s, so
    that a client the checker refuses does not knock (and get counted and logged) several times a second."""
    if failed_in_row <= 0:
        return 0.0
    return capped_doubling(RECONNECT_FIRST_S, failed_in_row - 1, RECONNECT_MAX_S)


_monitors = itertools.count()  # each monitor's own inproc endpoint: a socket's file number is reused after it closes


def open_monitor(sock: zmq.Socket, events: int) -> zmq.Socket:
    """A PAIR socket receiving ``sock``'s monitor events (``zmq_socket_monitor``), its queue unbounded.

    libzmq's network thread sends each event to the monitor and blocks while the monitor's queue is full (the two
    sides' high-water marks summed, 2,000 events by default): a peer that opened and closed some 3,000 connections
    without a handshake froze every socket of the process until the loop had read the events, and a checker told to
    stop then hung for good in ``disable_monitor``, which waits for that blocked send. With no receive limit the send
    never blocks (for inproc, a limit of 0 on either side leaves the pipe unbounded); the loop reads the events each
    turn (`HandshakeCounter.refused`, `HandshakeWatch.check`). Each waiting event costs about 120 bytes (libzmq 4.3.5:
    two messages), so connections refused faster than the loop reads them grow the process's memory meanwhile.
    """
    endpoint = f"inproc://monitor-{next(_monitors)}"
    # The reader first: made after the monitor was on and refused (no socket or file handle left), it left a monitor
    # nobody reads, whose first event blocked the network thread for good (and `disable_monitor` with it).
    monitor = sock.context.socket(zmq.PAIR)
    watching = False
    try:
        monitor.setsockopt(zmq.RCVHWM, 0)  # before connecting: the pipe's limit is fixed when it is made
        sock.monitor(endpoint, events)
        watching = True
        monitor.connect(endpoint)
    except zmq.ZMQError:
        if watching:  # on, and no reader: turned off, as above
            sock.disable_monitor()
        monitor.close()
        raise
    return monitor


class HandshakeWatch:
    """Watches a connecting socket's handshakes (a ZeroMQ socket monitor) and names a refusal.

    What a client sees when the checker turns it away: its key is not in the checker's client folder (ZAP status
    400), it has the wrong checker key (the checker cannot decrypt it and hangs up), or only one side uses CURVE
    (mechanism mismatch). Each becomes one `InputError` line saying what to fix.

    A connection the peer cut is made again (`reconnects` counts them): libzmq reconnects by itself after a peer
    restart, but not after it dropped a message over the size limit (``MAXMSGSIZE``, a protocol error) nor after a
    refused key, and a checker that sent one oversized frame would otherwise leave its viewer deaf for good. After a
    connection that had succeeded it is made again at once; after refused handshakes, later and later
    (`reconnect_delay`), by `check`.

    Args:
        sock: the socket, not connected yet.
        endpoint: where it connects (named in errors).
        option: the option the endpoint came from.
        curve: whether this side uses CURVE.
    """

    def __init__(self, sock: zmq.Socket, endpoint: str, option: str, curve: bool) -> None:
        self.sock = sock
        self.endpoint = endpoint
        self.option = option
        self.curve = curve
        self.monitor = open_monitor(sock, _HANDSHAKE_EVENTS)
        self.succeeded = False
        # When a connection that had succeeded was cut (wall time; None while connected): a peer that never came
        # back by the end of a run leaves what was sent since unheard, which the run then says (`checker_gone`).
        self.lost_at: float | None = None
        # When (monotonic) the last connection that had succeeded was cut, kept once another succeeds: a detector
        # sends again the ends of the streams that ended about then, which no checker heard (`Publisher.rejoined`).
        self.cut_at: float | None = None
        self.reconnects = 0
        self.failed_in_row = 0  # failed handshakes since the last that succeeded (`check`)
        self._reconnect_at: float | None = None  # when `check` connects again (after refused handshakes)

    def wait(self, timeout_s: float) -> bool:
        """Wait for the first successful handshake.

        Args:
            timeout_s: longest wait.

        Returns:
            True once a handshake succeeded; False if none did within ``timeout_s``.

        Raises:
            InputError: the peer refused the handshake.
        """
        deadline = time.monotonic() + timeout_s
        while not self.succeeded:
            left_ms = int((deadline - time.monotonic()) * 1000)
            if left_ms <= 0 or not self.monitor.poll(left_ms):
                return False
            self.check()
        return True

    def check(self, running: bool = False) -> None:
        """Read the handshake events that arrived (never blocks); a refusal raises.

        Args:
            running: the client runs already: a refusal of its key or of its mechanism raises at once, another
                failed handshake only as the `FAILED_HANDSHAKES_TO_END`-th in a row (False: any failure raises,
                as when connecting, where it names the mistake).

        Raises:
            HandshakeRefused: the peer refused a handshake.
        """
        try:
            for event, value in _monitor_events(self.monitor):
                self._take(event, value, running)
        finally:  # after the queued events: a disconnection that came during the wait is not the new connection's
            if self._reconnect_at is not None and time.monotonic() >= self._reconnect_at:
                self._reconnect_at = None
                self.sock.connect(self.endpoint)

    def _take(self, event: int, value: int, running: bool) -> None:
        """One handshake event (`check`)."""
        if event == zmq.EVENT_HANDSHAKE_SUCCEEDED:
            self.succeeded, self.failed_in_row, self.lost_at = True, 0, None
            if self._reconnect_at is not None:
                # A connection libzmq went on retrying by itself after the disconnect (a handshake that failed below
                # the key check, libzmq issue 4052) got in, but carries no messages: connect now, not after the wait.
                self._reconnect_at = time.monotonic()
        elif event == zmq.EVENT_DISCONNECTED:
            if self._reconnect_at is not None:
                return  # a retry libzmq made by itself: this watch connects again when due
            if self.succeeded and self.lost_at is None:
                self.lost_at, self.cut_at = time.time(), time.monotonic()
            self.reconnects += 1
            with contextlib.suppress(zmq.ZMQError):  # ENOENT: libzmq dropped the endpoint itself (a refused key)
                self.sock.disconnect(self.endpoint)
            delay = reconnect_delay(self.failed_in_row)
            if delay > 0:
                self._reconnect_at = time.monotonic() + delay
            else:
                self.sock.connect(self.endpoint)
        else:
            self.failed_in_row += 1
            mismatch = value == zmq.PROTOCOL_ERROR_ZMTP_MECHANISM_MISMATCH
            certain = event == zmq.EVENT_HANDSHAKE_FAILED_AUTH or (
                event == zmq.EVENT_HANDSHAKE_FAILED_PROTOCOL and mismatch)
            if not running or certain or self.failed_in_row >= FAILED_HANDSHAKES_TO_END:
                raise HandshakeRefused(self._refusal(event, value))

    def _refusal(self, event: int, value: int) -> str:
        where = f"{self.option} {self.endpoint}"
        if event == zmq.EVENT_HANDSHAKE_FAILED_AUTH:
            return (f"{where}: the checker refused this client's key (put its public key, clients/NAME.key, in the "
                    "checker's --curve-clients folder, or check --curve-secret)")
        mismatch = event == zmq.EVENT_HANDSHAKE_FAILED_PROTOCOL and value == zmq.PROTOCOL_ERROR_ZMTP_MECHANISM_MISMATCH
        if self.curve and mismatch:
            return f"{where}: the checker does not use CURVE; drop --curve-server and --curve-secret"
        if mismatch:
            return (f"{where}: the checker uses CURVE: pass --curve-server checker.key and --curve-secret with this "
                    "client's .key_secret file")
        port = self.port_hint()
        if self.curve:
            return (f"{where}: the checker did not accept the CURVE handshake ({port} Is --curve-server the public "
                    "key of the checker at that address, and does that checker use CURVE?)")
        return (f"{where}: the handshake failed ({port} If that checker uses CURVE, pass --curve-server checker.key "
                "and --curve-secret with this client's .key_secret file)")

    def port_hint(self) -> str:
        """Which of the checker's two endpoints this client wants: the other one breaks every handshake (its socket
        type does not pair with this one), which a user who mixed up the two ports took for a CURVE matter."""
        ours, theirs = ("--publish", "--bind") if self.sock.type == zmq.SUB else ("--bind", "--publish")
        return f"is it the checker's {ours} endpoint, not its {theirs} one?"

    def close(self) -> None:
        """Stop watching (the socket stays open)."""
        if not self.sock.closed:
            self.sock.disable_monitor()
        self.monitor.close()


def _monitor_events(monitor: zmq.Socket, most: int | None = None) -> Iterator[tuple[int, int]]:
    """The events queued on a socket monitor, ``(event, value)``, without blocking (at most ``most`` of them)."""
    taken = 0
    while most is None or taken < most:
        try:
            frames = monitor.recv_multipart(zmq.NOBLOCK)
        except zmq.Again:
            return
        taken += 1
        parsed = parse_monitor_message(frames)
        yield int(parsed["event"]), int(parsed["value"])


# What a server counts as a refused handshake: ZAP said no (a key not allowed), the handshake failed (no CURVE,
# another server's key, another security mechanism), or the connection closed before its handshake ended. The last
# is needed: a client that finds a mechanism it does not speak in the server's greeting may hang up before the server
# has read the client's, and the server then sees a closed connection, not a mismatch. A port probe counts too. A
# peer of a socket type the server does not pair with (PUSH, DEALER, ...) is counted the same way when it hangs up
# first; when the server hangs up first, libzmq raises no event at all and nothing counts it.
_REFUSED_EVENTS: Final = (
    zmq.EVENT_HANDSHAKE_FAILED_AUTH | zmq.EVENT_HANDSHAKE_FAILED_PROTOCOL | zmq.EVENT_HANDSHAKE_FAILED_NO_DETAIL
)
MONITOR_EVENTS_PER_CALL: Final = 1024  # a client refused in a loop cannot hold the server's loop


class HandshakeCounter:
    """The handshakes a bound socket refused, and why (a socket monitor on the server's side).

    libzmq refuses a client with another server's key or without CURVE before ZAP is asked, so counting ZAP denials
    alone would miss them; the monitor sees every refusal.

    Args:
        sock: a bound socket.
    """

    def __init__(self, sock: zmq.Socket) -> None:
        self.sock = sock
        self.endpoint = sock.getsockopt_string(zmq.LAST_ENDPOINT)
        self.curve = bool(sock.getsockopt(zmq.CURVE_SERVER))
        self.monitor = open_monitor(sock, _REFUSED_EVENTS)

    def refused(self) -> list[str]:
        """The handshakes refused since the last call, one reason each (never blocks)."""
        return [self._reason(event, value) for event, value in _monitor_events(self.monitor, MONITOR_EVENTS_PER_CALL)]

    def _reason(self, event: int, value: int) -> str:
        if event == zmq.EVENT_HANDSHAKE_FAILED_AUTH:
            return "a client key that is not in the client folder"
        if event == zmq.EVENT_HANDSHAKE_FAILED_NO_DETAIL:  # what may have closed it depends on this socket's security
            mismatch = ("a client without CURVE keys" if self.curve
                        else "a client with CURVE keys (this checker has none)")
            return (f"a connection closed before its handshake ended ({mismatch}, a peer of a socket type the checker "
                    "does not pair with such as PUSH or DEALER, or a port probe)")
        if value == zmq.PROTOCOL_ERROR_ZMTP_MECHANISM_MISMATCH:
            return "a client without CURVE keys" if self.curve else "a client with CURVE keys (this checker has none)"
        if value == zmq.PROTOCOL_ERROR_ZMTP_CRYPTOGRAPHIC:
            # libzmq gives a hello sealed for another server key and a vouch its public key cannot open the same
            # value: naming one cause alone sent the operator of a mixed-up key pair to a --curve-server that was right.
            return ("a client holding another checker's public key (--curve-server), or a secret key that does not "
                    "belong to the public key it presents")
        return "a handshake that broke the ZeroMQ protocol"

    def close(self) -> None:
        """Stop counting (the socket stays open)."""
        if not self.sock.closed:
            self.sock.disable_monitor()
        self.monitor.close()


def subscribe(sock: zmq.Socket, prefixes: tuple[bytes, ...] = (b"",)) -> zmq.Socket:
    """Subscribe a SUB socket to topic prefixes (default: everything)."""
    for prefix in prefixes:
        sock.setsockopt(zmq.SUBSCRIBE, prefix)
    return sock


class Publisher:
    """Sends messages on a PUB or XPUB socket; never blocks (a full queue drops, as PUB does).

    An XPUB receives its subscribers' subscriptions as messages (byte 1 or 0, then the prefix); they are read by
    `new_subscribers` (the checker calls it every loop) and every `READ_SUBSCRIPTIONS_EVERY` sends (a detector never
    calls it), so they never pile up. What they cost libzmq is bounded by no option of its own; a bound XPUB that
    takes more than `SUBSCRIPTION_BYTES` of distinct prefixes, more than `SUBSCRIPTIONS_PER_WINDOW` messages in a
    `SUBSCRIPTION_WINDOW_S`, or messages faster than it reads them for that long, says so in `flood` when built with
    ``guard``: its owner (the checker) re-opens it
    (`replace_socket`). A detector's XPUB needs no guard: its only peer is the checker it chose.

    A connected client's publisher may hold its socket's `HandshakeWatch` (`connect_waiting`); it reads it at most
    every `HANDSHAKE_CHECK_S`, as it sends, so a key revoked while the client runs ends it (`HandshakeRefused`).

    Args:
        sock: a bound or connected PUB or XPUB socket.
        watch: the socket's handshake watch (None: not watched).
        guard: count what the peers' subscriptions cost, and set `flood` past the bounds (a bound XPUB's owner).
        clock: monotonic clock of the read time and the window.
    """

    def __init__(self, sock: zmq.Socket, watch: HandshakeWatch | None = None, guard: bool = False,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.sock = sock
        self.watch = watch
        self.guard = guard
        self.clock = clock
        self._subscribed = 0
        self._foreign = 0  # messages a peer sent up that are no subscription (`take_foreign`)
        self._sent = 0
        self._next_check = 0.0
        self.flood: str | None = None  # why the socket must be re-opened (None: it need not)
        self._prefixes: set[bytes] = set()  # distinct prefixes subscribed since the socket was opened
        self._prefix_bytes = 0
        self._window_start = float("-inf")
        self._window_count = 0
        self._behind_since: float | None = None  # since when every read ended by its time, not an empty queue
        self._told_cut: float | None = None  # the cut `rejoined` last said the peer came back from

    def replace_socket(self, sock: zmq.Socket) -> None:
        """Send on a new socket from now on (the old one closed by the caller): what the old one's peers cost is
        gone with it, so the subscription counts start over."""
        self.sock = sock
        self.flood = None
        self._prefixes.clear()
        self._prefix_bytes = 0
        self._window_start, self._window_count = float("-inf"), 0
        self._behind_since = None

    def send(self, message: Message) -> None:
        """Encode and send one message.

        Raises:
            MessageError: the message does not fit the wire (`streaming.messages.encode`).
            HandshakeRefused: the watched socket's peer refused it meanwhile.
        """
        self.send_encoded(encode(message))

    def send_encoded(self, frames: list[bytes]) -> None:
        """Send one message already encoded (`streaming.messages.encode`): its owner checks that it fits the wire
        whether or not it sends it.

        Raises:
            HandshakeRefused: the watched socket's peer refused it meanwhile.
        """
        self._sent += 1
        if self._sent % READ_SUBSCRIPTIONS_EVERY == 0:
            self._read_subscriptions()
        self._check_handshakes()
        # Copied: frames of at most 64 KiB are cheaper to copy than to lend (13 against 17 us a message on loopback;
        # pyzmq copies anything under its 64 KiB threshold anyway, after building a frame object for it).
        self.sock.send_multipart(frames)

    def _check_handshakes(self) -> None:
        """Read the watch's handshake events, at most every `HANDSHAKE_CHECK_S` (`send`, `rejoined`).

        Raises:
            HandshakeRefused: the peer refused this client meanwhile.
        """
        if self.watch is not None and (now := time.monotonic()) >= self._next_check:
            self._next_check = now + HANDSHAKE_CHECK_S
            self.watch.check(running=True)

    def new_subscribers(self) -> int:
        """How many subscriptions arrived since the last call (an XPUB's; always 0 on a PUB)."""
        self._read_subscriptions()
        count, self._subscribed = self._subscribed, 0
        return count

    def rejoined(self) -> float | None:
        """When (monotonic) the watched connection was last cut, if the peer subscribed again since the last call: a
        checker that came back (restarted, or its sockets re-opened), which heard nothing sent in between, since
        the connection made again has no subscription until then. None otherwise (nothing to send again), and for
        a cut said already: a checker subscribes to each of its topics, and those that reached this socket after
        the call that said it are the same return, not another.

        Raises:
            HandshakeRefused: the peer refused this client meanwhile.
        """
        if self.watch is None:
            return None
        # Read as often as a send reads it: a cut read only once the checker was back took the time of that reading
        # (seconds to minutes late, where no stream sent meanwhile), and the streams that ended before it went unsaid.
        self._check_handshakes()
        if self.new_subscribers() == 0:
            return None
        self.watch.check(running=True)  # the cut came before the subscriptions: read its event now
        cut = self.watch.cut_at
        if cut is None or cut == self._told_cut:
            return None
        self._told_cut = cut
        return cut

    def take_foreign(self) -> int:
        """How many messages that are no subscription (nor unsubscription) peers sent up since the last call."""
        count, self._foreign = self._foreign, 0
        return count

    def _read_subscriptions(self) -> None:
        if self.sock.type != zmq.XPUB or self.flood is not None:  # a flooded socket is about to be closed
            return
        end = self.clock() + SUBSCRIPTIONS_READ_S
        while (now := self.clock()) < end:
            try:
                message = self.sock.recv(zmq.NOBLOCK)
            except zmq.Again:
                self._behind_since = None
                return
            if message[:1] == SUBSCRIBED:
                self._subscribed += 1
            elif message[:1] != b"\x00":  # an XSUB peer's data: read and dropped here, never kept
                self._foreign += 1
            if self.guard:
                self._count(message, now)
                if self.flood is not None:
                    return
        if self.guard:  # the time ran out before the queue did
            self._behind(now)

    def _behind(self, now: float) -> None:
        """A read ended by its time with subscriptions still coming: peers outpace the reads, and what libzmq queues
        for them grows, unread and uncounted, for as long as they do (`SUBSCRIPTION_WINDOW_S` at most)."""
        if self._behind_since is None:
            self._behind_since = now
        elif now - self._behind_since >= SUBSCRIPTION_WINDOW_S:
            self.flood = (f"viewers sent subscriptions faster than the checker reads them for "
                          f"{SUBSCRIPTION_WINDOW_S:g} s; the --publish socket was re-opened to drop them (every viewer "
                          "connects again)")

    def _count(self, message: bytes, now: float) -> None:
        """One more message read up the socket (at ``now``, the read loop's clock): counted in the current window, and
        a subscription's prefix among those libzmq holds (an unsubscription is not trusted to free one: any peer may
        send one for a prefix others hold)."""
        if now - self._window_start >= SUBSCRIPTION_WINDOW_S:
            self._window_start, self._window_count = now, 0
        self._window_count += 1
        if self._window_count > SUBSCRIPTIONS_PER_WINDOW:
            self.flood = (f"viewers sent more than {SUBSCRIPTIONS_PER_WINDOW} subscriptions in "
                          f"{SUBSCRIPTION_WINDOW_S:g} s; the --publish socket was re-opened to drop them "
                          "(every viewer connects again)")
        elif message[:1] == SUBSCRIBED:
            self._held(message[1:])

    def _held(self, prefix: bytes) -> None:
        """A prefix libzmq now holds in its subscription tree, counted once."""
        if prefix in self._prefixes:
            return
        self._prefixes.add(prefix)
        self._prefix_bytes += len(prefix) + PREFIX_COST
        if self._prefix_bytes > SUBSCRIPTION_BYTES:
            self.flood = (f"viewers subscribed to more than {SUBSCRIPTION_BYTES // 1024} KiB of distinct topic "
                          f"prefixes ({len(self._prefixes)} prefixes); the --publish socket was re-opened to free them "
                          "(every viewer connects again)")


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
        topic_budget: if set, the most valid messages of one topic (one kind of one stream) a poll takes; the rest
            are dropped undecoded and counted in ``stats.over_budget``, so a flood from one stream costs little.
            Malformed messages never spend a topic's budget (anyone can put a live stream's topic on garbage).
        by_sender: each CURVE client has a budget of its own per topic (the key ZAP let in, libzmq's ``User-Id``):
            another allowed key flooding a live stream's topic cannot push that stream's own messages out of every
            poll, until the checker takes the stream for lost and hands it over. Only on a CURVE server socket.
    """

    def __init__(
        self, sock: zmq.Socket, clock: Callable[[], float] = time.monotonic, topic_budget: int | None = None,
        by_sender: bool = False,
    ) -> None:
        self.sock = sock
        self.poller = zmq.Poller()
        self.poller.register(sock, zmq.POLLIN)
        self.stats = ReceiveStats()
        self.clock = clock
        self.topic_budget = topic_budget
        self.by_sender = by_sender

    def replace_socket(self, sock: zmq.Socket) -> None:
        """Receive from a new socket from now on (the checker re-opens its sockets to cut off revoked clients);
        the counts go on.

        Args:
            sock: the new socket, subscribed already.
        """
        self.poller.unregister(self.sock)
        self.sock = sock
        self.poller.register(sock, zmq.POLLIN)

    def wake_on(self, old: Sequence[zmq.Socket], new: Sequence[zmq.Socket]) -> None:
        """Let what arrives on the ``new`` sockets end a poll's wait too, in place of the ``old`` ones (a server's
        handshake monitors, `HandshakeCounter.monitor`): their events are read by the caller after each poll, at most
        `MONITOR_EVENTS_PER_CALL` a socket, and a loop that turned only every `POLL_MS` read some 10,000 refused
        connections a second while a peer made 20,000, and the unread ones grew the process by about 1 MB a second.
        Call it before the next poll once the ``old`` ones are closed: a poll on a closed socket fails."""
        for sock in old:
            with contextlib.suppress(KeyError):
                self.poller.unregister(sock)
        for sock in new:
            self.poller.register(sock, zmq.POLLIN)

    def poll(self, timeout_ms: int = POLL_MS) -> list[Message]:
        """Wait up to ``timeout_ms`` for messages (or an event of a socket `wake_on` added), then take what is queued
        (`queued_messages`: at most `RECV_BATCH` messages, and for at most `RECV_BUDGET_S`; the rest wait for the next
        poll).

        Args:
            timeout_ms: longest wait for the first message.

        Returns:
            The decoded messages, in arrival order; malformed ones are counted in ``stats`` and skipped.
        """
        out: list[Message] = []
        per_topic: Counter[tuple[bytes, str]] = Counter()
        for frames, count, sender in queued_messages(self.poller, self.sock, timeout_ms, self.clock, self.by_sender):
            budget = (frames[0], sender)
            if self.topic_budget is not None and per_topic[budget] >= self.topic_budget:
                self.stats.over_budget += 1
                continue
            try:
                out.append(decode_frames(frames, count))
                self.stats.received += 1
                # Only a valid message spends its topic's budget: garbage can name any topic, and a flood of it
                # under a live stream's topic would otherwise push that stream's own messages out of every poll.
                per_topic[budget] += 1
            except MessageError as err:
                self.stats.malformed += 1
                self.stats.last_error = str(err)
        return out


def queued_messages(
    poller: zmq.Poller, sock: zmq.Socket, timeout_ms: int, clock: Callable[[], float] = time.monotonic,
    with_sender: bool = False,
) -> Iterator[tuple[list[bytes], int, str]]:
    """Wait up to ``timeout_ms`` for a message on ``sock`` (registered with ``poller``), then yield what is queued,
    as `receive_frames` takes it: at most `RECV_BATCH` messages, and until `RECV_BUDGET_S` of ``clock`` have passed
    (the caller's handling of each message counts), so that one busy peer can hold a receiving loop only so long.
    The checker, the view and the dashboard all receive this way.
    """
    if not poller.poll(timeout_ms):
        return
    deadline = clock() + RECV_BUDGET_S
    for _ in range(RECV_BATCH):
        try:
            message = receive_frames(sock, with_sender)
        except zmq.Again:
            return
        yield message
        if clock() > deadline:
            return


def receive_frames(sock: zmq.Socket, with_sender: bool = False) -> tuple[list[bytes], int, str]:
    """One message, frame by frame: its first `MAX_FRAMES` frames, how many it had, and with ``with_sender`` the
    CURVE client that sent it (its public key as ZAP let it in, libzmq's ``User-Id``; "" otherwise).

    libzmq delivers a multipart message whole or not at all, so once the first frame is here the rest are too; they
    are taken one by one, and the frames of an over-long message past `MAX_FRAMES` are released at once, never
    gathered.

    Raises:
        zmq.Again: nothing is waiting.
    """
    sender = ""
    if with_sender:
        first = sock.recv(zmq.NOBLOCK, copy=False)
        frames = [first.bytes]
        try:
            sender = str(first.get("User-Id") or "")
        except zmq.ZMQError:  # no ZAP handler set one (EINVAL): the message is still served, in the shared budget
            sender = ""
    else:
        frames = [sock.recv(zmq.NOBLOCK)]
    count = 1
    while sock.getsockopt(zmq.RCVMORE):
        frame = sock.recv(zmq.NOBLOCK, copy=False)  # no copy: a dropped frame never becomes a Python bytes
        count += 1
        if count <= MAX_FRAMES:
            frames.append(frame.bytes)
    return frames, count, sender


def decode_frames(frames: list[bytes], count: int) -> Message:
    """`streaming.messages.decode` of a message `receive_frames` took, refusing one that had more than `MAX_FRAMES`.

    Raises:
        MessageError: the message is malformed.
    """
    if count > MAX_FRAMES:
        raise MessageError(f"expected {MAX_FRAMES} frames, got {count}")
    return decode(frames)
