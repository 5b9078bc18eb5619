"""SCRAM with the clients people still run: Debian 12's kcat (librdkafka 2.0.2, which repeats
its own nonce in front of the server's in its client-final message, as librdkafka did before
2.6.1) produces and consumes over SASL_PLAINTEXT with SCRAM-SHA-512 against a broker process,
as it does against Kafka 3.9; a wrong password is still refused as invalid credentials, a
nonce that does not end with the server's is refused and logged as a SCRAM protocol failure,
and the broker's log holds no password.

Skipped, loudly, only where kcat is not installed (.ci/setup installs it from Debian)."""

from __future__ import annotations

import shutil
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from kio.schema.errors import ErrorCode

from kafkaclient.security.scram import ScramClient
from tests.broker.processes import create_topic
from tests.broker.security_fixtures import SecureBroker, start_secure_broker
from tests.broker.wire_client import RawClient, request
from tests.waiting import wait_until

pytestmark = pytest.mark.servers

KCAT = shutil.which("kcat") or shutil.which("kafkacat")
COUNT = 5


@pytest.fixture(scope="module")
def secure(zookeeper_server, tmp_path_factory: pytest.TempPathFactory  # type: ignore[no-untyped-def]
           ) -> Iterator[SecureBroker]:
    running = start_secure_broker(tmp_path_factory.mktemp("kcat"), zookeeper_server)
    yield running
    status = running.broker.stop()
    assert status == 0, running.broker.log()[-3000:]


def kcat(secure: SecureBroker, tmp_path: Path, password: str, *args: str,
         stdin: str = "") -> subprocess.CompletedProcess[str]:
    """kcat on the SASL_PLAINTEXT listener as alice with SCRAM-SHA-512; the password in a
    config file (-F), not on the command line."""
    if KCAT is None:
        pytest.fail("kcat is not installed: apt-get install kcat (.ci/setup does)")
    config = tmp_path / f"kcat-{uuid.uuid4().hex[:6]}.conf"
    config.write_text("security.protocol=SASL_PLAINTEXT\nsasl.mechanisms=SCRAM-SHA-512\n"
                      f"sasl.username=alice\nsasl.password={password}\n")
    config.chmod(0o600)
    return subprocess.run([KCAT, "-F", str(config), "-b", secure.bootstrap("SASL_PLAINTEXT"),
                           "-m", "20", *args], input=stdin, capture_output=True, text=True,
                          timeout=90)


@pytest.fixture(autouse=True)
def _kcat_installed() -> None:
    if KCAT is None:
        pytest.skip("SKIPPED LOUDLY: kcat (librdkafka 2.0.2 on Debian 12) is not installed; "
                    "apt-get install kcat (.ci/setup does)")


def test_debian_kcat_produces_and_consumes_with_scram(secure: SecureBroker,
                                                     tmp_path: Path) -> None:
    version = subprocess.run([KCAT, "-V"], capture_output=True, text=True,  # type: ignore[list-item]
                             timeout=30).stdout
    print(version)  # which librdkafka this run used
    topic = f"kcat-{uuid.uuid4().hex[:8]}"
    create_topic(secure.broker, topic, 1)
    values = [f"value-{i}" for i in range(COUNT)]
    produced = kcat(secure, tmp_path, secure.secrets["alice"], "-P", "-t", topic,
                    "-X", "acks=all", stdin="\n".join(values) + "\n")
    assert produced.returncode == 0, produced.stderr
    consumed = kcat(secure, tmp_path, secure.secrets["alice"], "-C", "-t", topic,
                    "-o", "beginning", "-c", str(COUNT), "-e")
    assert consumed.returncode == 0, consumed.stderr
    assert consumed.stdout.split() == values
    assert secure.secrets["alice"] not in secure.broker.log()


def test_kcat_with_a_wrong_password_is_refused_as_invalid_credentials(
        secure: SecureBroker, tmp_path: Path) -> None:
    wrong = f"wrong-{uuid.uuid4().hex}"
    listed = kcat(secure, tmp_path, wrong, "-L")
    assert listed.returncode != 0
    assert "invalid credentials" in listed.stderr, listed.stderr
    assert wrong not in secure.broker.log()


def test_a_nonce_not_ending_with_the_servers_is_logged_as_a_protocol_failure(
        secure: SecureBroker) -> None:
    scram = ScramClient("SCRAM-SHA-512", "alice", secure.secrets["alice"])
    with RawClient(("127.0.0.1", secure.ports["SASL_PLAINTEXT"])) as client:
        assert client.call(request(17, 1, mechanism="SCRAM-SHA-512")).error_code == \
            ErrorCode.none
        first = client.call(request(36, 2, auth_bytes=scram.first()))
        assert first.error_code == ErrorCode.none
        final = scram.final(bytes(first.auth_bytes))
        without_proof, _, proof = final.decode().rpartition(",p=")
        tampered = f"{without_proof}x,p={proof}".encode()  # a nonce ending in something else
        answer = client.call(request(36, 2, auth_bytes=tampered))
    assert answer.error_code == ErrorCode.sasl_authentication_failed
    assert "SCRAM protocol failure" in answer.error_message
    log = wait_until(lambda: (text := secure.broker.log()) and "SCRAM protocol failure" in text
                     and text, message="the failure's line")  # written by its log writer
    lines = [x for x in log.splitlines() if "SCRAM protocol failure" in x]
    assert lines and "nonce" in lines[-1] and "invalid credentials" not in lines[-1]
    assert secure.secrets["alice"] not in log
