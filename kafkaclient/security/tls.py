"""TLS for listeners and for a broker's own connections: Kafka's ``ssl.*`` settings turned into
:class:`ssl.SSLContext` objects, and the principal a client certificate names.

Key stores: ``PEM`` (a file holding the private key and the certificate chain, or the two
inline in ``ssl.keystore.key`` and ``ssl.keystore.certificate.chain``) and ``PKCS12`` (read with
``cryptography``); trust stores: a PEM file of CA certificates, inline PEM in
``ssl.truststore.certificates``, or PKCS12. ``JKS`` is Java's own format and is refused with one
line. TLS 1.2 is the lowest version ever negotiated.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import ssl
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kafkaclient.security.password import Password

__all__ = ["CLIENT_AUTH", "SslSettings", "TlsError", "client_context", "principal_of",
           "server_context"]

CLIENT_AUTH = ("none", "requested", "required")
PROTOCOLS = {"TLSv1.2": ssl.TLSVersion.TLSv1_2, "TLSv1.3": ssl.TLSVersion.TLSv1_3}
STORE_TYPES = ("PEM", "PKCS12")
_RDN_NAMES = {"commonName": "CN", "countryName": "C", "localityName": "L",
              "stateOrProvinceName": "ST", "organizationName": "O",
              "organizationalUnitName": "OU", "streetAddress": "STREET",
              "domainComponent": "DC", "userId": "UID"}


class TlsError(ValueError):
    """A key store or trust store that cannot be used; the message names the key, never a
    password."""


@dataclass(frozen=True, slots=True, kw_only=True)
class SslSettings:
    """One listener's ``ssl.*`` settings (after ``listener.name.<l>.`` prefixes and plain
    fallbacks are resolved)."""

    prefix: str = ""
    """Where the keys were found, for messages (``listener.name.ssl.`` or empty)."""
    keystore_type: str = "JKS"
    keystore_location: str | None = None
    keystore_password: Password | None = None
    key_password: Password | None = None
    keystore_certificate_chain: Password | None = None
    keystore_key: Password | None = None
    truststore_type: str = "JKS"
    truststore_location: str | None = None
    truststore_password: Password | None = None
    truststore_certificates: Password | None = None
    client_auth: str = "none"
    enabled_protocols: tuple[str, ...] = ("TLSv1.2", "TLSv1.3")
    endpoint_identification_algorithm: str = "https"

    @property
    def has_keystore(self) -> bool:
        return bool(self.keystore_location or self.keystore_key)

    @property
    def has_truststore(self) -> bool:
        return bool(self.truststore_location or self.truststore_certificates)


def _versions(ctx: ssl.SSLContext, settings: SslSettings) -> None:
    versions = sorted(PROTOCOLS[p] for p in settings.enabled_protocols)
    ctx.minimum_version = versions[0]
    ctx.maximum_version = versions[-1]


@contextlib.contextmanager
def _private_dir() -> Iterator[Path]:
    """A directory only this user can read, removed afterwards: OpenSSL loads keys from files."""
    path = Path(tempfile.mkdtemp(prefix="partctl-tls-"))
    try:
        os.chmod(path, 0o700)
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def _read(location: str, key: str) -> bytes:
    try:
        return Path(location).expanduser().read_bytes()
    except OSError as exc:
        raise TlsError(f"{key}: cannot read {location}: {exc.strerror or exc}") from None


def _pkcs12(data: bytes, password: Password | None, key: str) -> tuple[Any, Any, list[Any]]:
    from cryptography.hazmat.primitives.serialization import pkcs12

    try:
        return pkcs12.load_key_and_certificates(
            data, password.reveal().encode() if password is not None else None)
    except (ValueError, TypeError):
        raise TlsError(f"{key}: not a PKCS12 store, or a wrong password") from None


def _pem_of(cert: object) -> str:
    from cryptography.hazmat.primitives.serialization import Encoding

    return cert.public_bytes(Encoding.PEM).decode("ascii")  # type: ignore[attr-defined]


def _load_keystore(ctx: ssl.SSLContext, s: SslSettings) -> None:
    p = s.prefix
    kind = s.keystore_type.upper()
    if kind not in STORE_TYPES:
        raise TlsError(f"{p}ssl.keystore.type: {s.keystore_type} is not supported "
                       "(PEM or PKCS12)")
    with _private_dir() as tmp:
        if kind == "PEM":
            if s.keystore_key is not None:
                if s.keystore_certificate_chain is None:
                    raise TlsError(f"{p}ssl.keystore.key is set without "
                                   f"{p}ssl.keystore.certificate.chain")
                certfile, keyfile = tmp / "chain.pem", tmp / "key.pem"
                certfile.write_text(s.keystore_certificate_chain.reveal())
                keyfile.write_text(s.keystore_key.reveal())
                key_name = f"{p}ssl.keystore.key"
            else:
                assert s.keystore_location is not None
                certfile = Path(s.keystore_location).expanduser()
                keyfile = None
                _read(s.keystore_location, f"{p}ssl.keystore.location")
                key_name = f"{p}ssl.keystore.location"
            password = s.key_password or s.keystore_password
        else:
            assert s.keystore_location is not None
            key, cert, chain = _pkcs12(_read(s.keystore_location, f"{p}ssl.keystore.location"),
                                       s.keystore_password, f"{p}ssl.keystore.location")
            if key is None or cert is None:
                raise TlsError(f"{p}ssl.keystore.location: the PKCS12 store holds no key and "
                               "certificate")
            from cryptography.hazmat.primitives.serialization import (
                Encoding,
                NoEncryption,
                PrivateFormat,
            )
            certfile, keyfile = tmp / "chain.pem", tmp / "key.pem"
            certfile.write_text("".join(_pem_of(c) for c in [cert, *chain]))
            keyfile.write_bytes(key.private_bytes(
                Encoding.PEM, PrivateFormat.PKCS8, NoEncryption()))
            password, key_name = None, f"{p}ssl.keystore.location"
        try:
            ctx.load_cert_chain(str(certfile), str(keyfile) if keyfile else None,
                                password=password.reveal() if password is not None else None)
        except (ssl.SSLError, OSError):
            raise TlsError(f"{key_name}: no private key and certificate chain could be "
                           "loaded (a wrong key password, or not PEM)") from None


def _load_truststore(ctx: ssl.SSLContext, s: SslSettings) -> None:
    p = s.prefix
    try:
        if s.truststore_certificates is not None:
            ctx.load_verify_locations(cadata=s.truststore_certificates.reveal())
            return
        assert s.truststore_location is not None
        kind = s.truststore_type.upper()
        if kind not in STORE_TYPES:
            raise TlsError(f"{p}ssl.truststore.type: {s.truststore_type} is not supported "
                           "(PEM or PKCS12)")
        data = _read(s.truststore_location, f"{p}ssl.truststore.location")
        if kind == "PEM":
            ctx.load_verify_locations(cadata=data.decode("ascii", errors="replace"))
        else:
            from cryptography.hazmat.primitives.serialization import pkcs12

            try:
                store = pkcs12.load_pkcs12(data, s.truststore_password.reveal().encode()
                                           if s.truststore_password is not None else None)
            except (ValueError, TypeError):
                raise TlsError(f"{p}ssl.truststore.location: not a PKCS12 store, or a wrong "
                               "password") from None
            certs = [c.certificate for c in store.additional_certs]
            if store.cert is not None:
                certs.append(store.cert.certificate)
            if not certs:
                raise TlsError(f"{p}ssl.truststore.location: the store holds no certificate")
            ctx.load_verify_locations(cadata="".join(_pem_of(c) for c in certs))
    except ssl.SSLError:
        raise TlsError(f"{p}ssl.truststore: no CA certificate could be read (want PEM)") from None


def server_context(settings: SslSettings) -> ssl.SSLContext:
    """The context a TLS listener serves with: its key store, and with ``ssl.client.auth``
    requested or required, its trust store to check client certificates against."""
    if not settings.has_keystore:
        raise TlsError(f"{settings.prefix}ssl.keystore.location: a TLS listener needs a key "
                       "store (or ssl.keystore.key and ssl.keystore.certificate.chain)")
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    _versions(ctx, settings)
    _load_keystore(ctx, settings)
    if settings.client_auth != "none":
        if not settings.has_truststore:
            raise TlsError(f"{settings.prefix}ssl.truststore.location: ssl.client.auth="
                           f"{settings.client_auth} needs a trust store")
        _load_truststore(ctx, settings)
        ctx.verify_mode = (ssl.CERT_REQUIRED if settings.client_auth == "required"
                           else ssl.CERT_OPTIONAL)
    return ctx


def client_context(settings: SslSettings) -> ssl.SSLContext:
    """The context a broker connects to another broker's TLS listener with: the listener's
    trust store (else the system's CAs), its key store as the client certificate, the host
    name checked unless ``ssl.endpoint.identification.algorithm`` is empty."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    _versions(ctx, settings)
    if settings.has_truststore:
        _load_truststore(ctx, settings)
    else:
        ctx.load_default_certs()
    if settings.has_keystore:
        _load_keystore(ctx, settings)
    ctx.check_hostname = settings.endpoint_identification_algorithm.lower() == "https"
    return ctx


def _escape(value: str) -> str:
    out = "".join("\\" + c if c in ',+"\\<>;' else c for c in value)
    if out.startswith(("#", " ")):
        out = "\\" + out
    if out.endswith(" ") and not out.endswith("\\ "):
        out = out[:-1] + "\\ "
    return out


def principal_of(cert: dict[str, Any] | None) -> str:
    """Kafka's default principal for a TLS client: ``User:`` and the certificate's subject as
    RFC 2253 writes it (most specific first, as Java's X500Principal.getName()), or
    ``User:ANONYMOUS`` without a verified certificate."""
    if not cert or "subject" not in cert:
        return "User:ANONYMOUS"
    rdns = []
    for rdn in reversed(cert["subject"]):
        rdns.append("+".join(f"{_RDN_NAMES.get(k, k)}={_escape(v)}" for k, v in rdn))
    return "User:" + ",".join(rdns)
