"""Listener security: TLS (:mod:`.tls`), SASL PLAIN and SCRAM (:mod:`.sasl`, :mod:`.scram`),
their settings from Kafka's keys (:mod:`.settings`), the client side for a broker's own
connections (:mod:`.client`) and the SCRAM credentials kept at ``/config/users``
(:mod:`.credentials`)."""

from broker.security.password import Password
from broker.security.settings import (
    MECHANISMS,
    PLAINTEXT_CLIENT,
    ClientSecurity,
    ListenerSecurity,
    SaslSettings,
    SecurityConfigError,
    client_security,
    hides_value,
    is_security_key,
    is_sensitive,
    listener_security,
)
from broker.security.tls import SslSettings, TlsError

__all__ = [
    "MECHANISMS",
    "PLAINTEXT_CLIENT",
    "ClientSecurity",
    "ListenerSecurity",
    "Password",
    "SaslSettings",
    "SecurityConfigError",
    "SslSettings",
    "TlsError",
    "client_security",
    "hides_value",
    "is_security_key",
    "is_sensitive",
    "listener_security",
]
