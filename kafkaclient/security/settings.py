"""A client's security, from Kafka's keys: ``security.protocol``, ``ssl.*`` and ``sasl.*``
(a tool's ``--command-config``, a broker's own inter-broker connections).

Pure: values are checked here (one :class:`SecurityConfigError` naming the key, never a secret);
files are read when a TLS context is built (:mod:`kafkaclient.security.tls`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from kafkaclient.security.jaas import JaasError, parse_jaas
from kafkaclient.security.password import Password
from kafkaclient.security.scram import MECHANISMS as SCRAM_MECHANISMS
from kafkaclient.security.tls import CLIENT_AUTH, PROTOCOLS, SslSettings

__all__ = ["CLIENT_PROTOCOLS", "MECHANISMS", "PLAINTEXT_CLIENT", "ClientSecurity",
           "SecurityConfigError", "client_properties_security", "listener_value",
           "read_client_properties", "ssl_settings"]

MECHANISMS = ("PLAIN", *SCRAM_MECHANISMS)
"""The SASL mechanisms partctl serves and speaks."""
MAX_PROPERTIES_BYTES = 1 << 20
"""A client properties file larger than this is refused unread."""


class SecurityConfigError(ValueError):
    """A security setting the broker cannot start with; the message names the key and never
    a secret."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ClientSecurity:
    """How a client connects: a broker or controller to the inter-broker listener, a tool to a
    cluster (``--command-config``)."""

    protocol: str = "PLAINTEXT"
    ssl: SslSettings | None = None
    mechanism: str | None = None
    username: str | None = None
    password: Password | None = field(default=None, repr=False)


PLAINTEXT_CLIENT = ClientSecurity()


def listener_value(props: Mapping[str, str], listener: str, key: str) -> tuple[str | None, str]:
    """The value of ``key`` for ``listener`` and the key it came from: the prefixed key first,
    then the plain one."""
    prefixed = f"listener.name.{listener.lower()}.{key}"
    if prefixed in props:
        return props[prefixed], prefixed
    return props.get(key), key


def ssl_settings(props: Mapping[str, str], listener: str) -> SslSettings:
    """The TLS settings of ``listener`` (``client`` for a client's own keys) from Kafka's
    ``ssl.*`` keys, checked; files are read when a context is built (:mod:`kafkaclient.security.tls`)."""
    def get(key: str) -> str | None:
        value = listener_value(props, listener, key)[0]
        return value.strip() if value is not None else None

    def secret(key: str) -> Password | None:
        value = listener_value(props, listener, key)[0]
        return Password(value) if value is not None and value != "" else None

    client_auth, key = listener_value(props, listener, "ssl.client.auth")
    client_auth = (client_auth or "none").strip().lower()
    if client_auth not in CLIENT_AUTH:
        raise SecurityConfigError(f"{key}: {client_auth!r} is not one of "
                                  f"{', '.join(CLIENT_AUTH)}")
    protocols_text, key = listener_value(props, listener, "ssl.enabled.protocols")
    protocols = tuple(p.strip() for p in (protocols_text or "TLSv1.2,TLSv1.3").split(",")
                      if p.strip())
    bad = [p for p in protocols if p not in PROTOCOLS]
    if bad or not protocols:
        raise SecurityConfigError(f"{key}: {', '.join(bad) or 'empty'}: only TLSv1.2 and "
                                  "TLSv1.3 are enabled")
    protocol, key = listener_value(props, listener, "ssl.protocol")
    if protocol is not None and protocol.strip() not in ("TLS", "TLSv1.2", "TLSv1.3"):
        raise SecurityConfigError(f"{key}: {protocol.strip()}: TLS 1.2 or later only "
                                  "(TLS, TLSv1.2, TLSv1.3)")
    prefix = (f"listener.name.{listener.lower()}."
              if any(k.startswith(f"listener.name.{listener.lower()}.ssl.") for k in props)
              else "")
    keystore_type = (get("ssl.keystore.type") or "JKS").upper()
    truststore_type = (get("ssl.truststore.type") or "JKS").upper()
    for name, value in (("ssl.keystore.type", keystore_type),
                        ("ssl.truststore.type", truststore_type)):
        if value == "JKS" and (get(name.replace(".type", ".location")) is not None):
            raise SecurityConfigError(f"{prefix}{name}: JKS is Java's own format and not "
                                      "supported: use PEM or PKCS12")
        if value not in ("JKS", "PEM", "PKCS12"):
            raise SecurityConfigError(f"{prefix}{name}: {value} is not supported "
                                      "(PEM or PKCS12)")
    return SslSettings(
        prefix=prefix, keystore_type=keystore_type,
        keystore_location=get("ssl.keystore.location"),
        keystore_password=secret("ssl.keystore.password"),
        key_password=secret("ssl.key.password"),
        keystore_certificate_chain=secret("ssl.keystore.certificate.chain"),
        keystore_key=secret("ssl.keystore.key"),
        truststore_type=truststore_type,
        truststore_location=get("ssl.truststore.location"),
        truststore_password=secret("ssl.truststore.password"),
        truststore_certificates=secret("ssl.truststore.certificates"),
        client_auth=client_auth, enabled_protocols=protocols,
        endpoint_identification_algorithm=(get("ssl.endpoint.identification.algorithm")
                                           or "https"),
    )


CLIENT_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")


def client_properties_security(props: Mapping[str, str]) -> ClientSecurity:
    """A client's security from Kafka's client keys (a tool's ``--command-config``):
    ``security.protocol``, ``ssl.truststore.*`` / ``ssl.keystore.*``, ``sasl.mechanism`` and
    the username and password of ``sasl.jaas.config``."""
    protocol = props.get("security.protocol", "PLAINTEXT").strip().upper()
    if protocol not in CLIENT_PROTOCOLS:
        raise SecurityConfigError(f"security.protocol: {protocol!r} is not one of "
                                  f"{', '.join(CLIENT_PROTOCOLS)}")
    tls = ssl_settings(props, "client") if protocol.endswith("SSL") else None
    if not protocol.startswith("SASL"):
        return ClientSecurity(protocol=protocol, ssl=tls)
    mech = props.get("sasl.mechanism", "GSSAPI").strip().upper()
    if mech not in MECHANISMS:
        raise SecurityConfigError(f"sasl.mechanism: {mech} is not supported (one of "
                                  f"{', '.join(MECHANISMS)})")
    text = props.get("sasl.jaas.config")
    if text is None:
        raise SecurityConfigError("sasl.jaas.config: needed for SASL (username=\"...\" "
                                  "password=\"...\")")
    try:
        entry = parse_jaas(text)
    except JaasError as exc:
        raise SecurityConfigError(str(exc)) from None
    username, password = entry.option("username"), entry.options.get("password")
    if not username or password is None:
        raise SecurityConfigError("sasl.jaas.config: give username=\"...\" password=\"...\"")
    return ClientSecurity(protocol=protocol, ssl=tls, mechanism=mech,
                          username=username, password=password)


def read_client_properties(path: str) -> ClientSecurity:
    """A client's security from a Kafka client properties file (a tool's ``--command-config``).
    :class:`SecurityConfigError`, one line naming the file (and the key), when it cannot be read
    or says something partctl cannot do; never a secret."""
    from kafkaclient.properties import PropertiesError, parse_properties

    try:
        with open(path, "rb") as f:
            data = f.read(MAX_PROPERTIES_BYTES + 1)
    except OSError as exc:
        raise SecurityConfigError(f"cannot read the client properties {path}: "
                                  f"{exc.strerror or type(exc).__name__}") from None
    if len(data) > MAX_PROPERTIES_BYTES:
        raise SecurityConfigError(f"client properties {path}: larger than "
                                  f"{MAX_PROPERTIES_BYTES >> 20} MiB, not a properties file")
    try:
        props = {p.key: p.value for p in parse_properties(data)}
        return client_properties_security(props)
    except (PropertiesError, SecurityConfigError, UnicodeDecodeError) as exc:
        raise SecurityConfigError(f"client properties {path}: {exc}") from None
