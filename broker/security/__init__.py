"""Listener security: TLS and SCRAM (:mod:`kafkaclient.security`), SASL PLAIN and SCRAM (:mod:`.sasl`),
their settings from Kafka's keys (:mod:`.settings`), the client side for a broker's own
connections (:mod:`kafkaclient.security`) and the SCRAM credentials kept at ``/config/users``
(:mod:`.credentials`)."""

from broker.security.settings import (
    ListenerSecurity,
    SaslSettings,
    client_security,
    hides_value,
    is_security_key,
    is_sensitive,
    listener_security,
)
from kafkaclient.security.password import Password
from kafkaclient.security.settings import (
    MECHANISMS,
    PLAINTEXT_CLIENT,
    ClientSecurity,
    SecurityConfigError,
)
from kafkaclient.security.tls import SslSettings, TlsError

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
