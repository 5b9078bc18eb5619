"""A throwaway certificate authority for the security tests, made with ``cryptography`` in a
temporary directory: the CA, a broker certificate for 127.0.0.1 and localhost, client
certificates (valid, expired, and one from an authority nobody trusts), as PEM files."""

from __future__ import annotations

import datetime
import ipaddress
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

__all__ = ["Material", "make_material"]


@dataclass(frozen=True)
class Material:
    directory: Path
    ca: Path
    broker_keystore: Path
    """The broker's key and certificate in one PEM file (ssl.keystore.type=PEM)."""
    broker_cert: Path
    broker_key: Path
    client_cert: Path
    client_key: Path
    expired_cert: Path
    expired_key: Path
    rogue_ca: Path
    rogue_cert: Path
    rogue_key: Path
    expired_broker_keystore: Path


def _key() -> ec.EllipticCurvePrivateKey:
    return ec.generate_private_key(ec.SECP256R1())


def _name(cn: str, org: str = "partctl tests") -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COUNTRY_NAME, "NL"),
                      x509.NameAttribute(NameOID.ORGANIZATION_NAME, org),
                      x509.NameAttribute(NameOID.COMMON_NAME, cn)])


def _ca(cn: str) -> tuple[ec.EllipticCurvePrivateKey, x509.Certificate]:
    key = _key()
    now = datetime.datetime.now(datetime.UTC)
    cert = (x509.CertificateBuilder().subject_name(_name(cn)).issuer_name(_name(cn))
            .public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(days=1))
            .not_valid_after(now + datetime.timedelta(days=30))
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .add_extension(x509.KeyUsage(digital_signature=True, key_cert_sign=True,
                                         crl_sign=True, content_commitment=False,
                                         key_encipherment=False, data_encipherment=False,
                                         key_agreement=False, encipher_only=False,
                                         decipher_only=False), critical=True)
            .sign(key, hashes.SHA256()))
    return key, cert


def _leaf(ca: tuple[ec.EllipticCurvePrivateKey, x509.Certificate], cn: str, *,
          server: bool, expired: bool = False
          ) -> tuple[ec.EllipticCurvePrivateKey, x509.Certificate]:
    key = _key()
    now = datetime.datetime.now(datetime.UTC)
    start, end = ((now - datetime.timedelta(days=10), now - datetime.timedelta(days=1))
                  if expired else (now - datetime.timedelta(days=1),
                                   now + datetime.timedelta(days=30)))
    builder = (x509.CertificateBuilder().subject_name(_name(cn)).issuer_name(ca[1].subject)
               .public_key(key.public_key()).serial_number(x509.random_serial_number())
               .not_valid_before(start).not_valid_after(end)
               .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True))
    if server:
        builder = builder.add_extension(x509.SubjectAlternativeName([
            x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
            critical=False)
    return key, builder.sign(ca[0], hashes.SHA256())


def _pem_key(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                             serialization.NoEncryption())


def _pem(cert: x509.Certificate) -> bytes:
    return cert.public_bytes(serialization.Encoding.PEM)


def make_material(directory: Path) -> Material:
    directory.mkdir(parents=True, exist_ok=True)
    ca = _ca("partctl test CA")
    rogue = _ca("nobody trusts this CA")
    files: dict[str, Path] = {}

    def write(name: str, data: bytes) -> Path:
        path = directory / name
        path.write_bytes(data)
        path.chmod(0o600)
        files[name] = path
        return path

    broker = _leaf(ca, "broker", server=True)
    expired_broker = _leaf(ca, "broker", server=True, expired=True)
    client = _leaf(ca, "alice", server=False)
    expired = _leaf(ca, "mallory", server=False, expired=True)
    rogue_client = _leaf(rogue, "eve", server=False)
    return Material(
        directory=directory,
        ca=write("ca.pem", _pem(ca[1])),
        broker_keystore=write("broker-keystore.pem", _pem_key(broker[0]) + _pem(broker[1])),
        broker_cert=write("broker.pem", _pem(broker[1])),
        broker_key=write("broker.key", _pem_key(broker[0])),
        client_cert=write("client.pem", _pem(client[1])),
        client_key=write("client.key", _pem_key(client[0])),
        expired_cert=write("expired.pem", _pem(expired[1])),
        expired_key=write("expired.key", _pem_key(expired[0])),
        rogue_ca=write("rogue-ca.pem", _pem(rogue[1])),
        rogue_cert=write("rogue.pem", _pem(rogue_client[1])),
        rogue_key=write("rogue.key", _pem_key(rogue_client[0])),
        expired_broker_keystore=write("expired-broker.pem",
                                      _pem_key(expired_broker[0]) + _pem(expired_broker[1])),
    )
