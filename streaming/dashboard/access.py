"""Who may read the dashboard: where it listens, its access token, and the checks every request passes.

On loopback (the default, 127.0.0.1) the page is open to this machine; beyond it the dashboard refuses to start
without a token (``--token`` or ``--token-file``), since it shows every stream's steps and alerts and takes
acknowledgements. With a token, every HTTP request and the WebSocket must carry it: the ``Authorization: Bearer``
header (scripts), or the cookie the page gets when it is first opened as ``http://HOST:PORT/?token=TOKEN`` (the
address is then replaced by ``/``, so the token does not stay in the address bar). Tokens are compared in constant
time (`hmac.compare_digest`), and a refusal says nothing but 401.

A dashboard on loopback without a token also refuses requests whose ``Host`` is not a loopback name: a web page on
another site could otherwise point its own host name at 127.0.0.1 (DNS rebinding) and read this one. A WebSocket
whose ``Origin`` is another site is refused the same way (a page elsewhere cannot ride on the cookie).
"""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
import re
from dataclasses import dataclass
from typing import Final
from urllib.parse import urlsplit

from graphs.common.errors import InputError
from graphs.common.files import read_bytes

DEFAULT_BIND: Final = "127.0.0.1:8080"
MIN_TOKEN_CHARS: Final = 16  # a guessable token is no token
MAX_TOKEN_CHARS: Final = 256
MAX_TOKEN_FILE_BYTES: Final = 4096  # a token is one line of at most 256 characters; the rest of the file is not read
COOKIE: Final = "dashboard_session"
TOKEN_HINT: Final = "make one with: python -c 'import secrets; print(secrets.token_urlsafe(24))'"
_ADDRESS = re.compile(r"(?:(\[[0-9A-Fa-f:.]+\]|[0-9A-Za-z.:-]+):)?(\d{1,5})")
_TOKEN = re.compile(r"[\x21-\x7e]+")  # visible ASCII: it travels in a header, a cookie and an address
LOOPBACK_NAMES: Final = frozenset({"localhost"})


@dataclass(frozen=True)
class BindAddress:
    """Where the dashboard listens.

    Attributes:
        host: a literal IP address.
        port: 0..65535 (0: a free port).
    """

    host: str
    port: int

    @property
    def loopback(self) -> bool:
        """Whether only this machine can reach it."""
        return ipaddress.ip_address(self.host).is_loopback

    def __str__(self) -> str:
        """``HOST:PORT`` as ``--bind`` takes it (an IPv6 host in brackets)."""
        return f"[{self.host}]:{self.port}" if ":" in self.host else f"{self.host}:{self.port}"


def parse_bind(text: str, option: str = "--bind") -> BindAddress:
    """Read ``HOST:PORT`` (``[::1]:PORT`` for IPv6) or a bare ``PORT`` (on 127.0.0.1).

    Raises:
        InputError: not that form, a port beyond 65535, or a host name (names are not resolved).
    """
    match = _ADDRESS.fullmatch(text.strip())
    if match is None or int(match.group(2)) > 65_535:
        raise InputError(f"{option} {text!r}: give HOST:PORT (127.0.0.1:8080, [::1]:8080, 0.0.0.0:8080) or a port "
                         "0-65535")
    host = (match.group(1) or "127.0.0.1").strip("[]")
    try:
        ipaddress.ip_address(host)
    except ValueError:
        raise InputError(f"{option} {text}: the host must be a literal IP address (127.0.0.1, [::1], 0.0.0.0); "
                         "names are not resolved") from None
    return BindAddress(host, int(match.group(2)))


def load_token(token: str | None, token_file: str | None) -> str | None:
    """The access token from ``--token`` or ``--token-file`` (its first line), checked.

    Returns:
        The token, or None when neither option is given.

    Raises:
        InputError: both options, an unreadable file, or a token too short, too long or not visible ASCII.
    """
    if token is not None and token_file is not None:
        raise InputError("give --token or --token-file, not both")
    option = "--token"
    if token_file is not None:
        option = f"--token-file {token_file}"
        try:  # a regular file of at most a key file's size: never /dev/zero read to the end, never a FIFO's wait
            data = read_bytes(token_file, "token file", MAX_TOKEN_FILE_BYTES)
        except InputError as err:
            raise InputError(f"--token-file {err}") from None
        try:  # a byte-order mark, as Windows editors write one before the text, is no part of the token
            lines = data.removeprefix(b"\xef\xbb\xbf").decode("ascii").splitlines()
        except UnicodeDecodeError:
            raise InputError(f"{option}: not a text file (a token is visible ASCII characters); "
                             f"{TOKEN_HINT}") from None
        token = lines[0].strip() if lines else ""
    if token is None:
        return None
    if not MIN_TOKEN_CHARS <= len(token) <= MAX_TOKEN_CHARS or _TOKEN.fullmatch(token) is None:
        raise InputError(f"{option}: the token must be {MIN_TOKEN_CHARS}-{MAX_TOKEN_CHARS} visible ASCII characters, "
                         f"no spaces; {TOKEN_HINT}")
    return token


def check_exposure(address: BindAddress, token: str | None, option: str = "--bind") -> None:
    """Refuse to listen beyond loopback without a token.

    Raises:
        InputError: the address is reachable from other machines and no token was given.
    """
    if token is None and not address.loopback:
        raise InputError(f"{option} {address} is reachable beyond this machine: anyone there "
                         "could read every stream's alerts and acknowledge them; give --token-file FILE (or --token), "
                         f"or bind 127.0.0.1; {TOKEN_HINT}")


class Gate:
    """The checks of one request: its token (when one is set), its ``Host`` and, for the WebSocket, its ``Origin``.

    Args:
        token: the access token, or None (loopback only).
    """

    def __init__(self, token: str | None) -> None:
        self.token = token
        self._token = None if token is None else token.encode("utf-8")
        # The cookie holds a digest of the token, not the token: a cookie that leaks (a shared browser profile's
        # files) does not hand out what the command line took.
        self.cookie = None
        if self._token is not None:
            self.cookie = hashlib.sha256(b"dashboard-cookie:" + self._token).hexdigest()

    def token_ok(self, given: str | None) -> bool:
        """Whether ``given`` is the token (constant time); always true without a token."""
        if self._token is None:
            return True
        return given is not None and hmac.compare_digest(given.encode("utf-8", "replace"), self._token)

    def cookie_ok(self, given: str | None) -> bool:
        """Whether a session cookie is the one this token gives (constant time)."""
        if self.cookie is None:
            return True
        return given is not None and hmac.compare_digest(given.encode("utf-8", "replace"), self.cookie.encode())

    def allowed(self, authorization: str | None, cookie: str | None) -> bool:
        """Whether a request carries the token (header) or the session cookie."""
        if self._token is None:
            return True
        bearer = None
        if authorization is not None and authorization[:7].lower() == "bearer ":
            bearer = authorization[7:].strip()
        return self.token_ok(bearer) | self.cookie_ok(cookie)  # both evaluated: no early exit to time

    def host_ok(self, host: str | None) -> bool:
        """Whether the ``Host`` header names this machine (checked only without a token: DNS rebinding)."""
        if self._token is not None:
            return True
        name = _host_name(host)
        if name is None:
            return False
        if name.lower() in LOOPBACK_NAMES:
            return True
        try:
            return ipaddress.ip_address(name).is_loopback
        except ValueError:
            return False

    @staticmethod
    def origin_ok(origin: str | None, host: str | None) -> bool:
        """Whether a WebSocket's ``Origin`` is this dashboard's own page (or absent: not a browser)."""
        if origin is None:
            return True
        parts = urlsplit(origin)
        return parts.scheme in ("http", "https") and host is not None and parts.netloc.lower() == host.lower()


def _host_name(host: str | None) -> str | None:
    """The name in a ``Host`` header, without its port and brackets."""
    if not host:
        return None
    if host.startswith("["):
        end = host.find("]")
        return host[1:end] if end > 0 else None
    return host.rsplit(":", 1)[0] if host.count(":") == 1 else host
