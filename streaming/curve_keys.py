"""CURVE keys for the checker and its clients: making them, loading them, and the folder of allowed clients.

ZeroMQ's CURVE mechanism encrypts a connection and authenticates both ends with elliptic-curve key pairs. The
checker holds one pair (its public key is handed to every client); every detector and viewer holds its own pair,
and the checker lets in only the clients whose public keys lie in its client folder. Keys are stored in pyzmq's
certificate format (``zmq.auth.create_certificates``): ``NAME.key`` holds the public key, ``NAME.key_secret`` the
public and the secret key (mode 0600). ``stream-detect keys --out DIR`` writes::

    DIR/checker.key            the checker's public key: give it to every detector and viewer (--curve-server)
    DIR/checker.key_secret     the checker's secret: stays on the checker machine (--curve-secret)
    DIR/clients/NAME.key       a client's public key: the checker's --curve-clients folder holds the allowed ones
    DIR/clients/NAME.key_secret  that client's secret: goes to that camera or viewer machine only (--curve-secret)

Every key file is checked when it is loaded (a regular file of at most `MAX_KEY_FILE_BYTES`, a Z85 key of 32
bytes, one key of each kind, a secret key that matches its public key); a missing, unreadable or malformed file is
a one-line `InputError` naming it, and so is a secret where a public key is expected (``--curve-server``, a
``*.key`` file of the client folder). A secret key file that other users may read is loaded with a warning, said
where the caller says (a service: its queued log), once a process: a secret key is read only as a command starts,
never again while it serves (the client folder's reloads read public keys only).

The client folder is read again whenever it changes (`ClientKeys.reload`, polled every `KEY_RELOAD_S` by the
checker): a key file dropped into it lets that client in from its next connection; a key removed from it revokes
that client (the checker then re-opens its sockets, so a revoked client that was connected is cut off too).
"""

from __future__ import annotations

import contextlib
import errno
import os
import re
import stat
import struct
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Final

import zmq
import zmq.auth
from zmq.utils import z85

from graphs.common.errors import InputError, print_warning
from graphs.common.files import SECRET_MODE, check_output, not_a_file, output_target, read_bytes, write_files

if TYPE_CHECKING:  # its module loads asyncio (30 ms): only a checker with CURVE pays for it
    from zmq.auth.thread import ThreadAuthenticator

CHECKER_NAME: Final = "checker"  # DIR/checker.key, DIR/checker.key_secret
CLIENTS_FOLDER: Final = "clients"  # DIR/clients/<name>.key(_secret)
PUBLIC_SUFFIX: Final = ".key"
SECRET_SUFFIX: Final = ".key_secret"
CLIENT_NAME_RULE: Final = "1-64 characters from [A-Za-z0-9_.-], starting with a letter or a digit"
_CLIENT_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")  # no path separator, no hidden file, no '..'
DEFAULT_CLIENTS: Final = ("cam0", "viewer")
MAX_KEY_FILE_BYTES: Final = 4096  # a pyzmq certificate is about 400 bytes; a bigger "key" file is not one
MAX_CLIENT_KEYS: Final = 1024  # public keys read from a client folder (the checker tracks at most 256 streams)
KEY_RELOAD_S: Final = 1.0  # how often the checker looks for a change in its client folder
MAX_SKIPPED_LINES: Final = 10  # key files a reload names as skipped; the rest are counted in one line
# Key files a reload's log line names in its fields (added, revoked): a folder that became unreadable revokes them
# all, and a thousand names made one JSON line of tens of kilobytes, which log collectors cut (16 KiB for Docker's).
MAX_NAMED_KEYS: Final = 32
# The process (or the system) has no file handle left: news of this process, not of the folder. A peer holding
# connections open at the checker's port runs it out of handles without a key; read as "the folder cannot be
# listed", every client key was revoked and the re-opened sockets then failed too.
OUT_OF_HANDLES: Final = frozenset({errno.EMFILE, errno.ENFILE})
# A key file whose change time is not this much older than the look that read it is read again at the next look
# (git's "racily clean" index entries): a file rewritten with a key of the same size within one tick of the file
# system's clock keeps its size, change time and inode, and the key read before the rewrite stayed in force. The
# tick is 1-10 ms on ext4 and xfs before Linux 6.13, 1 s on ext4 with 128-byte inodes, HFS+ and some NFS servers,
# 2 s on FAT; a server's clock ahead of this one's needs some slack too. Keys are small: re-reading one for a
# second or two costs nothing.
RACY_CHANGE_S: Final = 2.0
Z85_KEY_LENGTH: Final = 40  # a 32-byte CURVE key in Z85
_Z85_ALPHABET: Final = frozenset(z85.Z85CHARS)
ZAP_DOMAIN: Final = "*"  # pyzmq's authenticator serves every domain under this name
PUBLIC_MODE: Final = 0o644
FOLDER_MODE: Final = 0o700  # the key folder holds secrets


def is_client_name(value: object) -> bool:
    """Whether ``value`` may name a client key (`CLIENT_NAME_RULE`: it becomes a file name, never a path).

    Args:
        value: a candidate name.

    Returns:
        True if ``clients/<value>.key`` stays inside the clients folder.
    """
    return isinstance(value, str) and _CLIENT_NAME.fullmatch(value) is not None


def parse_client_names(text: str, option: str = "--clients") -> tuple[str, ...]:
    """The client names of a comma-separated list, each checked, none twice.

    Args:
        text: e.g. ``"cam0,cam1,viewer"``.
        option: the option named in errors.

    Returns:
        The names, in order.
    """
    names = tuple(name.strip() for name in text.split(","))
    for name in names:
        if not is_client_name(name):
            raise InputError(f"{option} {text!r}: client name {name!r} must be {CLIENT_NAME_RULE}")
    if len(set(names)) != len(names):
        twice = next(name for name in names if names.count(name) > 1)
        raise InputError(f"{option} {text!r}: client name {twice!r} appears twice")
    return names


# -- loading ------------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class KeyPair:
    """The keys of one certificate file, Z85-encoded (40 ASCII bytes each); ``secret`` is None in a public file."""

    public: bytes
    secret: bytes | None


def _check_z85_key(key: object) -> bool:
    if not isinstance(key, bytes) or len(key) != Z85_KEY_LENGTH or not set(key) <= _Z85_ALPHABET:
        return False
    try:
        return len(z85.decode(key)) == 32
    except (ValueError, struct.error):  # five characters can spell a number beyond 32 bits
        return False


def _certificate_keys(data: bytes) -> dict[bytes, list[bytes]]:
    """Every ``public-key`` and ``secret-key`` value of a certificate's text, in file order (pyzmq's format;
    comments skipped)."""
    found: dict[bytes, list[bytes]] = {b"public-key": [], b"secret-key": []}
    for raw in data.splitlines():
        line = raw.strip()
        key, equals, value = line.partition(b"=")
        # The whole name: a metadata field such as "public-key-of = ..." is no second key.
        if equals and key.strip() in found:
            found[key.strip()].append(value.strip(b" \t'\""))
    return found


def read_key_file(path: str | Path, option: str) -> KeyPair:
    """Load one pyzmq certificate file, checked: the one loader of CURVE key files.

    Args:
        path: a ``.key`` or ``.key_secret`` file.
        option: the option the path came from, named in errors.

    Returns:
        Its keys.

    Raises:
        InputError: the file is missing, not a regular file, unreadable, too big, or holds no valid key (or a
            secret key that does not belong to its public key, or two different keys of one kind).
    """
    where = f"{option} {path}"
    try:
        data = read_bytes(path, "CURVE key file", MAX_KEY_FILE_BYTES,
                          " (make keys with 'stream-detect keys --out DIR')")
    except InputError as err:
        raise InputError(f"{option} {err}") from None
    found = _certificate_keys(data)
    for name, values in found.items():
        if len(set(values)) > 1:  # which one counts depends on the reader (ours took the first, pyzmq's may not)
            raise InputError(f"{where}: holds {len(values)} {name.decode()} lines with different keys; a key file "
                             "holds one (an edited or concatenated file?)")
    public, secret = (values[0] if values else None for values in found.values())
    if public is None:
        raise InputError(f"{where}: not a CURVE key file (no public-key line)")
    if not _check_z85_key(public):
        raise InputError(f"{where}: not a CURVE key file (its public key is not 40 Z85 characters)")
    if secret is not None:
        if not _check_z85_key(secret):
            raise InputError(f"{where}: not a CURVE key file (its secret key is not 40 Z85 characters)")
        if zmq.curve_public(secret) != public:
            raise InputError(f"{where}: its secret key does not belong to its public key (an edited file?)")
    return KeyPair(public, secret)


def load_secret_key(
    path: str | Path, option: str = "--curve-secret", warn: Callable[[str], None] | None = print_warning
) -> KeyPair:
    """A key pair with its secret (a ``.key_secret`` file).

    Args:
        path: the file.
        option: the option named in errors.
        warn: told (once a process and file) that the file is open to other users; a service gives its log's
            ``warning``, whose writer no full stderr holds and which writes the line in the format asked
            (``--log-format json``). None: the check before the service starts, which leaves the warning to the
            load that follows it.

    Returns:
        The pair, ``secret`` set.
    """
    pair = read_key_file(path, option)
    if pair.secret is None:
        raise InputError(f"{option} {path}: holds no secret key (give the {SECRET_SUFFIX} file)")
    loose = open_to_others(path)
    # ssh refuses such a key. Not here: a file system without permissions (FAT, some shares) shows every file 0777.
    # Said once a process: a command reads its key early (a typo found before the model loads) and again to use it.
    if loose and warn is not None and str(path) not in _SAID_LOOSE:
        _SAID_LOOSE.add(str(path))
        warn(f"{option} {path}: a secret key file open to other users of this machine (mode {loose:04o}); "
             f"chmod 600 {path}")
    return pair


_SAID_LOOSE: set[str] = set()  # the secret key files this process has warned of (`load_secret_key`)


def open_to_others(path: str | Path) -> int:
    """The permission bits of ``path`` when its group or other users may use it (0 when only its owner may, or
    where permission bits mean nothing: Windows)."""
    if os.name == "nt":
        return 0
    try:
        mode = stat.S_IMODE(os.stat(path).st_mode)
    except OSError:  # it was read a moment ago; gone now, the run fails where it is used, naming it
        return 0
    return mode if mode & 0o077 else 0


def load_public_key(path: str | Path, option: str = "--curve-server") -> bytes:
    """The checker's public key as its clients load it; a file that holds a secret too is refused.

    Args:
        path: the checker's ``.key`` file.
        option: the option named in errors.

    Returns:
        The Z85 public key.
    """
    return _public_only(path, option, f"give the checker's public key file ({CHECKER_NAME}{PUBLIC_SUFFIX}): its "
                                      "secret never leaves the checker machine")


def load_client_key(path: str | Path, option: str = "--curve-clients") -> bytes:
    """A client's public key as the checker's client folder holds it; a file that holds a secret too is refused.

    ZeroMQ's certificates put a public key in ``NAME.key`` and the pair in ``NAME.key_secret`` (pyzmq's
    ``create_certificates``, CZMQ's ``zcert_save``), and only ``*.key`` files are read from the folder. A ``.key``
    file with a secret in it is a client's secret copied (or renamed) to the checker machine, where it must not be.

    Args:
        path: a ``NAME.key`` file of the folder.
        option: the option named in errors.

    Returns:
        The Z85 public key.
    """
    return _public_only(path, option, f"the client folder takes public key files only (NAME{PUBLIC_SUFFIX}): a "
                                      "client's secret stays on its own machine")


def _public_only(path: str | Path, option: str, instead: str) -> bytes:
    """The public key of a file that must not hold a secret (refused naming the file, then ``instead``)."""
    pair = read_key_file(path, option)
    if pair.secret is not None:
        raise InputError(f"{option} {path}: holds a secret key; {instead}")
    return pair.public


def _key_files(folder: Path) -> list[Path]:
    return sorted(p for p in folder.iterdir() if p.name.endswith(PUBLIC_SUFFIX) and not p.name.startswith("."))


def read_client_folder(folder: str | Path, option: str = "--curve-clients") -> dict[bytes, str]:
    """The public keys of the clients allowed to connect, every file checked.

    Args:
        folder: the folder of ``*.key`` files (other files, ``*.key_secret`` included, are not read).
        option: the option named in errors.

    Returns:
        public key -> the name of the file that holds it.

    Raises:
        InputError: the folder is missing or unreadable, holds no ``*.key`` file or more than `MAX_CLIENT_KEYS`,
            or one of them is not a valid public key file.
    """
    folder = Path(folder)
    if not folder.is_dir():
        what = "not a folder" if folder.exists() else "no such folder"
        raise InputError(f"{option} {folder}: {what}; it names the folder of the clients' public keys (*.key)")
    try:
        files = _key_files(folder)
    except OSError as err:
        raise InputError(f"{option} {folder}: cannot list the folder ({err.strerror})") from None
    if not files:
        raise InputError(f"{option} {folder}: holds no public key (*{PUBLIC_SUFFIX}); nobody could connect")
    if len(files) > MAX_CLIENT_KEYS:
        raise InputError(f"{option} {folder}: {len(files)} key files, more than {MAX_CLIENT_KEYS}")
    return {load_client_key(path, option): path.name for path in files}


# -- configs ------------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class CurveServer:
    """The checker's CURVE settings: its key pair and the folder of the clients it lets in.

    Args:
        public: the checker's public key (Z85).
        secret: the checker's secret key (Z85).
        clients: the folder of the allowed clients' public keys (``*.key``), read again when it changes.
        extra_clients: public keys allowed besides the folder's (the all-in-one run's own detector and view).
    """

    public: bytes
    secret: bytes
    clients: str
    extra_clients: tuple[bytes, ...] = ()

    def __post_init__(self) -> None:
        for name, key in (("public", self.public), ("secret", self.secret), *(("extra_clients", k)
                                                                              for k in self.extra_clients)):
            if not _check_z85_key(key):
                raise InputError(f"CurveServer.{name}: not a 40-character Z85 CURVE key")
        if zmq.curve_public(self.secret) != self.public:
            raise InputError("CurveServer.secret does not belong to CurveServer.public")

    @classmethod
    def from_files(cls, secret_file: str, clients: str, extra_clients: tuple[bytes, ...] = (),
                   warn: Callable[[str], None] | None = print_warning) -> CurveServer:
        """Load the checker's keys (``--curve-secret``) and check its client folder (``--curve-clients``).

        Args:
            secret_file: the checker's ``.key_secret`` file.
            clients: the folder of allowed public keys.
            extra_clients: more allowed public keys.
            warn: where a secret key file open to others is said (`load_secret_key`).

        Returns:
            The checked settings.
        """
        pair = load_secret_key(secret_file, "--curve-secret", warn)
        allowed = read_client_folder(clients)
        if pair.public in allowed:  # the checker ran, and refused every client, blaming them
            raise InputError(f"--curve-secret {secret_file}: its public key is also {allowed[pair.public]} of "
                             f"--curve-clients {clients}: either it is a client's secret (give the checker's own, "
                             f"{CHECKER_NAME}.key_secret of `stream-detect keys`), or the checker's public key was "
                             f"copied among the clients' (remove {allowed[pair.public]} there)")
        assert pair.secret is not None  # load_secret_key refuses a file without one
        return cls(pair.public, pair.secret, str(clients), extra_clients)


@dataclass(frozen=True)
class CurveClient:
    """A detector's or viewer's CURVE settings: the checker's public key and the client's own pair.

    Args:
        server: the checker's public key (Z85).
        public: this client's public key (Z85); the checker must have it in its client folder.
        secret: this client's secret key (Z85).
    """

    server: bytes
    public: bytes
    secret: bytes

    def __post_init__(self) -> None:
        for name in ("server", "public", "secret"):
            if not _check_z85_key(getattr(self, name)):
                raise InputError(f"CurveClient.{name}: not a 40-character Z85 CURVE key")
        if zmq.curve_public(self.secret) != self.public:
            raise InputError("CurveClient.secret does not belong to CurveClient.public")

    @classmethod
    def from_files(cls, server_file: str, secret_file: str,
                   warn: Callable[[str], None] | None = print_warning) -> CurveClient:
        """Load ``--curve-server`` (the checker's public key) and ``--curve-secret`` (this client's pair).

        Args:
            server_file: the checker's ``.key`` file.
            secret_file: this client's ``.key_secret`` file.
            warn: where a secret key file open to others is said (`load_secret_key`).

        Returns:
            The checked settings.
        """
        server = load_public_key(server_file, "--curve-server")
        pair = load_secret_key(secret_file, "--curve-secret", warn)
        assert pair.secret is not None
        return cls(server, pair.public, pair.secret)

    @classmethod
    def ephemeral(cls, server: bytes) -> CurveClient:
        """A fresh key pair that lives in memory only (the all-in-one run's own detector and view).

        Args:
            server: the checker's public key.

        Returns:
            The settings; the checker must be told ``public`` (`CurveServer.extra_clients`).
        """
        public, secret = zmq.curve_keypair()
        return cls(server, public, secret)

    def apply(self, sock: zmq.Socket) -> None:
        """Make ``sock`` a CURVE client of the checker with these keys (before it connects)."""
        sock.setsockopt(zmq.CURVE_SERVERKEY, self.server)
        sock.setsockopt(zmq.CURVE_PUBLICKEY, self.public)
        sock.setsockopt(zmq.CURVE_SECRETKEY, self.secret)


def server_curve(
    secret_file: str | None, clients: str | None, extra_clients: tuple[bytes, ...] = (),
    warn: Callable[[str], None] | None = print_warning,
) -> CurveServer | None:
    """The checker's CURVE settings from its options (``--curve-secret``, ``--curve-clients``), which come together.

    Args:
        secret_file: the checker's ``.key_secret`` file, or None.
        clients: the folder of allowed public keys, or None.
        extra_clients: more allowed public keys.
        warn: where a secret key file open to others is said (`load_secret_key`; None: not said).

    Returns:
        None when neither option is given.
    """
    if secret_file is None and clients is None:
        return None
    if clients is None:
        raise InputError("--curve-secret needs --curve-clients (the folder of the public keys allowed to connect)")
    if secret_file is None:
        raise InputError("--curve-clients needs --curve-secret (the checker's .key_secret file)")
    return CurveServer.from_files(secret_file, clients, extra_clients, warn)


def client_curve(
    server_file: str | None, secret_file: str | None, warn: Callable[[str], None] | None = print_warning
) -> CurveClient | None:
    """A client's CURVE settings from its options (``--curve-server``, ``--curve-secret``), which come together.

    Args:
        server_file: the checker's ``.key`` file, or None.
        secret_file: this client's ``.key_secret`` file, or None.
        warn: where a secret key file open to others is said (`load_secret_key`; None: not said).

    Returns:
        None when neither option is given.
    """
    if server_file is None and secret_file is None:
        return None
    if secret_file is None:
        raise InputError("--curve-server needs --curve-secret (this client's .key_secret file)")
    if server_file is None:
        raise InputError("--curve-secret needs --curve-server (the checker's public key file, checker.key)")
    return CurveClient.from_files(server_file, secret_file, warn)


# -- the checker's side: who may connect ----------------------------------------------------------------------------
_Entry = tuple[str, int, int, int]  # a key file as a look saw it: name, size, change time (ns), inode


def _for_want_of_handles(err: BaseException) -> bool:
    """Whether a key file's load failed because the process had no file handle left (`OUT_OF_HANDLES`): news of the
    process, not of the file. The loaders' one-line errors hide the `OSError` they were raised from (``from None``),
    which stays their ``__context__``."""
    seen: BaseException | None = err
    while seen is not None:
        if isinstance(seen, OSError) and seen.errno in OUT_OF_HANDLES:
            return True
        seen = seen.__context__
    return False


class ClientKeys:
    """The public keys allowed to connect, read from the client folder.

    pyzmq's authenticator asks `callback` for every CURVE handshake, from its own thread; the checker's loop calls
    `reload` (at most every `KEY_RELOAD_S`), which swaps the allowed set in one assignment when the folder changed.
    At reload a file that cannot be read as a public key (a dangling or looping link among them) is skipped and
    named in the log, once per change of the folder: it lets nobody in, and the other keys stay in force. Only a
    folder that cannot be listed at all (removed, or its permissions taken away) revokes every key, until it can be
    read again. At start-up (`read_client_folder`) such a file is refused instead, naming it: someone is there to
    fix it.

    A file is known by its name, size, change time and inode, and one the folder shows unchanged keeps the key read
    before, unread. Two files are read again at the next looks all the same, the folder unchanged: one whose change
    time is within `RACY_CHANGE_S` of the look that read it (a rewrite within the same tick of the file system's
    clock changes none of the four), until it is that old, and one whose read failed for want of a file handle (a
    key added while connections held open at the checker's ports used them all up), until a read succeeds.

    Args:
        folder: the client folder.
        extra: public keys allowed besides the folder's.
        log: called with one line per problem found at a reload, and one when keys were added or revoked, whose
            values (``added`` and ``revoked``: the key file names; ``allowed``: how many) come as keywords.
        monotonic: the clock of the reload period.
        wall_ns: the clock the file system stamps change times with (``time.time_ns``).
    """

    def __init__(
        self,
        folder: str | Path,
        extra: Iterable[bytes] = (),
        log: Callable[..., None] | None = None,
        monotonic: Callable[[], float] = time.monotonic,
        wall_ns: Callable[[], int] = time.time_ns,
    ) -> None:
        self.folder = Path(folder)
        self.extra = frozenset(extra)
        self.log = log
        self.monotonic = monotonic
        self.wall_ns = wall_ns
        started = self.wall_ns()
        try:
            self._signature = self._scan()  # before the read: a file changed in between is read again at reload
        except OSError:  # no file handle left: the read says so
            self._signature = None
        self.names: dict[bytes, str] = read_client_folder(self.folder)
        self.allowed = frozenset(self.names) | self.extra
        key_of = {name: key for key, name in self.names.items()}
        # Each entry of the look -> the key its file held then.
        self._loaded = {entry: key_of[entry[0]] for entry in self._signature or () if entry[0] in key_of}
        # The entries read again at the next look, whatever it finds (the class's docstring says which).
        self._again = {entry for entry in self._signature or ()
                       if self._racy(entry, started) or entry not in self._loaded}
        self._said: dict[_Entry, str] = {}  # each entry skipped at the last look -> the line that named it
        self._next_check = self.monotonic() + KEY_RELOAD_S

    def callback(self, domain: str, key: bytes) -> bool:
        """pyzmq's credentials-provider hook: whether a client key (Z85) may connect.

        A refusal is counted by the checker's socket monitors (`streaming.transport.HandshakeCounter`), with the
        refusals libzmq makes before asking (another checker's key, no CURVE).

        Args:
            domain: the ZAP domain (unused: one checker, one set of keys).
            key: the client's public key, Z85.

        Returns:
            True to let the client in.
        """
        return key in self.allowed

    @staticmethod
    def _racy(entry: _Entry, started_ns: int) -> bool:
        """Whether a file's change time is too close to the look that began at ``started_ns`` to trust it: a
        rewrite after that look's read could bear the same time. Close on either side: a file server's clock a
        little ahead of this one stamps the future. A change time further ahead is no tick of this clock (it was
        set back): a rewrite now bears another time, which the look sees, and re-reading such a file at every look
        until the clock caught up took 32 ms a look for 1,024 keys instead of 6.5, for as long as the clock was
        behind."""
        return abs(entry[2] - started_ns) < int(RACY_CHANGE_S * 1e9)

    def _scan(self) -> tuple[_Entry, ...] | None:
        """What identifies the folder's key files now (names, sizes, change times, inodes); None only when the
        folder itself cannot be listed.

        One file that cannot be looked at must not fail the look at the others: a dangling or looping ``*.key``
        link (a key removed by a deploy tool, its link left behind) revoked every client of a running checker, and
        so did a key file deleted between the listing and its ``stat``. Such a link is an entry of its own, made
        of its error number so that it stays the same from one look to the next (named once in the log by
        `reload`, as its load fails; not again every second); a file gone since the listing is simply not there,
        as a deleted key is (the next look agrees).

        Raises:
            OSError: the process has no file handle left to list the folder with (`OUT_OF_HANDLES`): no look.
        """
        try:
            files = _key_files(self.folder)[: MAX_CLIENT_KEYS + 1]
        except OSError as err:
            if err.errno in OUT_OF_HANDLES:
                raise
            return None
        entries: list[_Entry] = []
        for path in files:
            try:
                info = path.stat()
            except OSError as err:
                if not (isinstance(err, FileNotFoundError) and not os.path.lexists(path)):
                    # A link to nothing, a loop of links, a file this user may not look at: named by its load.
                    entries.append((path.name, -1, -1, err.errno or 0))
                continue
            entries.append((path.name, info.st_size, info.st_ctime_ns, info.st_ino))
        return tuple(entries)

    def reload(self, force: bool = False) -> bool:
        """Read the folder again if it changed since the last look (looks at most every `KEY_RELOAD_S`), and the
        files the last look did not trust (`ClientKeys`) even if it did not.

        Args:
            force: look now, whatever the period.

        Returns:
            True if a key that was allowed is no longer (its clients must be cut off: re-open the sockets).
        """
        now = self.monotonic()
        if not force and now < self._next_check:
            return False
        self._next_check = now + KEY_RELOAD_S
        started = self.wall_ns()  # before the look and its reads: what changes after them is stamped no earlier
        try:
            signature = self._scan()
        except OSError:  # out of file handles: the folder is as it was for all this process knows; look again later
            return False
        changed = signature != self._signature
        if not changed and not self._again:
            return False
        self._signature = signature
        names: dict[bytes, str] = {}
        loaded: dict[_Entry, bytes] = {}
        again: set[_Entry] = set()
        said: dict[_Entry, str] = {}
        if signature is None:
            self._say(f"checker: cannot read the client key folder {self.folder}; every client key is revoked")
        elif len(signature) > MAX_CLIENT_KEYS:
            self._say(f"checker: {self.folder} holds more than {MAX_CLIENT_KEYS} key files; every key is revoked")
        else:
            lines: list[str] = []
            for entry in signature:
                key, line, short = self._key_of(entry, changed)
                if line is not None:
                    said[entry] = line
                    # A changed folder is named whole again; a file only read again, when its news is new.
                    if changed or self._said.get(entry) != line:
                        lines.append(line)
                if short or self._racy(entry, started):
                    again.add(entry)
                if key is not None:
                    names[key], loaded[entry] = entry[0], key
            # A folder of broken files is named in a few lines, the rest counted.
            for line in lines[:MAX_SKIPPED_LINES]:
                self._say(line)
            if len(lines) > MAX_SKIPPED_LINES:
                self._say(f"checker: skipped {len(lines) - MAX_SKIPPED_LINES} more key files of {self.folder} that "
                          "cannot be read as public keys")
        removed = set(self.names) - set(names)
        added = set(names) - set(self.names)
        # The key files by name, for a log collector: who was let in or cut off, which the line only counts.
        revoked_files = sorted(self.names[key] for key in removed)[:MAX_NAMED_KEYS]
        added_files = sorted(names[key] for key in added)[:MAX_NAMED_KEYS]
        self.names, self._loaded, self._again, self._said = names, loaded, again, said
        self.allowed = frozenset(names) | self.extra
        if added or removed:
            self._say(f"checker: client keys reloaded from {self.folder}: {len(added)} added, {len(removed)} revoked "
                      f"({len(names)} allowed)", added=added_files, revoked=revoked_files,
                      allowed=len(names))
        return bool(removed - self.extra)

    def _key_of(self, entry: _Entry, changed: bool) -> tuple[bytes | None, str | None, bool]:
        """One file of a look: its key (None: skipped), the line naming it as skipped, and whether its read failed
        for want of a file handle (to be tried again at the next look).

        Args:
            entry: the file as the look saw it.
            changed: the look found the folder changed (every file skipped before is read, and named, again).
        """
        known = self._loaded.get(entry)
        if entry not in self._again:
            if known is not None:
                # A file unchanged since it was read keeps its key: read again, it could only fail for want of a
                # file handle, and revoke a key nobody removed.
                return known, None, False
            if not changed and entry in self._said:  # skipped at the last look, unchanged since: skipped still
                return None, self._said[entry], False
        try:
            return load_client_key(self.folder / entry[0]), None, False
        except InputError as err:
            short = _for_want_of_handles(err)
            if short and known is not None:  # its key stays until a read says otherwise
                return known, None, True
            return None, f"checker: skipped {err}", short

    def _say(self, line: str, **fields: object) -> None:
        if self.log is not None:
            self.log(line, **fields)


def start_authenticator(ctx: zmq.Context, keys: ClientKeys) -> ThreadAuthenticator:
    """Start the ZAP handler of a context: every CURVE handshake on a server socket of ``ctx`` asks ``keys``.

    It must run before a CURVE socket binds: without a ZAP handler libzmq lets every client in.

    Args:
        ctx: the context of the checker's sockets (one authenticator per context).
        keys: the allowed keys.

    Returns:
        The running authenticator (stop it after the sockets are closed).
    """
    from zmq.auth.thread import ThreadAuthenticator

    auth = ThreadAuthenticator(ctx)
    auth.start()
    auth.configure_curve_callback(ZAP_DOMAIN, credentials_provider=keys)
    return auth


# -- making keys --------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class WrittenKeys:
    """What `write_key_set` wrote: every file, and whether the checker's pair was already there and kept."""

    files: tuple[Path, ...]
    checker_kept: bool


def _pair_paths(folder: Path, name: str) -> tuple[Path, Path]:
    return folder / f"{name}{PUBLIC_SUFFIX}", folder / f"{name}{SECRET_SUFFIX}"


def _make_folder(folder: Path, link_ok: bool) -> None:
    """Make a key folder (mode 0700); ``link_ok`` for the folder the user named, never for the one made inside it."""
    if folder.is_symlink() and not link_ok:
        raise InputError(f"--out {folder}: is a symbolic link; refusing to write keys through it")
    if folder.exists() and not folder.is_dir():
        raise InputError(f"--out {folder}: is {not_a_file(folder) or 'a file'}, expected a folder for the keys")
    try:
        folder.mkdir(mode=FOLDER_MODE, parents=True, exist_ok=True)
    except OSError as err:
        raise InputError(f"--out {folder}: cannot make the key folder ({err.strerror})") from None


def certificate(public: bytes, secret: bytes | None = None) -> bytes:
    """A key file's content in pyzmq's certificate format (what ``zmq.auth.load_certificate`` reads).

    Args:
        public: the public key, Z85.
        secret: the secret key, Z85, for a ``.key_secret`` file.

    Returns:
        The file's bytes.
    """
    kind = "secret" if secret is not None else "public"
    lines = [f"#   ZeroMQ CURVE {kind} certificate, written by stream-detect keys",
             "#   Exchange securely, or use a secure mechanism to verify the contents" if secret is None
             else "#   DO NOT PROVIDE THIS FILE TO OTHER USERS nor change its permissions.",
             "", "metadata", "curve", f'    public-key = "{public.decode("ascii")}"']
    if secret is not None:
        lines.append(f'    secret-key = "{secret.decode("ascii")}"')
    return ("\n".join(lines) + "\n").encode("ascii")


def _pair_files(folder: Path, name: str) -> list[tuple[Path, bytes, str, int]]:
    """A new key pair as the two files `graphs.common.files.write_files` writes: each is created with
    ``O_EXCL | O_NOFOLLOW`` and its mode (0600 for the secret) in a private temporary folder, then moved into place,
    so a secret is never readable by others, not even half written, and never written through a link."""
    public_path, secret_path = _pair_paths(folder, name)
    public, secret = zmq.curve_keypair()
    # The secret first: files are moved into place in this order, so a crash between the two moves never leaves a
    # public key handed out whose secret is lost (a secret alone still holds its public key).
    return [(secret_path, certificate(public, secret), "secret key file", SECRET_MODE),
            (public_path, certificate(public), "public key file", PUBLIC_MODE)]


def write_key_set(out: str | Path, clients: Sequence[str], force: bool = False, add: bool = False) -> WrittenKeys:
    """Write the checker's key pair and one pair per client (``stream-detect keys``).

    Args:
        out: the key folder; ``out/clients`` holds the clients' pairs. Both are made (mode 0700) if missing;
            the folder holding ``out`` must exist.
        clients: client names (`CLIENT_NAME_RULE`).
        force: replace key files that exist already (a replaced checker pair means every client needs its new
            public key).
        add: add clients to an existing set: the checker's pair must exist and is kept.

    Returns:
        The files written.

    Raises:
        InputError: a bad name, a key file that exists (without ``force``), ``add`` without a checker pair, a
            folder that cannot be written, or a file that cannot be written (a full disk). Nothing is written then:
            every file is written before any is moved into place, and folders this call made are removed again.
            Only a move that fails after every file was written (rare: a rename within one folder) can leave,
            with ``force``, the files moved before it replaced (`graphs.common.files.write_files`).
    """
    out = Path(out)
    for name in clients:
        if not is_client_name(name):
            raise InputError(f"--clients: client name {name!r} must be {CLIENT_NAME_RULE}")
    checker = _pair_paths(out, CHECKER_NAME)
    checker_there = [p for p in checker if p.exists() or p.is_symlink()]
    if add and len(checker_there) != 2:
        raise InputError(f"--add: {out} holds no checker key pair ({checker[0].name}, {checker[1].name}) to add "
                         "clients to; make a new set without --add")
    planned = [path for name in clients for path in _pair_paths(out / CLIENTS_FOLDER, name)]
    if not add:
        planned = [*checker, *planned]
    existing = [p for p in planned if p.exists() or p.is_symlink()]
    if existing and not force:
        hint = "--force replaces them" + ("" if add else "; --add adds clients to an existing set")
        raise InputError(f"--out {out}: {existing[0]} exists (keys are never overwritten; {hint})")
    if add:  # the set clients are added to must be whole: the checker's secret, and the public key that goes with it
        pair = load_secret_key(checker[1], "--add")
        if load_public_key(checker[0], "--add") != pair.public:
            raise InputError(f"--add: {checker[0]} is not the public key of {checker[1]}: the set is mixed up (a "
                             "key copied from another set?); cameras given it would be refused")
    check_output(out, "keys", folder=True, option="--out")
    for path in planned:
        output_target(path, "key file")  # a folder, FIFO or device where a key goes is refused before any write
    clients_folder = out / CLIENTS_FOLDER  # found unwritable only after the checker's pair: half a key set
    if clients_folder.is_dir() and not os.access(clients_folder, os.W_OK | os.X_OK):
        raise InputError(f"--out {out}: cannot write the client keys: folder {clients_folder} is not writable")
    pairs = [*([] if add else [(out, CHECKER_NAME)]), *((out / CLIENTS_FOLDER, name) for name in clients)]
    made = [folder for folder in (out, out / CLIENTS_FOLDER) if not os.path.lexists(folder)]
    try:
        _make_folder(out, link_ok=True)
        _make_folder(out / CLIENTS_FOLDER, link_ok=False)
        write_files([file for folder, name in pairs for file in _pair_files(folder, name)], replace=force)
    except BaseException:
        for folder in reversed(made):  # a run that wrote nothing leaves no folder of its own either
            with contextlib.suppress(OSError):
                folder.rmdir()
        raise
    return WrittenKeys(tuple(path for folder, name in pairs for path in _pair_paths(folder, name)), checker_kept=add)
