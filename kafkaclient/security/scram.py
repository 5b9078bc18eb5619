"""SCRAM (RFC 5802, with RFC 7677's SHA-256 and Kafka's SHA-512): credentials, and both sides
of the exchange, as pure functions and small state machines (no I/O).

A credential is stored as Kafka stores it in ``/config/users/<user>``: per mechanism the string
``salt=<b64>,stored_key=<b64>,server_key=<b64>,iterations=<n>``; the password itself is never
kept. The server's exchange is two rounds (client-first -> server-first, client-final ->
server-final); the client's mirrors it, for a broker authenticating to another broker.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import os
import secrets
from collections.abc import Callable
from dataclasses import dataclass

__all__ = [
    "MECHANISMS",
    "MAX_ITERATIONS",
    "ScramClient",
    "ScramCredential",
    "ScramCredentialsError",
    "ScramError",
    "ScramServer",
    "decode_saslname",
    "encode_saslname",
    "make_credential",
    "password_matches",
]

MECHANISMS: dict[str, tuple[str, int]] = {
    "SCRAM-SHA-256": ("sha256", 4096),
    "SCRAM-SHA-512": ("sha512", 4096),
}
"""Kafka's SCRAM mechanisms: their hash and minimum iterations."""
MAX_ITERATIONS = 16384
"""The most iterations Kafka accepts for a credential (AlterUserScramCredentials)."""
_GS2_HEADER = "n,,"


class ScramError(Exception):
    """The exchange failed: a protocol failure (a malformed message, a nonce that does not
    match) or, as :class:`ScramCredentialsError`, an unknown user or a wrong proof. The message
    is safe to log (it never holds a password or a proof)."""


class ScramCredentialsError(ScramError):
    """The client is not who it says: no credential for the user, or a wrong proof."""


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def _unb64(text: str, what: str) -> bytes:
    try:
        return base64.b64decode(text.encode("ascii"), validate=True)
    except (ValueError, UnicodeEncodeError):
        raise ScramError(f"{what} is not base64") from None


def _hmac(hash_name: str, key: bytes, data: bytes) -> bytes:
    return hmac.new(key, data, hash_name).digest()


def salted_password(hash_name: str, password: str, salt: bytes, iterations: int) -> bytes:
    """RFC 5802's Hi(): PBKDF2 with HMAC of the mechanism's hash."""
    return hashlib.pbkdf2_hmac(hash_name, password.encode("utf-8"), salt, iterations)


@dataclass(frozen=True, slots=True, kw_only=True)
class ScramCredential:
    """What the server keeps of a password (Kafka's ScramCredential)."""

    salt: bytes
    stored_key: bytes
    server_key: bytes
    iterations: int

    def encode(self) -> str:
        """Kafka's text form (ScramCredentialUtils.credentialToString)."""
        return (f"salt={_b64(self.salt)},stored_key={_b64(self.stored_key)},"
                f"server_key={_b64(self.server_key)},iterations={self.iterations}")

    @classmethod
    def decode(cls, text: str) -> ScramCredential:
        """Parse Kafka's text form; ValueError when it is not one."""
        fields: dict[str, str] = {}
        for part in text.split(","):
            key, sep, value = part.partition("=")
            if not sep:
                raise ValueError("a SCRAM credential is salt=,stored_key=,server_key=,"
                                 "iterations=")
            fields[key.strip()] = value.strip()
        try:
            iterations = int(fields["iterations"])
            return cls(salt=base64.b64decode(fields["salt"], validate=True),
                       stored_key=base64.b64decode(fields["stored_key"], validate=True),
                       server_key=base64.b64decode(fields["server_key"], validate=True),
                       iterations=iterations)
        except (KeyError, ValueError):
            raise ValueError("a SCRAM credential is salt=,stored_key=,server_key=,"
                             "iterations=") from None

    def __repr__(self) -> str:
        return f"ScramCredential(iterations={self.iterations})"


def make_credential(mechanism: str, password: str, *, iterations: int = 4096,
                    salt: bytes | None = None) -> ScramCredential:
    """A new credential for ``password`` (a random 32-byte salt unless one is given)."""
    hash_name, _ = MECHANISMS[mechanism]
    salt = salt or os.urandom(32)
    return credential_from_salted(
        mechanism, salted_password(hash_name, password, salt, iterations), salt, iterations)


def credential_from_salted(mechanism: str, salted: bytes, salt: bytes,
                           iterations: int) -> ScramCredential:
    """A credential from a salted password (what AlterUserScramCredentials carries)."""
    hash_name, _ = MECHANISMS[mechanism]
    client_key = _hmac(hash_name, salted, b"Client Key")
    return ScramCredential(salt=salt, stored_key=hashlib.new(hash_name, client_key).digest(),
                           server_key=_hmac(hash_name, salted, b"Server Key"),
                           iterations=iterations)


def password_matches(mechanism: str, credential: ScramCredential, password: str) -> bool:
    """Whether ``password`` is the one ``credential`` was made from (its stored key, compared
    in constant time): for a login that sends the password itself, e.g. HTTP Basic auth."""
    hash_name, _ = MECHANISMS[mechanism]
    salted = salted_password(hash_name, password, credential.salt, credential.iterations)
    made = credential_from_salted(mechanism, salted, credential.salt, credential.iterations)
    return hmac.compare_digest(made.stored_key, credential.stored_key)


def encode_saslname(name: str) -> str:
    return name.replace("=", "=3D").replace(",", "=2C")


def decode_saslname(text: str) -> str:
    """RFC 5802's saslname: ``=2C`` and ``=3D`` for ``,`` and ``=``; another ``=`` is an
    error."""
    out = text.replace("=2C", ",").replace("=3D", "=")
    if "=" in text.replace("=2C", "").replace("=3D", ""):
        raise ScramError("invalid username encoding")
    return out


def _attributes(message: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for part in message.split(","):
        key, sep, value = part.partition("=")
        if not sep or len(key) != 1:
            raise ScramError("malformed SCRAM message")
        out.setdefault(key, value)
    return out


class ScramServer:
    """The server side of one exchange. ``lookup(user)`` gives the user's credential for this
    mechanism, or None. :meth:`step` takes a client message and returns the answer; once it
    has answered the final message, :attr:`complete` is set and :attr:`username` is the
    authenticated user."""

    def __init__(self, mechanism: str, lookup: Callable[[str], ScramCredential | None], *,
                 nonce: Callable[[], str] = lambda: secrets.token_urlsafe(18)) -> None:
        self._make_nonce = nonce
        self.mechanism = mechanism
        self._hash = MECHANISMS[mechanism][0]
        self._lookup = lookup
        self._state = 0
        self._client_first_bare = ""
        self._server_first = ""
        self._nonce = ""
        self._credential: ScramCredential | None = None
        self.username: str | None = None
        self.complete = False

    def step(self, message: bytes) -> bytes:
        try:
            text = message.decode("utf-8")
        except UnicodeDecodeError:
            raise ScramError("a SCRAM message is not UTF-8") from None
        if self._state == 0:
            return self._first(text)
        if self._state == 1:
            return self._final(text)
        raise ScramError("the SCRAM exchange is complete")

    def _first(self, text: str) -> bytes:
        if not text.startswith(("n,", "y,")):
            raise ScramError("channel binding is not supported")
        _, _, rest = text.partition(",")
        authzid, sep, bare = rest.partition(",")
        if not sep:
            raise ScramError("malformed client-first message")
        attrs = _attributes(bare)
        if "n" not in attrs or "r" not in attrs or "m" in attrs:
            raise ScramError("malformed client-first message")
        user = decode_saslname(attrs["n"])
        if authzid and authzid.removeprefix("a=") != attrs["n"]:
            raise ScramError("the authorization id is not the username")
        credential = self._lookup(user)
        if credential is None:
            raise ScramCredentialsError(f"unknown user for {self.mechanism}")
        self._credential = credential
        self.username = user
        self._client_first_bare = bare
        self._nonce = attrs["r"] + self._make_nonce()
        self._server_first = (f"r={self._nonce},s={_b64(credential.salt)},"
                              f"i={credential.iterations}")
        self._state = 1
        return self._server_first.encode("utf-8")

    def _final(self, text: str) -> bytes:
        without_proof, sep, proof_text = text.rpartition(",p=")
        if not sep:
            raise ScramError("malformed client-final message")
        attrs = _attributes(without_proof)
        # Kafka 3.8.1 to 3.9 accept a final nonce that ends with the server-first's: librdkafka
        # before 2.6.1 (Debian 12's kcat) sends its own nonce again in front of it. The proof
        # is still checked over the message as sent.
        if not attrs.get("r", "").endswith(self._nonce):
            raise ScramError("the nonce of the client-final message does not end with the "
                             "server-first message's nonce")
        credential = self._credential
        assert credential is not None
        proof = _unb64(proof_text, "the proof")
        auth_message = ",".join((self._client_first_bare, self._server_first,
                                 without_proof)).encode("utf-8")
        signature = _hmac(self._hash, credential.stored_key, auth_message)
        if len(proof) != len(signature):
            raise ScramError("the proof is not as long as the mechanism's hash")
        client_key = bytes(a ^ b for a, b in zip(proof, signature, strict=True))
        if not hmac.compare_digest(hashlib.new(self._hash, client_key).digest(),
                                   credential.stored_key):
            raise ScramCredentialsError("invalid credentials")
        self._state = 2
        self.complete = True
        server_signature = _hmac(self._hash, credential.server_key, auth_message)
        return f"v={_b64(server_signature)}".encode()


class ScramClient:
    """The client side of one exchange (a broker reaching another broker)."""

    def __init__(self, mechanism: str, username: str, password: str, *,
                 nonce: str | None = None) -> None:
        self._hash = MECHANISMS[mechanism][0]
        self._username = username
        self._password = password
        self._nonce = nonce or secrets.token_urlsafe(24)
        self._client_first_bare = f"n={encode_saslname(username)},r={self._nonce}"
        self._server_signature = b""

    def __repr__(self) -> str:
        return f"ScramClient({self._username!r})"

    def first(self) -> bytes:
        return (_GS2_HEADER + self._client_first_bare).encode("utf-8")

    def final(self, server_first: bytes) -> bytes:
        text = server_first.decode("utf-8", errors="replace")
        attrs = _attributes(text)
        if "e" in attrs:
            raise ScramError(f"the server refused: {attrs['e']}")
        nonce, salt_text, iterations_text = attrs.get("r", ""), attrs.get("s"), attrs.get("i")
        if not nonce.startswith(self._nonce) or salt_text is None or iterations_text is None \
                or not iterations_text.isdigit():
            raise ScramError("malformed server-first message")
        salted = salted_password(self._hash, self._password, _unb64(salt_text, "the salt"),
                                 int(iterations_text))
        without_proof = f"c={_b64(_GS2_HEADER.encode())},r={nonce}"
        auth_message = ",".join((self._client_first_bare, text, without_proof)).encode("utf-8")
        client_key = _hmac(self._hash, salted, b"Client Key")
        stored_key = hashlib.new(self._hash, client_key).digest()
        signature = _hmac(self._hash, stored_key, auth_message)
        proof = bytes(a ^ b for a, b in zip(client_key, signature, strict=True))
        self._server_signature = _hmac(self._hash, _hmac(self._hash, salted, b"Server Key"),
                                       auth_message)
        return f"{without_proof},p={_b64(proof)}".encode()

    def verify(self, server_final: bytes) -> None:
        attrs = _attributes(server_final.decode("utf-8", errors="replace"))
        if "e" in attrs:
            raise ScramError(f"the server refused: {attrs['e']}")
        if not hmac.compare_digest(_unb64(attrs.get("v", ""), "the server signature"),
                                   self._server_signature):
            raise ScramError("the server's signature does not match")
