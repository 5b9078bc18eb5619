"""Issue 33's rows, measured on one running system: transactional produce against the same
records without transactions, and read_committed against read_uncommitted consume of a topic
written in transactions, some of them aborted."""

from __future__ import annotations

import threading

from benchmarks.versus import java, rdkafka
from benchmarks.versus.rows import PARTITIONS, Step, create_topic
from benchmarks.versus.systems import System, SystemError_
from benchmarks.versus.table import Row, target_for

PER_TRANSACTION = 100
"""Records in each of librdkafka's transactions (issue 33: transactions of 100 x 1 KiB)."""
JAVA_TRANSACTION_MS = 100
"""ProducerPerformance's --transaction-duration-ms: it commits with the first send at least
this long after the begin, so a transaction holds what the tool hands the producer in 100 ms
(Kafka Streams' commit.interval.ms under exactly_once_v2), bounded by the producer's buffer
rather than by the brokers. A transaction of 100 records cannot be asked of the tool: with 1
ms, a transaction held a handful of records on a loaded machine, and the quick size took
minutes."""
ABORT_EVERY = 10
"""One in 10 transactions of each of the read_committed topic's writers is aborted (the 2nd,
12th, 22nd...: 10% of the records at the default size, more on a tiny one; the row's label
says how many)."""
WRITERS = 4
"""Transactional producers writing the read_committed topic at once (a librdkafka producer
has one transaction open at a time)."""
SIZE = 1024


def txn_produce_rows(step: Step, system: System) -> None:
    """Per client: the records without transactions, then the same in transactions, each on
    a fresh topic; the MB/s of each and the second over the first."""
    records = max(1000, step.sizes.produce_bytes // SIZE)
    for client in step.clients:
        def body(client: str = client) -> None:
            plain_topic, txn_topic = f"tp-plain-{client}", f"tp-txn-{client}"
            create_topic(system, plain_topic, PARTITIONS)
            create_topic(system, txn_topic, PARTITIONS)
            if client == "java":
                plain = java.produce(step.tools, step.work, system.bootstrap, plain_topic,
                                     records=records, size=SIZE)["mbps"]
                txn = java.produce(step.tools, step.work, system.bootstrap, txn_topic,
                                   records=records, size=SIZE,
                                   transaction_ms=JAVA_TRANSACTION_MS)["mbps"]
                what = f"{JAVA_TRANSACTION_MS} ms transactions"
            else:
                plain = rdkafka.transactions(system.bootstrap, plain_topic, PARTITIONS,
                                             records=records, size=SIZE,
                                             transactional=False)["mbps"]
                txn = rdkafka.transactions(system.bootstrap, txn_topic, PARTITIONS,
                                           records=records, size=SIZE,
                                           per_transaction=PER_TRANSACTION)["mbps"]
                what = f"{PER_TRANSACTION} a transaction"
            step.results.add(Row(key=f"txn.produce.{client}",
                                 label=f"txn produce 1 KiB, {what} ({client})", unit="MB/s",
                                 better="higher", target=target_for("throughput")),
                             system.key, txn)
            step.results.add(Row(key=f"txn.plain.{client}",
                                 label=f"the same records, no transactions ({client})",
                                 unit="MB/s", better="higher"), system.key, plain)
            # issue 33's 0.7 is for its load, librdkafka's transactions of 100 records
            step.results.add(Row(key=f"txn.share.{client}",
                                 label=f"txn produce / no transactions ({client})", unit="x",
                                 better="higher", absolute=True,
                                 target=target_for("txn_share") if client == "rdkafka" else None),
                             system.key, txn / plain)

        step.run(system, f"transactional produce {records} x 1 KiB and the same without "
                         f"({client})", body)


def _fill(system: System, topic: str, records: int) -> dict[str, int]:
    """``records`` of 1 KiB written by ``WRITERS`` transactional producers at once, each
    aborting one in ``ABORT_EVERY`` of its transactions: how many were committed and
    aborted."""
    counts = {"committed": 0, "aborted": 0}
    errors: list[str] = []
    lock = threading.Lock()

    def write(share: int) -> None:
        try:
            got = rdkafka.transactions(system.bootstrap, topic, PARTITIONS, records=share,
                                       size=SIZE, per_transaction=PER_TRANSACTION,
                                       abort_every=ABORT_EVERY)
        except Exception as exc:  # noqa: BLE001 - any client error: one line, below
            errors.append(f"{type(exc).__name__}: {exc}")
            return
        with lock:
            counts["committed"] += int(got["committed"])
            counts["aborted"] += int(got["aborted"])

    shares = [records // WRITERS + (1 if i < records % WRITERS else 0) for i in range(WRITERS)]
    threads = [threading.Thread(target=write, args=(share,), daemon=True) for share in shares]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(900)
    if errors or any(t.is_alive() for t in threads):
        raise SystemError_(f"transactional writers: {errors[0] if errors else 'still writing'}")
    return counts


def txn_consume_rows(step: Step, system: System) -> None:
    """A topic written in transactions, some aborted; per client a fresh consumer reads it
    from the start with read_uncommitted, then another with read_committed: MB/s of the
    log's values (aborted ones included) and the second over the first."""
    records = max(1000, step.sizes.consume_bytes // SIZE)
    counts: dict[str, int] = {}
    topic = "txn-consume"

    def fill() -> None:
        create_topic(system, topic, PARTITIONS)
        counts.update(_fill(system, topic, records))

    step.run(system, f"fill {topic}: {records} x 1 KiB by {WRITERS} transactional producers, "
                     f"1 in {ABORT_EVERY} transactions aborted", fill)
    if not counts:
        return
    log_bytes = records * SIZE
    everything = counts["committed"] + counts["aborted"]
    share = round(100 * counts["aborted"] / everything)
    for client in step.clients:
        def body(client: str = client) -> None:
            got: dict[str, float] = {}
            for isolation, messages in (("read_uncommitted", everything),
                                        ("read_committed", counts["committed"])):
                if client == "java":
                    got[isolation] = java.consume(step.tools, step.work, system.bootstrap,
                                                  topic, messages=messages,
                                                  isolation=isolation,
                                                  log_bytes=log_bytes)["mbps"]
                else:
                    got[isolation] = rdkafka.read_all(system.bootstrap, topic, PARTITIONS,
                                                      isolation=isolation, messages=messages,
                                                      log_bytes=log_bytes)["mbps"]
            step.results.add(Row(key=f"txn.committed.{client}",
                                 label=f"consume read_committed, {share}% aborted ({client})",
                                 unit="MB/s", better="higher",
                                 target=target_for("throughput")),
                             system.key, got["read_committed"])
            step.results.add(Row(key=f"txn.uncommitted.{client}",
                                 label=f"the same, read_uncommitted ({client})", unit="MB/s",
                                 better="higher"), system.key, got["read_uncommitted"])
            step.results.add(Row(key=f"txn.committed_share.{client}",
                                 label=f"read_committed / read_uncommitted ({client})",
                                 unit="x", better="higher",
                                 target=target_for("committed_share"), absolute=True),
                             system.key, got["read_committed"] / got["read_uncommitted"])

        step.run(system, f"read {topic} from the start, read_uncommitted then read_committed "
                         f"({client})", body)
