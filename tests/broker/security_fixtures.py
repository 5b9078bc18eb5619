"""A broker process with every kind of listener, for the security tests: PLAINTEXT (the
inter-broker listener, and where the tests look at what was appended), SSL (server-only TLS),
MTLS (SSL with ssl.client.auth=required), EXPIRED (SSL with an expired certificate), REAUTH
(SASL_PLAINTEXT, SCRAM-SHA-512, sessions of REAUTH_MS: KIP-368), SASL_SSL and SASL_PLAINTEXT (PLAIN, SCRAM-SHA-256 and
SCRAM-SHA-512), with TLS material made for the run and a SCRAM user created beforehand with
``partctl users create``."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import uuid
from dataclasses import dataclass, field
from pathlib import Path

from .processes import REPO, BrokerProcess, coordinator_settings, start_broker
from .tls_material import Material, make_material

PLAIN_MODULE = "org.apache.kafka.common.security.plain.PlainLoginModule"
SCRAM_MODULE = "org.apache.kafka.common.security.scram.ScramLoginModule"
REAUTH_MS = 1500
LISTENING = re.compile(r"(\w+)://127\.0\.0\.1:(\d+)")


def secret(label: str) -> str:
    """A password no log line could hold by chance."""
    return f"{label}-{uuid.uuid4().hex}"


@dataclass
class SecureBroker:
    broker: BrokerProcess
    material: Material
    url: str
    ports: dict[str, int]
    secrets: dict[str, str]
    outputs: list[str] = field(default_factory=list)
    """What the CLI printed (stdout and stderr) during the run."""

    def bootstrap(self, listener: str) -> str:
        return f"127.0.0.1:{self.ports[listener]}"


def partctl(*args: str, url: str, stdin: str | None = None,
            env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """``partctl ARGS --coordinator URL``; ``env`` is added to this process's environment (the
    coordinator credentials, for one)."""
    return subprocess.run([sys.executable, "-m", "partctl", *args, "--coordinator", url],
                          capture_output=True, text=True, cwd=REPO, timeout=60,
                          input=stdin if stdin is not None else "",
                          env={**os.environ, **(env or {})})


def listener_ports(broker: BrokerProcess) -> dict[str, int]:
    line = next(x for x in broker.log().splitlines() if ": serving " in x)
    return {name: int(port) for name, port in LISTENING.findall(line.split(" on ")[0])}


def ssl_properties(material: Material) -> str:
    return (f"ssl.keystore.type=PEM\nssl.keystore.location={material.broker_keystore}\n"
            f"ssl.truststore.type=PEM\nssl.truststore.location={material.ca}\n")


def scram_users(url: str, directory: Path, users: tuple[str, ...]
                ) -> tuple[dict[str, str], list[str]]:
    """SCRAM-SHA-512 users made by ``partctl users create`` on the coordinator at ``url``, each
    with a fresh password: the passwords, and what the tool printed (for the secrets checks)."""
    secrets = {user: secret(f"{user}-scram") for user in users}
    outputs: list[str] = []
    for user, password in secrets.items():
        path = directory / f"{user}.password"
        path.write_text(password)
        made = partctl("users", "create", user, "--mechanism", "SCRAM-SHA-512",
                       "--password-file", str(path), url=url)
        outputs += [made.stdout, made.stderr]
        assert made.returncode == 0, made.stderr
    return secrets, outputs


def sasl_ssl_acl_settings(material: Material, admin_password: str) -> str:
    """server.properties lines of a broker whose one listener is SASL_SSL with SCRAM-SHA-512
    (inter-broker too, as ``admin``), with the ACL authorizer and ``admin`` its super user."""
    jaas = f'{SCRAM_MODULE} required username="admin" password="{admin_password}";'
    return ("listeners=SASL_SSL://127.0.0.1:0\n"
            "inter.broker.listener.name=SASL_SSL\n"
            "sasl.enabled.mechanisms=SCRAM-SHA-512\n"
            "sasl.mechanism.inter.broker.protocol=SCRAM-SHA-512\n"
            f"listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config={jaas}\n"
            + ssl_properties(material) +
            "authorizer.class.name=kafka.security.authorizer.AclAuthorizer\n"
            "super.users=User:admin\n")


def client_properties(directory: Path, material: Material, user: str, password: str) -> str:
    """A Kafka client properties file (a tool's --command-config) for SASL_SSL with
    SCRAM-SHA-512 as ``user``, trusting the run's CA; its path."""
    path = directory / f"{user}-{uuid.uuid4().hex[:6]}.properties"
    jaas = f'{SCRAM_MODULE} required username="{user}" password="{password}";'
    path.write_text("security.protocol=SASL_SSL\nsasl.mechanism=SCRAM-SHA-512\n"
                    f"sasl.jaas.config={jaas}\nssl.truststore.type=PEM\n"
                    f"ssl.truststore.location={material.ca}\n")
    return str(path)


def start_secure_broker(directory: Path, server: object) -> SecureBroker:
    material = make_material(directory / "tls")
    settings = coordinator_settings(server)  # type: ignore[arg-type]
    url = settings[1]
    secrets = {"alice": secret("alice-scram"), "bob": secret("bob-plain")}
    outputs = []
    password_file = directory / "alice.password"
    password_file.write_text(secrets["alice"] + "\n")
    password_file.chmod(0o600)
    made = partctl("users", "create", "alice", "--mechanism", "SCRAM-SHA-512",
                   "--password-file", str(password_file), url=url)
    outputs += [made.stdout, made.stderr]
    assert made.returncode == 0, made.stderr
    jaas = f'{PLAIN_MODULE} required user_bob="{secrets["bob"]}";'
    extra = (
        "listeners=PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0,MTLS://127.0.0.1:0,"
        "SASL_SSL://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0,EXPIRED://127.0.0.1:0,"
        "REAUTH://127.0.0.1:0\n"
        "listener.security.protocol.map=PLAINTEXT:PLAINTEXT,SSL:SSL,MTLS:SSL,"
        "SASL_SSL:SASL_SSL,SASL_PLAINTEXT:SASL_PLAINTEXT,EXPIRED:SSL,REAUTH:SASL_PLAINTEXT\n"
        "listener.name.reauth.sasl.enabled.mechanisms=SCRAM-SHA-512\n"
        f"listener.name.reauth.connections.max.reauth.ms={REAUTH_MS}\n"
        "inter.broker.listener.name=PLAINTEXT\n"
        + ssl_properties(material) +
        "listener.name.mtls.ssl.client.auth=required\n"
        f"listener.name.expired.ssl.keystore.location={material.expired_broker_keystore}\n"
        "sasl.enabled.mechanisms=PLAIN,SCRAM-SHA-256,SCRAM-SHA-512\n"
        f"listener.name.sasl_ssl.plain.sasl.jaas.config={jaas}\n"
        f"listener.name.sasl_plaintext.plain.sasl.jaas.config={jaas}\n"
        "num.partitions=1\n")
    broker = start_broker(directory / "broker", server, settings=settings,  # type: ignore[arg-type]
                          extra=extra)
    return SecureBroker(broker=broker, material=material, url=url,
                        ports=listener_ports(broker), secrets=secrets, outputs=outputs)
