"""The cost of TLS and SASL: three broker processes with a PLAINTEXT and a SASL_SSL listener,
Kafka's own client (librdkafka, through confluent-kafka) over each in the same run; prints
numbers.

    .venv/bin/python benchmarks/security.py [--messages 100000] [--partitions 6]
                                            [--connections 50] [--rounds 2]

A ZooKeeper started for the run on this machine's loopback; a throwaway CA and broker
certificate (ECDSA P-256, made with ``cryptography``); a SCRAM-SHA-512 user made with
``partctl users create`` (4096 iterations, Kafka's default); three ``partctl broker start``
processes whose inter-broker listener is PLAINTEXT (so the comparison is the clients' traffic
alone). Topics have ``--partitions`` partitions at replication factor 3, min.insync.replicas 2.

1. Produce: one producer, acks=all and enable.idempotence, linger.ms 5, ``--messages`` values
   of 1 KiB round-robin over the partitions, from the first ``produce()`` to the end of
   ``flush()``; once over PLAINTEXT, once over SASL_SSL (SCRAM-SHA-512, TLS 1.3), each to a
   topic of its own, ``--rounds`` times alternating, the best round of each kept.
2. Consume: one consumer (assign() from the beginning, no group, ``fetch.queue.backoff.ms``
   10) reads each topic back, from ``assign()`` to the last message (librdkafka's start-up,
   connections and their authentication included).
3. Connection set-up: ``--connections`` new connections to one broker, each timed from
   ``connect()`` to its authenticated state, with partctl's blocking client (the one brokers use
   for each other): TCP, then for SASL_SSL the TLS handshake, ApiVersions, SaslHandshake and two
   SaslAuthenticate rounds of SCRAM-SHA-512 (the client's PBKDF2 of 4096 iterations included);
   median, p90 and max, beside the same over PLAINTEXT (TCP and ApiVersions).

MB/s counts value bytes only (10^6 bytes per MB). The two cores are shared by the client, the
three brokers and ZooKeeper.
"""

from __future__ import annotations

import argparse
import datetime
import ipaddress
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.common import (  # noqa: E402
    add_server_options,
    create_topic,
    server_label,
    start_server,
)
from benchmarks.common import produce as common_produce  # noqa: E402
from benchmarks.common import start_brokers as common_start_brokers  # noqa: E402

VALUE_SIZE = 1024
BROKERS = 3
SCRAM_MODULE = "org.apache.kafka.common.security.scram.ScramLoginModule"


def make_certificates(directory: Path) -> tuple[Path, Path]:
    """(CA certificate, broker key and certificate in one PEM), valid for 127.0.0.1."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    now = datetime.datetime.now(datetime.UTC)

    def name(cn: str) -> x509.Name:
        return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, cn)])

    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca = (x509.CertificateBuilder().subject_name(name("bench CA")).issuer_name(name("bench CA"))
          .public_key(ca_key.public_key()).serial_number(x509.random_serial_number())
          .not_valid_before(now - datetime.timedelta(days=1))
          .not_valid_after(now + datetime.timedelta(days=2))
          .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
          .sign(ca_key, hashes.SHA256()))
    key = ec.generate_private_key(ec.SECP256R1())
    cert = (x509.CertificateBuilder().subject_name(name("broker")).issuer_name(ca.subject)
            .public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(days=1))
            .not_valid_after(now + datetime.timedelta(days=2))
            .add_extension(x509.SubjectAlternativeName(
                [x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), critical=False)
            .sign(ca_key, hashes.SHA256()))
    ca_path, keystore = directory / "ca.pem", directory / "broker.pem"
    ca_path.write_bytes(ca.public_bytes(serialization.Encoding.PEM))
    keystore.write_bytes(key.private_bytes(serialization.Encoding.PEM,
                                           serialization.PrivateFormat.PKCS8,
                                           serialization.NoEncryption())
                         + cert.public_bytes(serialization.Encoding.PEM))
    keystore.chmod(0o600)
    return ca_path, keystore


def start_brokers(directory: Path, url: str, keystore: Path) -> list:
    return common_start_brokers(
        directory, url, extra=("listeners=PLAINTEXT://127.0.0.1:0,SASL_SSL://127.0.0.1:0\n"
                               "inter.broker.listener.name=PLAINTEXT\n"
                               f"ssl.keystore.type=PEM\nssl.keystore.location={keystore}\n"
                               "sasl.enabled.mechanisms=SCRAM-SHA-512\n"), count=BROKERS)


def sasl_port(broker) -> int:  # type: ignore[no-untyped-def]
    line = next(x for x in broker.log().splitlines() if ": serving " in x)
    return int(line.split("SASL_SSL://127.0.0.1:")[1].split()[0].rstrip(","))


def produce(conf: dict, topic: str, count: int, partitions: int) -> float:
    return common_produce(conf, topic, count, partitions, VALUE_SIZE)


def consume(conf: dict, topic: str, count: int, partitions: int) -> float:
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

    consumer = Consumer({**conf, "group.id": "bench", "enable.auto.commit": False,
                         "fetch.queue.backoff.ms": 10})
    start = time.perf_counter()
    consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(partitions)])
    got = 0
    deadline = time.monotonic() + 300
    while got < count and time.monotonic() < deadline:
        # no more than is still to come: a batch it cannot fill waits its timeout
        for msg in consumer.consume(min(10_000, count - got), 1.0):
            if msg.error() is None:
                got += 1
    end = time.perf_counter()
    consumer.close()
    if got < count:
        raise SystemExit(f"consume read {got} of {count}")
    return end - start


def connection_setup(port: int, connector, n: int) -> list[float]:  # type: ignore[no-untyped-def]
    from kafkaclient.connection import KafkaConnection

    times = []
    for _ in range(n):
        conn = KafkaConnection("127.0.0.1", port, client_id="bench", connector=connector)
        start = time.perf_counter()
        conn.versions()  # connects, ApiVersions, then the SASL exchange when there is one
        times.append((time.perf_counter() - start) * 1000)
        conn.close()
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--messages", type=int, default=100_000)
    parser.add_argument("--partitions", type=int, default=6)
    parser.add_argument("--connections", type=int, default=50)
    parser.add_argument("--rounds", type=int, default=2)
    add_server_options(parser)
    args = parser.parse_args()

    from kafkaclient.security.connector import Connector
    from kafkaclient.security.password import Password
    from kafkaclient.security.settings import ClientSecurity
    from kafkaclient.security.tls import SslSettings

    workdir = Path(tempfile.mkdtemp(prefix="partctl-bench-security-"))
    server = start_server("zookeeper", args)
    brokers: list = []
    try:
        ca, keystore = make_certificates(workdir)
        url = server.url(f"/bench-{uuid.uuid4().hex[:8]}")
        password = uuid.uuid4().hex
        pw_file = workdir / "password"
        pw_file.write_text(password)
        made = subprocess.run([sys.executable, "-m", "partctl", "users", "create", "bench",
                               "--mechanism", "SCRAM-SHA-512", "--password-file", str(pw_file),
                               "--coordinator", url], capture_output=True, text=True)
        if made.returncode:
            raise SystemExit(made.stderr.strip())
        brokers = start_brokers(workdir, url, keystore)
        plain = {"bootstrap.servers": ",".join(b.bootstrap for b in brokers)}
        secure = {"bootstrap.servers": ",".join(f"127.0.0.1:{sasl_port(b)}" for b in brokers),
                  "security.protocol": "SASL_SSL", "ssl.ca.location": str(ca),
                  "sasl.mechanism": "SCRAM-SHA-512", "sasl.username": "bench",
                  "sasl.password": password}
        results: dict[str, list[tuple[float, float]]] = {"PLAINTEXT": [], "SASL_SSL": []}
        for r in range(args.rounds):
            order = ["PLAINTEXT", "SASL_SSL"] if r % 2 == 0 else ["SASL_SSL", "PLAINTEXT"]
            for label in order:
                conf = plain if label == "PLAINTEXT" else secure
                topic = f"bench-{label.lower()}-{r}"
                create_topic(conf, topic, args.partitions)
                p = produce(conf, topic, args.messages, args.partitions)
                c = consume(conf, topic, args.messages, args.partitions)
                results[label].append((p, c))
        mb = args.messages * VALUE_SIZE / 1e6
        print(f"# security: {BROKERS} brokers, RF 3, {args.partitions} partitions, "
              f"{args.messages} x 1 KiB, best of {args.rounds}; {server_label(args)}")
        print(f"{'listener':<12}{'produce MB/s':>14}{'consume MB/s':>14}")
        best = {}
        for label, rows in results.items():
            p, c = min(x[0] for x in rows), min(x[1] for x in rows)
            best[label] = (mb / p, mb / c)
            print(f"{label:<12}{mb / p:>14.1f}{mb / c:>14.1f}")
        print(f"{'ratio':<12}{best['SASL_SSL'][0] / best['PLAINTEXT'][0]:>14.2f}"
              f"{best['SASL_SSL'][1] / best['PLAINTEXT'][1]:>14.2f}   (SASL_SSL / PLAINTEXT, "
              "target >= 0.6)")
        scram = Connector(ClientSecurity(
            protocol="SASL_SSL", mechanism="SCRAM-SHA-512", username="bench",
            password=Password(password),
            ssl=SslSettings(truststore_type="PEM", truststore_location=str(ca))))
        print(f"\n# connection set-up, {args.connections} connections to broker 1, ms")
        print(f"{'listener':<28}{'median':>8}{'p90':>8}{'max':>8}")
        for label, port, connector in (
                ("PLAINTEXT", brokers[0].port, None),
                ("SASL_SSL SCRAM-SHA-512", sasl_port(brokers[0]), scram)):
            times = sorted(connection_setup(port, connector, args.connections))
            p90 = times[min(len(times) - 1, int(len(times) * 0.9))]
            print(f"{label:<28}{statistics.median(times):>8.2f}{p90:>8.2f}{times[-1]:>8.2f}")
        print("(target: SCRAM-SHA-512 median <= 20 ms)")
    finally:
        for broker in brokers:
            broker.stop()
        server.stop()
        shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    main()
