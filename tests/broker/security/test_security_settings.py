"""Listener security without a process: SCRAM against RFC 7677's test vector and Kafka's
credential format, PLAIN and SCRAM sessions refusing what they must, the JAAS parser, and the
security keys of server.properties (one error naming the key, secrets never shown)."""

from __future__ import annotations

import base64
import re

import pytest

from broker.config import ConfigError, parse_config
from broker.security import Password
from broker.security.credentials import CredentialCache
from broker.security.sasl import SaslFailed, SaslSession
from broker.security.settings import SaslSettings
from kafkaclient.security.jaas import JaasError, parse_jaas
from kafkaclient.security.scram import (
    ScramClient,
    ScramCredential,
    ScramError,
    ScramServer,
    make_credential,
)

# RFC 7677 section 3
USER, PASSWORD = "user", "pencil"
CLIENT_NONCE = "rOprNGfwEbeRWgbNEkqO"
SERVER_NONCE = "%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0"
SALT = base64.b64decode("W22ZaJ0SNY7soEsUEjb6gQ==")
SERVER_FIRST = (f"r={CLIENT_NONCE}{SERVER_NONCE},s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096").encode()
CLIENT_FINAL = (f"c=biws,r={CLIENT_NONCE}{SERVER_NONCE},"
                "p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=").encode()
SERVER_FINAL = b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="


def test_scram_client_matches_rfc_7677() -> None:
    client = ScramClient("SCRAM-SHA-256", USER, PASSWORD, nonce=CLIENT_NONCE)
    assert client.first() == f"n,,n=user,r={CLIENT_NONCE}".encode()
    assert client.final(SERVER_FIRST) == CLIENT_FINAL
    client.verify(SERVER_FINAL)
    with pytest.raises(ScramError):
        client.verify(b"v=" + base64.b64encode(b"\0" * 32))


def test_scram_server_matches_rfc_7677_and_refuses_a_wrong_proof() -> None:
    credential = make_credential("SCRAM-SHA-256", PASSWORD, salt=SALT)
    server = ScramServer("SCRAM-SHA-256", {USER: credential}.get, nonce=lambda: SERVER_NONCE)
    assert server.step(f"n,,n=user,r={CLIENT_NONCE}".encode()) == SERVER_FIRST
    assert server.step(CLIENT_FINAL) == SERVER_FINAL
    assert server.complete and server.username == USER
    wrong = ScramServer("SCRAM-SHA-256", {USER: credential}.get, nonce=lambda: SERVER_NONCE)
    wrong.step(f"n,,n=user,r={CLIENT_NONCE}".encode())
    with pytest.raises(ScramError):
        wrong.step(CLIENT_FINAL.replace(b"p=dH", b"p=dX"))
    unknown = ScramServer("SCRAM-SHA-256", {}.get)
    with pytest.raises(ScramError):
        unknown.step(b"n,,n=nobody,r=abc")


def test_scram_sha_512_round_trip_and_kafkas_credential_format() -> None:
    credential = make_credential("SCRAM-SHA-512", "secret", iterations=8192)
    text = credential.encode()
    assert re.fullmatch(r"salt=[A-Za-z0-9+/=]+,stored_key=[A-Za-z0-9+/=]+,"
                        r"server_key=[A-Za-z0-9+/=]+,iterations=8192", text)
    assert ScramCredential.decode(text) == credential
    assert "secret" not in repr(credential)
    server = ScramServer("SCRAM-SHA-512", {"a,b=c": credential}.get)
    client = ScramClient("SCRAM-SHA-512", "a,b=c", "secret")
    client.verify(server.step(client.final(server.step(client.first()))))
    assert server.username == "a,b=c"


def test_sasl_sessions_plain_and_scram() -> None:
    settings = SaslSettings(mechanisms=("PLAIN", "SCRAM-SHA-512"),
                            plain_users={"bob": Password("pw")})
    cache = CredentialCache()
    cache.update("alice", {"SCRAM-SHA-512": make_credential("SCRAM-SHA-512", "a").encode()})
    plain = SaslSession(settings, cache)
    assert not plain.handshake("SCRAM-SHA-256") and plain.handshake("PLAIN")
    with pytest.raises(SaslFailed, match="Invalid username or password"):
        plain.step(b"\0bob\0nope")
    other = SaslSession(settings, cache)
    other.handshake("PLAIN")
    with pytest.raises(SaslFailed, match="authorization id"):
        other.step(b"carl\0bob\0pw")
    ok = SaslSession(settings, cache)
    ok.handshake("PLAIN")
    ok.step(b"\0bob\0pw")
    assert ok.principal == "User:bob"
    scram = SaslSession(settings, cache)
    scram.handshake("SCRAM-SHA-512")
    client = ScramClient("SCRAM-SHA-512", "alice", "a")
    client.verify(scram.step(client.final(scram.step(client.first()))))
    assert scram.principal == "User:alice"
    cache.update("alice", {})  # deleted: the next exchange fails
    gone = SaslSession(settings, cache)
    gone.handshake("SCRAM-SHA-512")
    with pytest.raises(SaslFailed, match="invalid credentials with SASL mechanism SCRAM-SHA-512"):
        gone.step(ScramClient("SCRAM-SHA-512", "alice", "a").first())


def test_jaas_entries() -> None:
    entry = parse_jaas('org.apache.kafka.common.security.plain.PlainLoginModule required '
                       'username="admin" password="a\\"b;c" user_admin="x" user_bob=y;')
    assert entry.option("password") == 'a"b;c'
    assert {k: v.reveal() for k, v in entry.plain_users().items()} == {"admin": "x", "bob": "y"}
    for bad in ('Module required user_a="s3cr3t"', 'Module sometimes user_a="s3cr3t";',
                'Module required user_a=;', 'required;'):
        with pytest.raises(JaasError) as failure:
            parse_jaas(bad)
        assert "s3cr3t" not in str(failure.value)


BASE = "broker.id=1\nzookeeper.connect=127.0.0.1:2181\n"
SASL = (BASE + "listeners=SASL_SSL://h:1\ninter.broker.listener.name=SASL_SSL\n"
        "ssl.keystore.type=PEM\nssl.keystore.location=/k.pem\n")
JAAS_PLAIN = ("listener.name.sasl_ssl.plain.sasl.jaas.config=org.apache.kafka.common.security."
              'plain.PlainLoginModule required username="admin" password="s3cr3t" '
              'user_admin="s3cr3t";\n')


@pytest.mark.parametrize(("text", "message"), [
    (SASL, "sasl.enabled.mechanisms: listener SASL_SSL uses SASL"),
    (SASL + "sasl.enabled.mechanisms=GSSAPI\n", "sasl.enabled.mechanisms: GSSAPI not supported"),
    (SASL + "sasl.enabled.mechanisms=PLAIN\n",
     "listener.name.sasl_ssl.plain.sasl.jaas.config: PLAIN is enabled"),
    (SASL + "sasl.enabled.mechanisms=PLAIN\n" + JAAS_PLAIN,
     "sasl.mechanism.inter.broker.protocol: GSSAPI is not supported"),
    (SASL + "sasl.enabled.mechanisms=PLAIN\nsasl.mechanism.inter.broker.protocol="
     "SCRAM-SHA-512\n" + JAAS_PLAIN,
     "sasl.mechanism.inter.broker.protocol: SCRAM-SHA-512 is not enabled"),
    (SASL + "sasl.enabled.mechanisms=SCRAM-SHA-512\nsasl.mechanism.inter.broker.protocol="
     "SCRAM-SHA-512\n", "scram-sha-512.sasl.jaas.config: the inter-broker listener needs"),
    (BASE + "listeners=SSL://h:1\nsecurity.inter.broker.protocol=SSL\n"
     "ssl.keystore.location=/k.jks\n", "ssl.keystore.type: JKS is Java's own format"),
    (BASE + "listeners=SSL://h:1\nsecurity.inter.broker.protocol=SSL\n"
     "ssl.keystore.type=PEM\nssl.keystore.location=/k\nssl.client.auth=maybe\n",
     "ssl.client.auth: 'maybe' is not one of none, requested, required"),
    (BASE + "listeners=SSL://h:1\nsecurity.inter.broker.protocol=SSL\n"
     "ssl.keystore.type=PEM\nssl.keystore.location=/k\nssl.enabled.protocols=TLSv1.1\n",
     "ssl.enabled.protocols: TLSv1.1: only TLSv1.2 and TLSv1.3"),
    (BASE + "listener.name.other.ssl.keystore.location=/k\n",
     "listener.name.other.ssl.keystore.location: no listener is named OTHER"),
])
def test_bad_security_settings_are_one_error_naming_the_key(text: str, message: str) -> None:
    with pytest.raises(ConfigError) as failure:
        parse_config(text)
    assert message in str(failure.value)
    assert "s3cr3t" not in str(failure.value)


def test_secure_settings_are_read_and_secrets_kept_out_of_the_described_properties() -> None:
    config = parse_config(
        SASL + "sasl.enabled.mechanisms=PLAIN,SCRAM-SHA-512\n"
        "sasl.mechanism.inter.broker.protocol=PLAIN\nssl.key.password=k3y\n"
        "listener.name.sasl_ssl.ssl.client.auth=required\n" + JAAS_PLAIN).config
    listener = config.listener_security["SASL_SSL"]
    assert listener.ssl is not None and listener.ssl.client_auth == "required"
    assert listener.sasl is not None and listener.sasl.mechanisms == ("PLAIN", "SCRAM-SHA-512")
    inter = config.inter_broker_security
    assert (inter.protocol, inter.mechanism, inter.username) == ("SASL_SSL", "PLAIN", "admin")
    assert inter.password is not None and inter.password.reveal() == "s3cr3t"
    shown = repr(config) + repr(dict(config.properties))
    assert "s3cr3t" not in shown and "k3y" not in shown
    assert config.properties["sasl.enabled.mechanisms"] == "PLAIN,SCRAM-SHA-512"


def test_re_authentication_is_read_per_listener() -> None:
    config = parse_config(SASL + "sasl.enabled.mechanisms=PLAIN\n"
                          "sasl.mechanism.inter.broker.protocol=PLAIN\n"
                          "listener.name.sasl_ssl.connections.max.reauth.ms=60000\n"
                          + JAAS_PLAIN).config
    sasl = config.listener_security["SASL_SSL"].sasl
    assert sasl is not None and sasl.reauth_ms == 60_000


def test_key_stores_pem_inline_and_pkcs12(tmp_path) -> None:  # type: ignore[no-untyped-def]
    from cryptography.hazmat.primitives.serialization import (
        BestAvailableEncryption,
        load_pem_private_key,
        pkcs12,
    )
    from cryptography.x509 import load_pem_x509_certificate

    from kafkaclient.security.tls import SslSettings, TlsError, client_context, server_context
    from tests.broker.tls_material import make_material

    m = make_material(tmp_path / "tls")
    server_context(SslSettings(keystore_type="PEM", keystore_location=str(m.broker_keystore)))
    inline = SslSettings(keystore_type="PEM",
                         keystore_certificate_chain=Password(m.broker_cert.read_text()),
                         keystore_key=Password(m.broker_key.read_text()),
                         truststore_type="PEM",
                         truststore_certificates=Password(m.ca.read_text()),
                         client_auth="required")
    server_context(inline)
    client_context(inline)
    key = load_pem_private_key(m.broker_key.read_bytes(), None)
    cert = load_pem_x509_certificate(m.broker_cert.read_bytes())
    store = tmp_path / "broker.p12"
    store.write_bytes(pkcs12.serialize_key_and_certificates(
        b"broker", key, cert, None, BestAvailableEncryption(b"st0re")))  # type: ignore[arg-type]
    server_context(SslSettings(keystore_type="PKCS12", keystore_location=str(store),
                               keystore_password=Password("st0re")))
    for bad, message in [
        (SslSettings(keystore_type="PKCS12", keystore_location=str(store),
                     keystore_password=Password("wr0ng")),
         "ssl.keystore.location: not a PKCS12 store, or a wrong password"),
        (SslSettings(keystore_type="PEM", keystore_location=str(tmp_path / "none.pem")),
         "ssl.keystore.location: cannot read"),
        (SslSettings(keystore_type="PEM", keystore_location=str(m.ca)),
         "ssl.keystore.location: no private key and certificate chain could be loaded"),
        (SslSettings(keystore_type="PEM", keystore_location=str(m.broker_keystore),
                     client_auth="required"),
         "ssl.truststore.location: ssl.client.auth=required needs a trust store"),
    ]:
        with pytest.raises(TlsError) as failure:
            server_context(bad)
        assert message in str(failure.value) and "wr0ng" not in str(failure.value)


def test_the_tls_principal_is_the_subject_as_rfc_2253_writes_it() -> None:
    from kafkaclient.security.tls import principal_of

    cert = {"subject": ((("countryName", "NL"),), (("organizationName", "Acme, Inc"),),
                        (("commonName", "alice"),))}
    assert principal_of(cert) == "User:CN=alice,O=Acme\\, Inc,C=NL"
    assert principal_of(None) == principal_of({}) == "User:ANONYMOUS"
