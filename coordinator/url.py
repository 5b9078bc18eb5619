"""Coordinator URLs: ``memory://NAME``, ``zookeeper://h1:p1,h2:p2/chroot``, ``etcd://h:p/prefix``,
and the backends their schemes name.

A backend is a :class:`~coordinator.base.Coordinator` subclass registered under its scheme as an
entry point of the group ``partctl.coordinators`` (tooz's and APScheduler's way), so that another
distribution can add one::

    [project.entry-points."partctl.coordinators"]
    mystore = "mypackage.mystore:MyStoreCoordinator"

The class gives ``default_port`` (None: its URL names a store, ``scheme://NAME``, not hosts) and
``from_url(parsed, **options)``. Its module, and the client library that imports, are loaded
only when a URL of its scheme is parsed or connected to.
"""

from __future__ import annotations

import functools
import urllib.parse
from dataclasses import dataclass, field
from importlib.metadata import EntryPoint, entry_points
from typing import TYPE_CHECKING, Any

from coordinator.credentials import Credentials, CredentialsError, from_environment
from coordinator.errors import CoordinatorError, InvalidURL

if TYPE_CHECKING:
    from coordinator.base import Coordinator

GROUP = "partctl.coordinators"


@functools.cache
def _registered() -> dict[str, EntryPoint]:
    """scheme -> entry point, read once from the installed distributions' metadata (the first
    distribution on sys.path wins a scheme two of them register)."""
    found: dict[str, EntryPoint] = {}
    for entry in entry_points(group=GROUP):
        found.setdefault(entry.name.lower(), entry)
    return found


def schemes() -> list[str]:
    """The schemes of the registered backends, sorted; none is imported."""
    return sorted(_registered())


def backend(scheme: str) -> type[Coordinator]:
    """The backend class registered for ``scheme``, imported now if it was not yet.

    :class:`InvalidURL` for a scheme no backend registered, naming those that did."""
    entry = _registered().get(scheme)
    if entry is None:
        raise _unknown_scheme(scheme, "")
    from coordinator.base import Coordinator

    try:
        cls = entry.load()
    except Exception as exc:
        raise CoordinatorError(f"coordinator backend {scheme!r} ({entry.value}) "
                               f"could not be loaded: {exc!r}") from exc
    if not (isinstance(cls, type) and issubclass(cls, Coordinator)
            and hasattr(cls, "default_port")):
        raise CoordinatorError(f"coordinator backend {scheme!r} ({entry.value}) is not a "
                               f"Coordinator subclass with a default_port")
    return cls


def _unknown_scheme(scheme: str, where: str) -> InvalidURL:
    known = ", ".join(schemes())
    if not known:  # an environment where partctl's own distribution is not installed
        return InvalidURL(f"unknown coordinator scheme {redact(scheme)!r}{where}: no backend "
                          f"is registered under the entry points {GROUP!r}; is partctl "
                          f"installed (pip install -e .)?")
    return InvalidURL(f"unknown coordinator scheme {redact(scheme)!r}{where} (known: {known})")


@dataclass(frozen=True, slots=True, kw_only=True)
class CoordinatorURL:
    """A parsed URL. ``hosts`` are (host, port) pairs in failover order; ``name`` is the memory
    store's name; ``root`` the chroot (ZooKeeper) or key prefix (etcd), '' for none;
    ``credentials`` the URL's user info, if it has any."""

    scheme: str
    hosts: tuple[tuple[str, int], ...]
    name: str
    root: str
    raw: str = field(repr=False)
    """The URL as given, perhaps with a password: show :attr:`display`, never this."""
    credentials: Credentials | None = field(default=None, repr=False)

    @property
    def display(self) -> str:
        return redact(self.raw)


def redact(url: object) -> str:
    """``url`` as it may be shown (errors, listings, logs, reprs): credentials become ``***``.

    Everything before the last '@' ahead of the query counts as credentials (a password may hold
    a '/', so the first '/' does not end them: better to mask too much than to show a secret),
    and every value of a query or fragment is masked too. A value that is not a string is shown
    by its type only."""
    if not isinstance(url, str):
        return f"<{type(url).__name__}>"
    scheme, sep, rest = url.partition("://")
    if not sep:
        scheme, rest = "", url
    cut = min((i for i in (rest.find("?"), rest.find("#")) if i >= 0), default=len(rest))
    main, tail = rest[:cut], rest[cut:]
    at = main.rfind("@")
    if at >= 0:
        main = "***" + main[at:]
    if tail:
        query, hash_, _ = tail.partition("#")
        if query:
            query = "?" + "&".join(
                f"{k}=***" if eq else "***"
                for k, eq, _v in (item.partition("=") for item in query[1:].split("&")))
        tail = query + ("#***" if hash_ else "")
    return f"{scheme}{sep}{main}{tail}"


def without_credentials(url: str) -> str:
    """``url`` with the user info of its host part left out (for a URL that is stored, as a
    job's is: the secret stays where it came from)."""
    scheme, sep, rest = url.partition("://")
    netloc, slash, path = rest.partition("/")
    if not sep or "@" not in netloc:
        return url
    return f"{scheme}{sep}{netloc.rpartition('@')[2]}{slash}{path}"


def _user_info(text: str, shown: str) -> Credentials:
    user, colon, password = text.partition(":")
    if not colon or not user or not password:
        raise InvalidURL(f"credentials in a coordinator URL are user:password, both "
                         f"non-empty: {shown!r}")
    try:
        return Credentials(urllib.parse.unquote(user, errors="strict"),
                           urllib.parse.unquote(password, errors="strict"))
    except (UnicodeDecodeError, CredentialsError):
        raise InvalidURL(f"bad credentials in {shown!r}") from None


def parse(url: str) -> CoordinatorURL:
    """Parse ``url``; :class:`InvalidURL` says why not, showing the URL redacted (see
    :func:`redact`). User info before the hosts (``user:password@``, percent-encoded) becomes
    :attr:`CoordinatorURL.credentials`; a ``@`` after the first ``/`` belongs to the root, so a
    ``/`` in a password must be written ``%2F``."""
    shown = redact(url)
    if not isinstance(url, str) or "://" not in url:
        raise InvalidURL(f"not a coordinator URL (want scheme://...): {shown!r}")
    scheme, rest = url.split("://", 1)
    scheme = scheme.lower()
    if scheme not in _registered():
        raise _unknown_scheme(scheme, f" in {shown!r}")
    if "?" in rest or "#" in rest:
        raise InvalidURL(f"query and fragment are not supported in {shown!r}")
    netloc, _, path = rest.partition("/")
    credentials = None
    if "@" in netloc:
        info, _, netloc = netloc.rpartition("@")
        credentials = _user_info(info, shown)
    root = ("/" + path).rstrip("/") if path else ""

    def part(text: str) -> str:
        """A piece of the URL for an error message; none when a '@' in the path may mean a
        password (one holding a '/') was split off into it."""
        return f" {text!r}" if "@" not in url else ""

    default_port = backend(scheme).default_port
    if default_port is None:  # the URL names a store
        if not netloc or "," in netloc or ":" in netloc:
            raise InvalidURL(f"{scheme} URL needs a store name, {scheme}://NAME: {shown!r}")
        if credentials is not None:
            raise InvalidURL(f"{scheme} URLs take no credentials: {shown!r}")
        return CoordinatorURL(scheme=scheme, hosts=(), name=netloc, root=root, raw=url)
    hosts = []
    for item in netloc.split(","):
        item = item.strip()
        if not item:
            raise InvalidURL(f"empty host in {shown!r}")
        host, sep, port_text = item.rpartition(":") if ":" in item else (item, "", "")
        if not sep:
            host, port_text = item, ""
        if host.startswith("[") and host.endswith("]"):
            host = host[1:-1]
        if not host or any(c in host for c in " /@"):
            raise InvalidURL(f"bad host{part(item)} in {shown!r}")
        if port_text:
            if not port_text.isdigit() or not 0 < int(port_text) < 65536:
                raise InvalidURL(f"bad port{part(port_text)} in {shown!r}")
            port = int(port_text)
        else:
            port = default_port
        hosts.append((host, port))
    if root:
        from coordinator.paths import validate

        try:
            validate(root)
        except Exception as exc:
            raise InvalidURL(f"bad root path{part(root)} in {shown!r}") from exc
    return CoordinatorURL(scheme=scheme, hosts=tuple(hosts), name="", root=root, raw=url,
                          credentials=credentials)


def connect(url: str, *, credentials: Credentials | None = None, **options: Any) -> Coordinator:
    """Open a session on the coordinator named by ``url``.

    Options common to every backend: ``timeout`` (seconds to connect before giving up with
    :class:`~coordinator.errors.ConnectionFailed`, default 10) and ``session_timeout`` (seconds a
    session outlives a lost connection, default 10). Backends take a few more of their own.

    A backend of servers (not a memory store) authenticates with ``credentials``, else the URL's
    user info, else the environment's (see :mod:`coordinator.credentials`); without any it
    connects anonymously.
    """
    parsed = parse(url)
    cls = backend(parsed.scheme)
    if cls.default_port is not None:
        found = credentials or parsed.credentials or from_environment()
        if found is not None:
            options["credentials"] = found
    elif credentials is not None:
        raise InvalidURL(f"{parsed.scheme} coordinators take no credentials")
    return cls.from_url(parsed, **options)
