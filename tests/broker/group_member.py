"""One consumer-group member as a process of its own, so a test can SIGKILL it: it consumes a
topic in a group with a real client (``confluent`` or ``kafka-python``), and for each message
first records it, then commits the offset after it (at-least-once), recording each commit that
succeeded. Lines on its output file: ``C partition offset`` consumed, ``K partition offset``
committed. SIGTERM closes the consumer (leaving the group) and exits.

    python -m tests.broker.group_member CLIENT BOOTSTRAP TOPIC GROUP STRATEGY OUT

STRATEGY ``consumer:ASSIGNOR`` (confluent only) joins with the KIP-848 protocol
(``group.protocol=consumer``) and asks the broker for ASSIGNOR (``uniform`` or ``range``).
"""

from __future__ import annotations

import signal
import sys
import time


def _confluent(bootstrap: str, topic: str, group: str, strategy: str, out: object,
               stopping: list[bool]) -> None:
    import confluent_kafka as ck

    settings: dict[str, object] = {
        "bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False,
        "auto.offset.reset": "earliest", "topic.metadata.refresh.interval.ms": 2000}
    if strategy.startswith("consumer:"):  # KIP-848: the broker assigns, with this assignor
        settings.update({"group.protocol": "consumer",
                         "group.remote.assignor": strategy.split(":", 1)[1]})
    else:
        settings.update({"session.timeout.ms": 6000, "heartbeat.interval.ms": 500,
                         "partition.assignment.strategy": strategy})
    consumer = ck.Consumer(settings)
    consumer.subscribe([topic])
    try:
        while not stopping[0]:
            msg = consumer.poll(0.2)
            if msg is None or msg.error() is not None:
                continue
            print(f"C {msg.partition()} {msg.offset()}", file=out, flush=True)
            time.sleep(0.002)  # "processing"
            try:
                consumer.commit(offsets=[ck.TopicPartition(topic, msg.partition(),
                                                           msg.offset() + 1)],
                                asynchronous=False)
                print(f"K {msg.partition()} {msg.offset() + 1}", file=out, flush=True)
            except ck.KafkaException:
                pass  # a rebalance or a coordinator move: the next owner consumes it again
    finally:
        consumer.close()


def _kafka_python(bootstrap: str, topic: str, group: str, strategy: str, out: object,
                  stopping: list[bool]) -> None:
    import kafka
    from kafka.coordinator.assignors.range import RangePartitionAssignor
    from kafka.coordinator.assignors.roundrobin import RoundRobinPartitionAssignor
    from kafka.errors import KafkaError
    from kafka.structs import OffsetAndMetadata

    assignor = RoundRobinPartitionAssignor if strategy == "roundrobin" else RangePartitionAssignor
    consumer = kafka.KafkaConsumer(
        topic, bootstrap_servers=bootstrap, group_id=group, enable_auto_commit=False,
        auto_offset_reset="earliest", session_timeout_ms=6000, heartbeat_interval_ms=500,
        partition_assignment_strategy=[assignor], metadata_max_age_ms=2000)
    try:
        while not stopping[0]:
            for tp, records in consumer.poll(timeout_ms=200).items():
                for r in records:
                    print(f"C {tp.partition} {r.offset}", file=out, flush=True)
                    time.sleep(0.002)
                    try:
                        consumer.commit({tp: OffsetAndMetadata(r.offset + 1, "", -1)})
                        print(f"K {tp.partition} {r.offset + 1}", file=out, flush=True)
                    except KafkaError:
                        break  # the partition may be gone: poll again
    finally:
        consumer.close()


def main(argv: list[str]) -> int:
    client, bootstrap, topic, group, strategy, path = argv
    stopping = [False]

    def stop(_signum: int, _frame: object) -> None:
        stopping[0] = True

    signal.signal(signal.SIGTERM, stop)
    with open(path, "a") as out:
        run = _confluent if client == "confluent" else _kafka_python
        run(bootstrap, topic, group, strategy, out, stopping)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
