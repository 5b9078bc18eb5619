"""Kafka's own clients over secure listeners of a broker process (issue 21, part 1):
librdkafka (confluent-kafka) and kafka-python over SSL (server-only and mutual TLS) and
SASL_SSL with SCRAM-SHA-512 and PLAIN produce with acks=all and consume back; a wrong
password, an untrusted or expired certificate, a plaintext client on a TLS port and requests
before authentication fail cleanly and append nothing; SCRAM users made through
AlterUserScramCredentials reach the broker by the change notification; the run's broker log
and CLI output hold none of the passwords used."""

from __future__ import annotations

import socket
import ssl
import struct
import time
import uuid
from collections.abc import Callable, Iterator

import confluent_kafka as ck
import kafka
import kafka.errors
import pytest
from confluent_kafka.admin import (
    AdminClient,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialDeletion,
    UserScramCredentialUpsertion,
)
from kio.schema.errors import ErrorCode

from kafkaclient.security.scram import ScramClient
from tests.broker.processes import create_topic
from tests.broker.security_fixtures import (
    REAUTH_MS,
    SecureBroker,
    partctl,
    secret,
    start_secure_broker,
)
from tests.broker.wire_client import RawClient, encode_request, request

pytestmark = pytest.mark.servers

COUNT = 20


@pytest.fixture(scope="module")
def secure(zookeeper_server, tmp_path_factory: pytest.TempPathFactory  # type: ignore[no-untyped-def]
           ) -> Iterator[SecureBroker]:
    running = start_secure_broker(tmp_path_factory.mktemp("secure"), zookeeper_server)
    yield running
    status = running.broker.stop()
    assert status == 0, running.broker.log()[-3000:]


def new_topic(secure: SecureBroker) -> str:
    name = f"secure-{uuid.uuid4().hex[:8]}"
    create_topic(secure.broker, name, 1)
    return name


def end_offset(secure: SecureBroker, topic: str) -> int:
    consumer = ck.Consumer({"bootstrap.servers": secure.bootstrap("PLAINTEXT"),
                            "group.id": "watermarks"})
    try:
        return consumer.get_watermark_offsets(ck.TopicPartition(topic, 0), timeout=10)[1]
    finally:
        consumer.close()


# --- client settings -----------------------------------------------------------------------------


def ck_ssl(secure: SecureBroker, listener: str = "SSL", *, client_cert: bool = False,
           ca: str | None = None) -> dict[str, object]:
    conf: dict[str, object] = {"bootstrap.servers": secure.bootstrap(listener),
                               "security.protocol": "SSL",
                               "ssl.ca.location": ca or str(secure.material.ca)}
    if client_cert:
        conf["ssl.certificate.location"] = str(secure.material.client_cert)
        conf["ssl.key.location"] = str(secure.material.client_key)
    return conf


def ck_sasl(secure: SecureBroker, mechanism: str, user: str, password: str,
            listener: str = "SASL_SSL") -> dict[str, object]:
    conf: dict[str, object] = {"bootstrap.servers": secure.bootstrap(listener),
                               "security.protocol": listener, "sasl.mechanism": mechanism,
                               "sasl.username": user, "sasl.password": password}
    if listener == "SASL_SSL":
        conf["ssl.ca.location"] = str(secure.material.ca)
    return conf


def kp_ssl(secure: SecureBroker, listener: str = "SSL", *, client_cert: bool = False
           ) -> dict[str, object]:
    conf: dict[str, object] = {"bootstrap_servers": secure.bootstrap(listener),
                               "security_protocol": "SSL",
                               "ssl_cafile": str(secure.material.ca)}
    if client_cert:
        conf["ssl_certfile"] = str(secure.material.client_cert)
        conf["ssl_keyfile"] = str(secure.material.client_key)
    return conf


def kp_sasl(secure: SecureBroker, mechanism: str, user: str, password: str
            ) -> dict[str, object]:
    return {"bootstrap_servers": secure.bootstrap("SASL_SSL"), "security_protocol": "SASL_SSL",
            "ssl_cafile": str(secure.material.ca), "sasl_mechanism": mechanism,
            "sasl_plain_username": user, "sasl_plain_password": password}


# --- round trips ---------------------------------------------------------------------------------


def ck_round_trip(conf: dict[str, object], topic: str) -> None:
    producer = ck.Producer({**conf, "acks": "all", "enable.idempotence": True,
                            "linger.ms": 5})
    acked: list[int] = []
    errors: list[object] = []

    def delivered(err: ck.KafkaError | None, msg: ck.Message) -> None:
        (errors.append(err) if err is not None else acked.append(msg.offset()))

    for i in range(COUNT):
        producer.produce(topic, key=f"k{i}".encode(), value=f"value {i}".encode(),
                         on_delivery=delivered)
    assert producer.flush(60) == 0
    assert errors == [] and sorted(acked) == list(range(COUNT))
    consumer = ck.Consumer({**conf, "group.id": f"g-{uuid.uuid4().hex[:6]}",
                            "enable.auto.commit": False})
    try:
        consumer.assign([ck.TopicPartition(topic, 0, ck.OFFSET_BEGINNING)])
        got: list[bytes] = []
        deadline = time.monotonic() + 60
        while len(got) < COUNT and time.monotonic() < deadline:
            msg = consumer.poll(1.0)
            if msg is not None and msg.error() is None:
                got.append(msg.value())
        assert got == [f"value {i}".encode() for i in range(COUNT)]
    finally:
        consumer.close()


REFUSED_QUICKLY = {"request_timeout_ms": 5000, "max_block_ms": 5000, "bootstrap_timeout_ms": 5000}
"""kafka-python settings for a client the broker refuses: it gives up after 5 s, not after the
30 s bootstrap and 60 s block timeouts it has by default."""


def kp_round_trip(conf: dict[str, object], topic: str) -> None:
    producer = kafka.KafkaProducer(acks="all", **conf)
    try:
        futures = [producer.send(topic, key=f"k{i}".encode(), value=f"value {i}".encode(),
                                 partition=0) for i in range(COUNT)]
        offsets = [f.get(timeout=60).offset for f in futures]
    finally:
        producer.close(timeout=10)
    assert offsets == list(range(COUNT))
    consumer = kafka.KafkaConsumer(enable_auto_commit=False, consumer_timeout_ms=20_000, **conf)
    try:
        tp = kafka.TopicPartition(topic, 0)
        consumer.assign([tp])
        consumer.seek_to_beginning(tp)
        got = []
        for message in consumer:
            got.append(message.value)
            if len(got) == COUNT:
                break
        assert got == [f"value {i}".encode() for i in range(COUNT)]
    finally:
        consumer.close()


def test_confluent_over_server_only_tls(secure: SecureBroker) -> None:
    ck_round_trip(ck_ssl(secure), new_topic(secure))


def test_kafka_python_over_server_only_tls(secure: SecureBroker) -> None:
    kp_round_trip(kp_ssl(secure), new_topic(secure))


def test_confluent_over_mutual_tls(secure: SecureBroker) -> None:
    ck_round_trip(ck_ssl(secure, "MTLS", client_cert=True), new_topic(secure))


def test_kafka_python_over_mutual_tls(secure: SecureBroker) -> None:
    kp_round_trip(kp_ssl(secure, "MTLS", client_cert=True), new_topic(secure))


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-512", "PLAIN"])
def test_confluent_over_sasl_ssl(secure: SecureBroker, mechanism: str) -> None:
    user = "alice" if mechanism.startswith("SCRAM") else "bob"
    ck_round_trip(ck_sasl(secure, mechanism, user, secure.secrets[user]), new_topic(secure))


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-512", "PLAIN"])
def test_kafka_python_over_sasl_ssl(secure: SecureBroker, mechanism: str) -> None:
    user = "alice" if mechanism.startswith("SCRAM") else "bob"
    kp_round_trip(kp_sasl(secure, mechanism, user, secure.secrets[user]), new_topic(secure))


def test_confluent_over_sasl_plaintext_with_plain(secure: SecureBroker) -> None:
    ck_round_trip(ck_sasl(secure, "PLAIN", "bob", secure.secrets["bob"], "SASL_PLAINTEXT"),
                  new_topic(secure))


# --- refusals ------------------------------------------------------------------------------------


def authentication_failed(errors: list[ck.KafkaError]) -> bool:
    return any(e.code() == ck.KafkaError._AUTHENTICATION for e in errors)


def verify_failed(errors: list[ck.KafkaError]) -> bool:
    return any("certificate verify failed" in e.str() for e in errors)


def ssl_failed(errors: list[ck.KafkaError]) -> bool:
    return any(e.code() == ck.KafkaError._SSL for e in errors)


def ck_refused(conf: dict[str, object], topic: str,
               until: Callable[[list[ck.KafkaError]], bool] = bool) -> list[ck.KafkaError]:
    """Produce one message with ``conf``: it must not be delivered; the client's errors, once
    ``until`` says they are what the caller asserts (default: any), or after 30 s. Then the
    message is purged (not left to its delivery timeout): its report is an error unless it
    was delivered meanwhile."""
    errors: list[ck.KafkaError] = []
    producer = ck.Producer({**conf, "acks": "all", "message.timeout.ms": 60_000,
                            "error_cb": errors.append})
    delivered: list[object] = []
    producer.produce(topic, value=b"must not land",
                     on_delivery=lambda err, msg: delivered.append(err))
    deadline = time.monotonic() + 30
    while not until(errors) and not delivered and time.monotonic() < deadline:
        producer.poll(0.1)
    producer.purge()
    producer.flush(10)
    assert delivered and delivered[0] is not None, "a refused client's message was delivered"
    return errors


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-512", "PLAIN"])
def test_a_wrong_password_fails_and_appends_nothing(secure: SecureBroker, mechanism: str
                                                    ) -> None:
    topic = new_topic(secure)
    user = "alice" if mechanism.startswith("SCRAM") else "bob"
    errors = ck_refused(ck_sasl(secure, mechanism, user, secret("wrong")), topic,
                        until=lambda errors: authentication_failed(errors) and any(
                            "Authentication failed" in e.str() for e in errors))
    assert authentication_failed(errors), errors
    assert any("Authentication failed" in e.str() for e in errors), errors
    with pytest.raises(kafka.errors.KafkaError):
        kp_round_trip({**kp_sasl(secure, mechanism, user, secret("wrong")),
                       **REFUSED_QUICKLY}, topic)
    assert end_offset(secure, topic) == 0


def test_an_unknown_scram_user_fails(secure: SecureBroker) -> None:
    topic = new_topic(secure)
    errors = ck_refused(ck_sasl(secure, "SCRAM-SHA-512", "nobody", secret("x")), topic,
                        until=authentication_failed)
    assert authentication_failed(errors), errors
    assert end_offset(secure, topic) == 0


@pytest.mark.parametrize("cert", ["untrusted", "expired", "none"])
def test_a_bad_client_certificate_is_refused_by_mutual_tls(secure: SecureBroker, cert: str
                                                           ) -> None:
    topic = new_topic(secure)
    conf = ck_ssl(secure, "MTLS")
    m = secure.material
    if cert == "untrusted":
        conf.update({"ssl.certificate.location": str(m.rogue_cert),
                     "ssl.key.location": str(m.rogue_key)})
    elif cert == "expired":
        conf.update({"ssl.certificate.location": str(m.expired_cert),
                     "ssl.key.location": str(m.expired_key)})
    errors = ck_refused(conf, topic)
    assert errors, "no error reported"
    assert end_offset(secure, topic) == 0


def test_a_broker_certificate_from_an_untrusted_ca_is_refused(secure: SecureBroker) -> None:
    topic = new_topic(secure)
    errors = ck_refused(ck_ssl(secure, ca=str(secure.material.rogue_ca)), topic,
                        until=verify_failed)
    assert verify_failed(errors), errors
    assert end_offset(secure, topic) == 0


def test_an_expired_broker_certificate_is_refused_by_the_client(secure: SecureBroker) -> None:
    topic = new_topic(secure)
    errors = ck_refused(ck_ssl(secure, "EXPIRED"), topic, until=ssl_failed)
    # the SSL listener's certificate, from the same CA and valid, is accepted (the tests above)
    assert ssl_failed(errors), errors
    with pytest.raises(kafka.errors.KafkaError):
        kp_round_trip({**kp_ssl(secure, "EXPIRED"), **REFUSED_QUICKLY}, topic)
    assert end_offset(secure, topic) == 0


def test_a_plaintext_client_on_a_tls_port_gets_no_answer(secure: SecureBroker) -> None:
    topic = new_topic(secure)
    errors = ck_refused({"bootstrap.servers": secure.bootstrap("SSL")}, topic)
    assert errors
    with socket.create_connection(("127.0.0.1", secure.ports["SSL"]), timeout=10) as sock:
        sock.sendall(encode_request(request(18, 3, client_software_name="raw",
                                            client_software_version="1"), 1))
        data = b""
        while chunk := sock.recv(4096):
            data += chunk
    assert data == b"" or data[0] == 0x15, data[:16]  # closed, or a TLS alert: no Kafka frame
    assert end_offset(secure, topic) == 0


def test_requests_before_sasl_authentication_close_the_connection(secure: SecureBroker
                                                                  ) -> None:
    topic = new_topic(secure)
    address = ("127.0.0.1", secure.ports["SASL_PLAINTEXT"])
    with RawClient(address) as client:
        versions = client.call(request(18, 3, client_software_name="raw",
                                       client_software_version="1"))
        keys = {int(k.api_key) for k in versions.api_keys}
        assert {17, 36, 50, 51} <= keys
        produce = request(3, 12, topics=(), allow_auto_topic_creation=False,
                          include_topic_authorized_operations=False)
        client.send_bytes(encode_request(produce, 2))
        with pytest.raises((ConnectionError, OSError, EOFError, AssertionError)):
            client.receive(3, 12)
    with RawClient(address) as client:  # an unknown mechanism: the answer, then closed
        answer = client.call(request(17, 1, mechanism="GSSAPI"))
        assert answer.error_code == ErrorCode.unsupported_sasl_mechanism
        assert set(answer.mechanisms) == {"PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"}
        with pytest.raises((ConnectionError, OSError, EOFError, AssertionError)):
            client.call(request(18, 3, client_software_name="raw", client_software_version="1"))
    assert end_offset(secure, topic) == 0


def test_sasl_handshake_on_a_plaintext_listener_is_an_illegal_state(secure: SecureBroker
                                                                    ) -> None:
    with RawClient(("127.0.0.1", secure.ports["PLAINTEXT"])) as client:
        assert client.call(request(17, 1, mechanism="PLAIN")).error_code == \
            ErrorCode.illegal_sasl_state


# --- re-authentication (KIP-368) ------------------------------------------------------------------


def scram_login(client: RawClient, user: str, password: str) -> object:
    """SaslHandshake v1 and SCRAM-SHA-512 in SaslAuthenticate v2: the last answer."""
    assert client.call(request(17, 1, mechanism="SCRAM-SHA-512")).error_code == ErrorCode.none
    scram = ScramClient("SCRAM-SHA-512", user, password)
    first = client.call(request(36, 2, auth_bytes=scram.first()))
    assert first.error_code == ErrorCode.none, first.error_message
    final = client.call(request(36, 2, auth_bytes=scram.final(bytes(first.auth_bytes))))
    if final.error_code == ErrorCode.none:
        scram.verify(bytes(final.auth_bytes))
    return final


def metadata_request() -> object:
    return request(3, 12, topics=(), allow_auto_topic_creation=False,
                   include_topic_authorized_operations=False)


def test_sessions_expire_unless_re_authenticated(secure: SecureBroker) -> None:
    address = ("127.0.0.1", secure.ports["REAUTH"])
    alice = secure.secrets["alice"]
    with RawClient(address) as client:
        answer = scram_login(client, "alice", alice)
        assert answer.session_lifetime.total_seconds() * 1000 == REAUTH_MS
        assert client.call(metadata_request()).brokers
        time.sleep(REAUTH_MS / 2000)
        again = scram_login(client, "alice", alice)  # before the end: a new session
        assert again.error_code == ErrorCode.none
        time.sleep(REAUTH_MS / 2000 + 0.2)  # past the first session's end, not the second's
        assert client.call(metadata_request()).brokers
    with RawClient(address) as client:
        scram_login(client, "alice", alice)
        time.sleep(REAUTH_MS / 1000 + 0.3)
        client.send(metadata_request())
        assert client.closed_by_peer()
    password = secure.secrets.setdefault("erin", secret("erin-scram"))
    made = partctl("users", "create", "erin", "--mechanism", "SCRAM-SHA-512", "--password-file",
                   "/dev/stdin", url=secure.url, stdin=password + "\n")
    secure.outputs += [made.stdout, made.stderr]
    assert made.returncode == 0, made.stderr
    with RawClient(address) as client:  # another principal on re-authentication: refused
        scram_login(client, "alice", alice)
        deadline = time.monotonic() + 10
        while True:
            answer = scram_login(client, "erin", password)
            if answer.error_code != ErrorCode.sasl_authentication_failed or \
                    "Cannot change principals" in (answer.error_message or ""):
                break
            assert time.monotonic() < deadline, answer.error_message  # erin not heard of yet
            client.close()
            client = RawClient(address)
            scram_login(client, "alice", alice)
        assert answer.error_code == ErrorCode.sasl_authentication_failed
        assert "Cannot change principals" in answer.error_message
        assert client.closed_by_peer()
        client.close()


def test_librdkafka_keeps_producing_across_session_lifetimes(secure: SecureBroker) -> None:
    topic = new_topic(secure)
    conf = ck_sasl(secure, "SCRAM-SHA-512", "alice", secure.secrets["alice"], "SASL_PLAINTEXT")
    conf["bootstrap.servers"] = secure.bootstrap("REAUTH")
    producer = ck.Producer({**conf, "acks": "all"})
    expired_before = secure.broker.log().count("its SASL session expired")
    acked, errors = [], []
    deadline = time.monotonic() + 3 * REAUTH_MS / 1000
    i = 0
    while time.monotonic() < deadline:
        producer.produce(topic, value=f"v{i}".encode(), on_delivery=lambda e, m: (
            errors.append(e) if e is not None else acked.append(m.offset())))
        producer.poll(0.05)
        i += 1
    assert producer.flush(30) == 0
    assert errors == [] and sorted(acked) == list(range(i))
    # librdkafka re-authenticated in time: the broker closed none of its connections
    assert secure.broker.log().count("its SASL session expired") == expired_before


# --- SCRAM credentials through the admin API ------------------------------------------------------


def test_scram_users_made_by_the_admin_api_authenticate(secure: SecureBroker) -> None:
    admin = AdminClient(ck_sasl(secure, "SCRAM-SHA-512", "alice", secure.secrets["alice"]))
    password = secure.secrets.setdefault("carol", secret("carol-scram"))
    info = ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 8192)
    for future in admin.alter_user_scram_credentials(
            [UserScramCredentialUpsertion("carol", info, password.encode())]).values():
        future.result(30)
    described = admin.describe_user_scram_credentials(["carol"])
    (carol,) = [f.result(30) for f in described.values()]
    assert [(i.mechanism, i.iterations) for i in carol.scram_credential_infos] == [
        (ScramMechanism.SCRAM_SHA_512, 8192)]
    topic = new_topic(secure)
    deadline = time.monotonic() + 10
    while True:  # the broker hears of carol through /config/changes within moments
        try:
            ck_round_trip(ck_sasl(secure, "SCRAM-SHA-512", "carol", password), topic)
            break
        except AssertionError:
            if time.monotonic() > deadline:
                raise
            topic = new_topic(secure)
    bad = admin.alter_user_scram_credentials([
        UserScramCredentialUpsertion("dave", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256,
                                                                 100), b"x"),
        UserScramCredentialDeletion("nobody", ScramMechanism.SCRAM_SHA_512)])
    for user, future in bad.items():
        with pytest.raises(ck.KafkaException) as refused:
            future.result(30)
        expected = {"dave": "UNACCEPTABLE_CREDENTIAL", "nobody": "RESOURCE_NOT_FOUND"}[user]
        assert refused.value.args[0].name() == expected
    for future in admin.alter_user_scram_credentials(
            [UserScramCredentialDeletion("carol", ScramMechanism.SCRAM_SHA_512)]).values():
        future.result(30)
    time.sleep(1)  # the notification reaches the broker
    gone = new_topic(secure)
    errors = ck_refused(ck_sasl(secure, "SCRAM-SHA-512", "carol", password), gone,
                        until=authentication_failed)
    assert authentication_failed(errors), errors
    assert end_offset(secure, gone) == 0


# --- last: nothing printed holds a secret ----------------------------------------------------------


def test_no_log_line_or_cli_output_holds_a_password(secure: SecureBroker) -> None:
    text = secure.broker.log() + "".join(secure.outputs)
    assert "Traceback" not in secure.broker.log()
    for name, value in secure.secrets.items():
        assert value not in text, f"{name}'s password is in the output"
    props = secure.broker.config_path.read_text()
    assert secure.secrets["bob"] in props  # the check above would have seen it if printed


def test_a_broker_whose_key_store_cannot_be_read_exits_with_one_line(tmp_path) -> None:  # type: ignore[no-untyped-def]
    from broker.cluster import launch_broker

    broker = launch_broker(tmp_path, 1, "zookeeper://127.0.0.1:1/never-reached", extra=(
        "listeners=SSL://127.0.0.1:0\nsecurity.inter.broker.protocol=SSL\n"
        f"ssl.keystore.type=PKCS12\nssl.keystore.location={tmp_path / 'missing.p12'}\n"
        "ssl.keystore.password=st0re-secret\n"))
    assert broker.wait(60) == 1
    lines = broker.log().splitlines()
    assert lines == [f"partctl: error: broker 1: ssl.keystore.location: cannot read "
                     f"{tmp_path / 'missing.p12'}: No such file or directory"]


# --- hostile lengths on secured listeners ---------------------------------------------------------

LENGTH_LIE = struct.pack(">hhih", 3, 9, 1, 1) + b"x\x00" + b"\xff\xff\xff\xff\x0f"
"""Metadata v9 whose topic array claims 2^32-2 elements: it aborted the broker before any
check, parsed before authorization."""


def test_a_lying_length_over_tls_or_after_a_sasl_login_costs_the_connection_only(
        secure: SecureBroker) -> None:
    topic = new_topic(secure)
    context = ssl.create_default_context(cafile=str(secure.material.ca))
    with socket.create_connection(("127.0.0.1", secure.ports["SSL"]), timeout=10) as raw, \
            context.wrap_socket(raw, server_hostname="localhost") as tls:
        tls.sendall(struct.pack(">i", len(LENGTH_LIE)) + LENGTH_LIE)
        assert tls.recv(1) == b""
    with RawClient(("127.0.0.1", secure.ports["SASL_PLAINTEXT"])) as client:
        assert scram_login(client, "alice", secure.secrets["alice"]).error_code == \
            ErrorCode.none
        client.send_bytes(struct.pack(">i", len(LENGTH_LIE)) + LENGTH_LIE)
        assert client.closed_by_peer()
    assert secure.broker.process.poll() is None, secure.broker.log()[-3000:]
    ck_round_trip(ck_ssl(secure), topic)
