"""Each listener's security, read from Kafka's keys: ``ssl.*`` and ``sasl.*``, per listener
under ``listener.name.<listener>.`` with the plain keys as fallbacks (as Kafka resolves them),
and the credentials a broker uses on its own inter-broker connections.

Pure: values are checked here (one :class:`SecurityConfigError` naming the key); files are read
when the broker starts (:mod:`kafkaclient.security.tls`).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType

from coordinator.url import redact
from kafkaclient.security.jaas import PLAIN_MODULE, SCRAM_MODULE, JaasConfig, JaasError, parse_jaas
from kafkaclient.security.password import Password
from kafkaclient.security.scram import MECHANISMS as SCRAM_MECHANISMS
from kafkaclient.security.settings import (
    MECHANISMS,
    ClientSecurity,
    SecurityConfigError,
    listener_value,
    ssl_settings,
)
from kafkaclient.security.tls import SslSettings

__all__ = ["ListenerSecurity", "SaslSettings",
           "hides_value", "is_security_key", "is_sensitive",
           "listener_security", "client_security"]

SSL_PROTOCOLS = ("SSL", "SASL_SSL")
SASL_PROTOCOLS = ("SASL_PLAINTEXT", "SASL_SSL")

_SSL_KEYS = frozenset({
    "ssl.keystore.type", "ssl.keystore.location", "ssl.keystore.password", "ssl.key.password",
    "ssl.keystore.certificate.chain", "ssl.keystore.key", "ssl.truststore.type",
    "ssl.truststore.location", "ssl.truststore.password", "ssl.truststore.certificates",
    "ssl.client.auth", "ssl.enabled.protocols", "ssl.protocol",
    "ssl.endpoint.identification.algorithm",
})
_SASL_KEYS = frozenset({"sasl.enabled.mechanisms", "connections.max.reauth.ms"})
_GLOBAL_KEYS = frozenset({"sasl.mechanism.inter.broker.protocol"})
_SENSITIVE = frozenset({"ssl.keystore.password", "ssl.key.password", "ssl.keystore.key",
                        "ssl.keystore.certificate.chain", "ssl.truststore.password",
                        "ssl.truststore.certificates"})
_URL_KEYS = frozenset({"zookeeper.connect", "partctl.coordinator", "remote.log.storage.url",
                       "remote.log.storage.s3.endpoint"})
"""Keys whose value is a URL (or ZooKeeper's connect string) that may carry credentials."""
_PREFIXED = re.compile(r"listener\.name\.([^.]+)\.(.+)")
_JAAS = re.compile(r"[a-z0-9-]+\.sasl\.jaas\.config")


def _unprefixed(key: str) -> tuple[str | None, str]:
    m = _PREFIXED.fullmatch(key)
    return (m.group(1), m.group(2)) if m else (None, key)


def is_security_key(key: str) -> bool:
    """Whether ``key`` is a security setting read here (plain or listener-prefixed)."""
    listener, rest = _unprefixed(key)
    if listener is None:
        return key in _SSL_KEYS or key in _SASL_KEYS or key in _GLOBAL_KEYS
    return rest in _SSL_KEYS or rest in _SASL_KEYS or bool(_JAAS.fullmatch(rest))


def is_sensitive(key: str) -> bool:
    """Kafka's PASSWORD keys: never shown (DescribeConfigs, logs)."""
    _, rest = _unprefixed(key)
    return rest in _SENSITIVE or rest.endswith("sasl.jaas.config")


def hides_value(key: str, value: str | None) -> bool:
    """Whether ``key``'s value is never shown (DescribeConfigs answers null with
    ``is_sensitive``, as Kafka does for its PASSWORD keys): a sensitive key whatever its value,
    and a URL-valued key (``zookeeper.connect``, ``partctl.coordinator``, the remote storage
    URL) whose value carries credentials: user info before a host, or a query (whose values
    may be keys or tokens). Such a URL without credentials is shown as it is."""
    if is_sensitive(key):
        return True
    if key not in _URL_KEYS or value is None:
        return False
    text = value.strip()
    return redact(text) != text


@dataclass(frozen=True, slots=True, kw_only=True)
class SaslSettings:
    """A SASL listener's mechanisms, PLAIN's users, and the JAAS entries by mechanism."""

    mechanisms: tuple[str, ...]
    plain_users: Mapping[str, Password] = field(default_factory=dict, repr=False)
    jaas: Mapping[str, JaasConfig] = field(default_factory=dict, repr=False)
    reauth_ms: int = 0
    """``connections.max.reauth.ms`` (KIP-368): how long a session lasts before the client must
    re-authenticate; 0, as long as the connection."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ListenerSecurity:
    name: str
    protocol: str
    ssl: SslSettings | None = None
    sasl: SaslSettings | None = None


def _mechanism_names(text: str, key: str) -> tuple[str, ...]:
    names = tuple(dict.fromkeys(m.strip().upper() for m in text.split(",") if m.strip()))
    bad = [m for m in names if m not in MECHANISMS]
    if bad:
        raise SecurityConfigError(f"{key}: {', '.join(bad)} not supported (supported: "
                                  f"{', '.join(MECHANISMS)})")
    if not names:
        raise SecurityConfigError(f"{key}: no mechanism enabled")
    return names


def _sasl(props: Mapping[str, str], listener: str) -> SaslSettings:
    text, key = listener_value(props, listener, "sasl.enabled.mechanisms")
    if text is None:
        raise SecurityConfigError(f"sasl.enabled.mechanisms: listener {listener} uses SASL; "
                                  f"enable PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512 (Kafka's "
                                  "default, GSSAPI, is not supported)")
    mechanisms = _mechanism_names(text, key)
    jaas: dict[str, JaasConfig] = {}
    prefix = f"listener.name.{listener.lower()}."
    for k, value in props.items():
        if k.startswith(prefix) and k.endswith(".sasl.jaas.config"):
            mech = k[len(prefix):-len(".sasl.jaas.config")].upper()
            try:
                jaas[mech] = parse_jaas(value)
            except JaasError as exc:
                raise SecurityConfigError(f"{k}: {exc}".replace("sasl.jaas.config: ", "")
                                          ) from None
    plain_users: dict[str, Password] = {}
    if "PLAIN" in mechanisms:
        entry = jaas.get("PLAIN")
        if entry is None or entry.module != PLAIN_MODULE:
            raise SecurityConfigError(f"{prefix}plain.sasl.jaas.config: PLAIN is enabled on "
                                      f"{listener}: name its users with {PLAIN_MODULE} "
                                      "required user_<name>=\"<password>\" ...;")
        plain_users = entry.plain_users()
    for mech in SCRAM_MECHANISMS:
        entry = jaas.get(mech)
        if entry is not None and entry.module != SCRAM_MODULE:
            raise SecurityConfigError(f"{prefix}{mech.lower()}.sasl.jaas.config: want "
                                      f"{SCRAM_MODULE}")
    reauth_text, key = listener_value(props, listener, "connections.max.reauth.ms")
    reauth = 0
    if reauth_text is not None:
        if not reauth_text.strip().isdigit():
            raise SecurityConfigError(f"{key}: not a number of type LONG")
        reauth = int(reauth_text.strip())
    return SaslSettings(mechanisms=mechanisms, plain_users=MappingProxyType(plain_users),
                        jaas=MappingProxyType(jaas), reauth_ms=reauth)


def listener_security(listeners: Sequence[tuple[str, str]], props: Mapping[str, str], *,
                      check_names: bool = True) -> dict[str, ListenerSecurity]:
    """Each (name, protocol) listener's settings from the security keys in ``props`` (with
    ``check_names``, a key prefixed with a listener not among them is refused)."""
    out = {}
    for name, protocol in listeners:
        ssl = ssl_settings(props, name) if protocol in SSL_PROTOCOLS else None
        if ssl is not None and check_names and not ssl.has_keystore:
            raise SecurityConfigError(
                f"{ssl.prefix or f'listener.name.{name.lower()}.'}ssl.keystore.location: "
                f"listener {name} uses {protocol}: give its key store (or ssl.keystore.key "
                "and ssl.keystore.certificate.chain)")
        out[name] = ListenerSecurity(
            name=name, protocol=protocol, ssl=ssl,
            sasl=_sasl(props, name) if protocol in SASL_PROTOCOLS else None)
    for key in props if check_names else ():
        listener, _ = _unprefixed(key)
        if listener is not None and listener.upper() not in {n for n, _ in listeners}:
            raise SecurityConfigError(f"{key}: no listener is named {listener.upper()}")
    return out


def client_security(inter: ListenerSecurity, props: Mapping[str, str]) -> ClientSecurity:
    """What this broker's own connections to the inter-broker listener ``inter`` use: its TLS
    settings, and for SASL ``sasl.mechanism.inter.broker.protocol`` with the username and
    password of that mechanism's JAAS entry on the listener."""
    if inter.sasl is None:
        return ClientSecurity(protocol=inter.protocol, ssl=inter.ssl)
    mech = props.get("sasl.mechanism.inter.broker.protocol", "GSSAPI").strip().upper()
    if mech not in MECHANISMS:
        raise SecurityConfigError(f"sasl.mechanism.inter.broker.protocol: {mech} is not "
                                  f"supported (set one of {', '.join(MECHANISMS)})")
    if mech not in inter.sasl.mechanisms:
        raise SecurityConfigError(f"sasl.mechanism.inter.broker.protocol: {mech} is not "
                                  f"enabled on the inter-broker listener {inter.name}")
    key = f"listener.name.{inter.name.lower()}.{mech.lower()}.sasl.jaas.config"
    entry = inter.sasl.jaas.get(mech)
    username = entry.option("username") if entry is not None else None
    password = entry.options.get("password") if entry is not None else None
    if not username or password is None:
        raise SecurityConfigError(f"{key}: the inter-broker listener needs this broker's "
                                  "username and password (username=\"...\" "
                                  "password=\"...\")")
    return ClientSecurity(protocol=inter.protocol, ssl=inter.ssl, mechanism=mech,
                          username=username, password=password)
