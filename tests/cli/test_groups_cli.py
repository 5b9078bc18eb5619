"""``partctl groups``: Kafka's kafka-consumer-groups against three broker processes on a real
ZooKeeper, with consumer groups of librdkafka (confluent-kafka) consumers.

Committed offsets are checked with the consumer's own OffsetFetch (``Consumer.committed``), not
with the command under test; a reset is then read back by a consumer that resumes from it.
Both routes to the cluster are used: ``--bootstrap-server`` and ``--coordinator`` (the brokers
registered in ZooKeeper)."""

from __future__ import annotations

import contextlib
import io
import socket
import time
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path

import confluent_kafka as ck
import pytest

from partctl.cli import main
from tests.broker.data.test_cluster_clients import create, serving
from tests.broker.groups.test_group_clients import GroupTrio
from tests.broker.processes import coordinator_url
from tests.servers import Server, free_port
from tests.waiting import wait_until

PER_PARTITION = 10


def run(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main(list(argv), out=out, err=err)
        except SystemExit as exc:  # argparse's usage errors
            code = exc.code if isinstance(exc.code, int) else 1
    return code, out.getvalue(), err.getvalue()


def table(text: str) -> list[dict[str, str]]:
    """The rows of the table in ``text`` (from its header line on; cells hold no blanks, but
    the header ``COORDINATOR (ID)`` is one column over two cells)."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("GROUP "))
    head = lines[start].replace("COORDINATOR (ID)", "COORDINATOR").split()
    rows = []
    for line in lines[start + 1:]:
        cells = line.split()
        if "COORDINATOR" in head:
            at = head.index("COORDINATOR")
            cells[at:at + 2] = [" ".join(cells[at:at + 2])]
        assert len(cells) == len(head), (head, line)
        rows.append(dict(zip(head, cells, strict=True)))
    return rows


def one_error(code: int, out: str, err: str) -> str:
    """The one ``partctl: error:`` line of a failed command (exit 1, nothing on stdout)."""
    assert (code, out) == (1, ""), (code, out, err)
    lines = err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("partctl: error: "), err
    return lines[0].removeprefix("partctl: error: ")


@pytest.fixture(scope="module")
def trio(zookeeper_server: Server, tmp_path_factory: pytest.TempPathFactory
         ) -> Iterator[GroupTrio]:
    with serving(GroupTrio(coordinator_url(zookeeper_server),
                           tmp_path_factory.mktemp("groups"), {})) as cluster:
        yield cluster


def name(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:6]}"


def produce(trio: GroupTrio, topic: str, partitions: int, *,
            timestamp: int | None = None) -> None:
    """PER_PARTITION records to each partition; with ``timestamp``, record i of a partition is
    stamped ``timestamp + i`` seconds."""
    producer = ck.Producer({"bootstrap.servers": trio.bootstrap, "acks": "all",
                            "linger.ms": 5})
    errors: list[object] = []
    for p in range(partitions):
        for i in range(PER_PARTITION):
            extra = {} if timestamp is None else {"timestamp": timestamp + i * 1000}
            producer.produce(topic, value=f"{p}-{i}".encode(), partition=p,
                             on_delivery=lambda e, m: errors.append(e) if e else None, **extra)
    assert producer.flush(60) == 0 and errors == []


def consumer(trio: GroupTrio, group: str, client_id: str, protocol: str = "classic"
             ) -> ck.Consumer:
    """A member of ``group`` by the classic protocol or KIP-848's (``consumer``), whose
    session is the broker's to set."""
    session = {"session.timeout.ms": 30000} if protocol == "classic" else {}
    return ck.Consumer({"bootstrap.servers": trio.bootstrap, "group.id": group,
                        "client.id": client_id, "enable.auto.commit": False,
                        "auto.offset.reset": "earliest", "group.protocol": protocol, **session})


def committed(trio: GroupTrio, group: str, topic: str, partitions: int) -> dict[int, int]:
    """The group's committed offsets as librdkafka's OffsetFetch gives them (-1001: none)."""
    reader = consumer(trio, group, "offset-reader")
    try:
        answer = reader.committed([ck.TopicPartition(topic, p) for p in range(partitions)],
                                  timeout=30)
    finally:
        reader.close()
    return {tp.partition: tp.offset for tp in answer}


def commit(c: ck.Consumer, topic: str, offsets: dict[int, int]) -> None:
    c.commit(offsets=[ck.TopicPartition(topic, p, o) for p, o in offsets.items()],
             asynchronous=False)


@contextlib.contextmanager
def members(trio: GroupTrio, group: str, topic: str, partitions: int, protocol: str = "classic"
            ) -> Iterator[list[ck.Consumer]]:
    """Two consumers of ``topic`` in ``group``, each with part of its partitions, each having
    read every record of its partitions; closed (they leave the group) at the end."""
    both = [consumer(trio, group, "member-a", protocol),
            consumer(trio, group, "member-b", protocol)]
    try:
        for c in both:
            c.subscribe([topic])
        read = {c: set() for c in both}

        def settled() -> bool:
            for c in both:
                msg = c.poll(0.2)
                if msg is not None and msg.error() is None:
                    read[c].add((msg.partition(), msg.offset()))
            owned = [{tp.partition for tp in c.assignment()} for c in both]
            return (all(owned) and sum(len(o) for o in owned) == partitions
                    and all(len({o for p, o in read[c] if p == q}) == PER_PARTITION
                            for c, o in zip(both, owned, strict=True) for q in o))

        wait_until(settled, timeout=90, interval=0, message="two members that read it all")
        yield both
    finally:
        for c in both:
            c.close()


def resume(trio: GroupTrio, group: str, topic: str, partitions: int) -> dict[int, int]:
    """The first offset a new member of ``group`` reads in each partition."""
    c = consumer(trio, group, "resumer")
    first: dict[int, int] = {}
    try:
        c.subscribe([topic])
        deadline = time.monotonic() + 60
        while len(first) < partitions and time.monotonic() < deadline:
            msg = c.poll(0.5)
            if msg is not None and msg.error() is None:
                first.setdefault(msg.partition(), msg.offset())
    finally:
        c.close()
    return first


# --- a group with live members ---------------------------------------------------------------


@pytest.mark.servers
def test_a_live_group_listed_described_and_protected(trio: GroupTrio) -> None:
    topic, group = name("lagging"), name("readers")
    create(trio, topic, 4, num_partitions=4, replication_factor=3)
    produce(trio, topic, 4)
    boot = ["--bootstrap-server", trio.bootstrap]
    zk = ["--coordinator", trio.url]
    wanted = {0: 3, 1: 10, 2: 7}  # partition 3: nothing committed
    with members(trio, group, topic, 4) as (a, b):
        owner = {tp.partition: c for c in (a, b) for tp in c.assignment()}
        for c in (a, b):
            commit(c, topic, {p: o for p, o in wanted.items() if owner[p] is c})

        for route in (boot, zk):
            code, out, err = run("groups", "describe", "--group", group, *route)
            assert (code, err) == (0, ""), err
            rows = {int(r["PARTITION"]): r for r in table(out)}
            assert sorted(rows) == [0, 1, 2, 3]
            for p, row in rows.items():
                assert row["GROUP"] == group and row["TOPIC"] == topic
                assert row["LOG-END-OFFSET"] == str(PER_PARTITION)
                assert row["CURRENT-OFFSET"] == str(wanted.get(p, "-"))
                assert row["LAG"] == (str(PER_PARTITION - wanted[p]) if p in wanted else "-")
                assert row["CONSUMER-ID"] == owner[p].memberid()
                assert row["CLIENT-ID"] == ("member-a" if owner[p] is a else "member-b")
                assert row["HOST"] == "/127.0.0.1"

        code, out, err = run("groups", "describe", "--group", group, "--members", *boot)
        assert code == 0, err
        listed = {r["CONSUMER-ID"]: r for r in table(out)}
        assert set(listed) == {a.memberid(), b.memberid()}
        for c in (a, b):
            mine = sorted(tp.partition for tp in c.assignment())
            assert listed[c.memberid()]["#PARTITIONS"] == str(len(mine))
            assert listed[c.memberid()]["ASSIGNMENT"] == f"{topic}:{','.join(map(str, mine))}"

        code, out, err = run("groups", "describe", "--group", group, "--state", *zk)
        assert code == 0, err
        (state,) = table(out)
        assert (state["STATE"], state["#MEMBERS"], state["ASSIGNMENT-STRATEGY"]) == (
            "Stable", "2", "range")
        address, node = state["COORDINATOR"].split()
        assert address == trio.brokers[int(node.strip("()"))].bootstrap

        code, out, err = run("groups", "list", *boot)
        assert code == 0, err
        assert {"GROUP": group, "STATE": "Stable", "PROTOCOL-TYPE": "consumer"} in table(out)
        code, out, _ = run("groups", "list", "--state", "empty,dead", *zk)
        assert code == 0 and group not in out

        # a group with members keeps its offsets and itself
        before = committed(trio, group, topic, 4)
        message = one_error(*run("groups", "reset-offsets", "--group", group, "--to-earliest",
                                 "--all-topics", "--execute", *boot))
        assert message == (f"Assignments can only be reset if the group '{group}' is inactive, "
                           f"but the current state is Stable.")
        message = one_error(*run("groups", "delete", "--group", group, *zk))
        assert message == (f"cannot delete group '{group}': it has active members "
                           f"(NON_EMPTY_GROUP)")
        assert committed(trio, group, topic, 4) == before == {**wanted, 3: -1001}

    # the members left: the offsets stay, with nobody consuming
    code, out, err = run("groups", "describe", "--group", group, *boot)
    assert code == 0, err
    assert out.splitlines()[0] == f"Consumer group '{group}' has no active members."
    rows = {int(r["PARTITION"]): r for r in table(out)}
    assert sorted(rows) == [0, 1, 2]
    assert {r["CONSUMER-ID"] for r in rows.values()} == {"-"}
    assert [rows[p]["LAG"] for p in (0, 1, 2)] == ["7", "0", "3"]
    code, out, err = run("groups", "list", "--state", "Empty", *boot)
    assert {"GROUP": group, "STATE": "Empty", "PROTOCOL-TYPE": "consumer"} in table(out)

    code, out, err = run("groups", "delete", "--group", group, *boot)
    assert (code, out, err) == (0, f"Deleted consumer group '{group}'.\n", "")
    assert one_error(*run("groups", "describe", "--group", group, *zk)) == (
        f"Consumer group '{group}' does not exist.")
    assert committed(trio, group, topic, 4) == {p: -1001 for p in range(4)}


@pytest.mark.servers
def test_a_kip848_group_described_by_its_own_api_and_protected(trio: GroupTrio) -> None:
    """A group of ``group.protocol=consumer`` members is known to ConsumerGroupDescribe only
    (DescribeGroups calls it Dead): described from there, its members' assignments shown,
    and a reset refused while it has members."""
    topic, group = name("modern"), name("kip848")
    create(trio, topic, 4, num_partitions=4, replication_factor=3)
    produce(trio, topic, 4)
    boot = ["--bootstrap-server", trio.bootstrap]
    with members(trio, group, topic, 4, protocol="consumer") as (a, b):
        owner = {tp.partition: c for c in (a, b) for tp in c.assignment()}
        for c in (a, b):
            commit(c, topic, {p: 4 for p in owner if owner[p] is c})

        def stable() -> bool:
            code, out, _ = run("groups", "describe", "--group", group, "--state", *boot)
            return code == 0 and table(out)[0]["STATE"] == "Stable"

        wait_until(stable, timeout=30, message="the consumer group stable")
        code, out, err = run("groups", "describe", "--group", group, "--state", *boot)
        (state,) = table(out)
        assert (state["#MEMBERS"], state["ASSIGNMENT-STRATEGY"]) == ("2", "uniform")
        code, out, err = run("groups", "describe", "--group", group, *boot)
        assert code == 0, err
        rows = {int(r["PARTITION"]): r for r in table(out)}
        assert sorted(rows) == [0, 1, 2, 3]
        for p, row in rows.items():
            assert row["CURRENT-OFFSET"] == "4" and row["LAG"] == str(PER_PARTITION - 4)
            assert row["CONSUMER-ID"] == owner[p].memberid()
        code, out, err = run("groups", "describe", "--group", group, "--members", *boot)
        listed = {r["CONSUMER-ID"]: r for r in table(out)}
        for c in (a, b):
            mine = sorted(tp.partition for tp in c.assignment())
            assert listed[c.memberid()]["ASSIGNMENT"] == f"{topic}:{','.join(map(str, mine))}"

        before = committed(trio, group, topic, 4)
        message = one_error(*run("groups", "reset-offsets", "--group", group, "--to-earliest",
                                 "--all-topics", "--execute", *boot))
        assert message == (f"Assignments can only be reset if the group '{group}' is inactive, "
                           f"but the current state is Stable.")
        assert committed(trio, group, topic, 4) == before == {p: 4 for p in range(4)}


# --- resetting -------------------------------------------------------------------------------


def iso(ms: int, zone: timedelta = timedelta(0)) -> str:
    when = datetime.fromtimestamp(ms / 1000, UTC).astimezone(timezone(zone))
    text = when.isoformat(timespec="milliseconds")
    return text.replace("+00:00", "Z") if zone == timedelta(0) else text


@pytest.mark.servers
def test_every_reset_mode_plans_then_commits_exactly_its_plan(trio: GroupTrio) -> None:
    topic, group = name("resets"), name("rewinders")
    create(trio, topic, 2, num_partitions=2, replication_factor=3)
    start = (int(time.time()) - 3600) * 1000  # record i: start + i s
    produce(trio, topic, 2, timestamp=start)
    first = consumer(trio, group, "first")
    try:  # the group's offsets, then no member
        first.assign([ck.TopicPartition(topic, 0), ck.TopicPartition(topic, 1)])
        commit(first, topic, {0: 5, 1: 5})
    finally:
        first.close()
    boot = ["--bootstrap-server", trio.bootstrap]
    zk = ["--coordinator", trio.url]
    expected = {0: 5, 1: 5}

    def reset(*argv: str, plan: dict[int, int], route: list[str] = boot) -> None:
        nonlocal expected
        base = ["groups", "reset-offsets", "--group", group, *argv, *route]
        for dry in ([], ["--dry-run"]):
            code, out, err = run(*base, *dry)
            assert (code, err) == (0, ""), err
            assert out.startswith("WARN: ") == (not dry), out
            assert {int(r["PARTITION"]): int(r["NEW-OFFSET"]) for r in table(out)} == plan
            assert committed(trio, group, topic, 2) == expected, ("a dry run committed", argv)
        code, out, err = run(*base, "--execute")
        assert (code, err) == (0, ""), err
        assert {int(r["PARTITION"]): int(r["NEW-OFFSET"]) for r in table(out)} == plan
        expected = {**expected, **plan}
        assert committed(trio, group, topic, 2) == expected, argv

    reset("--to-earliest", "--topic", topic, plan={0: 0, 1: 0})
    reset("--to-latest", "--all-topics", plan={0: 10, 1: 10}, route=zk)
    reset("--to-offset", "4", "--topic", f"{topic}:0", plan={0: 4})
    reset("--to-offset", "99", "--topic", f"{topic}:1", plan={1: 10})  # clamped to the end
    reset("--shift-by", "-3", "--all-topics", plan={0: 1, 1: 7})
    reset("--shift-by", "-100", "--topic", f"{topic}:0,1", plan={0: 0, 1: 0}, route=zk)
    reset("--shift-by", "6", "--topic", topic, plan={0: 6, 1: 6})
    reset("--to-datetime", iso(start + 3500), "--all-topics", plan={0: 4, 1: 4})
    reset("--to-datetime", iso(start + 7000, timedelta(hours=1)), "--topic", f"{topic}:1",
          plan={1: 7})
    reset("--to-datetime", iso(start + 3_600_000 * 2), "--all-topics", plan={0: 10, 1: 10})
    reset("--by-duration", "PT2H", "--all-topics", plan={0: 0, 1: 0}, route=zk)
    reset("--to-offset", "8", "--topic", f"{topic}:0", plan={0: 8})

    assert resume(trio, group, topic, 2) == {0: 8, 1: 0}


# --- bad input -------------------------------------------------------------------------------


@pytest.mark.servers
def test_bad_input_is_one_line_and_changes_nothing(trio: GroupTrio, tmp_path: Path) -> None:
    topic, group = name("guarded"), name("idle")
    create(trio, topic, 2, num_partitions=2, replication_factor=3)
    produce(trio, topic, 2)
    c = consumer(trio, group, "idle")
    try:
        c.assign([ck.TopicPartition(topic, 0), ck.TopicPartition(topic, 1)])
        commit(c, topic, {0: 2, 1: 3})
    finally:
        c.close()
    boot = ["--bootstrap-server", trio.bootstrap]
    reset = ["groups", "reset-offsets", "--group", group, "--execute"]

    assert one_error(*run("groups", "describe", "--group", "no-such-group", *boot)) == (
        "Consumer group 'no-such-group' does not exist.")
    assert one_error(*run("groups", "describe", "--group", group, "--group", "nope",
                          *boot)) == "Consumer group 'nope' does not exist."
    assert one_error(*run(*reset, "--to-earliest", "--topic", "no-such-topic", *boot)) == (
        "topic 'no-such-topic' does not exist")
    assert one_error(*run(*reset, "--to-earliest", "--topic", f"{topic}:0,5", *boot)) == (
        f"topic '{topic}' has no partition 5 (it has 2)")
    assert "illegal characters" in one_error(*run(*reset, "--to-earliest", "--topic",
                                                  "bad/name", *boot))
    assert "--shift-by moves committed offsets" in one_error(*run(
        "groups", "reset-offsets", "--group", name("never"), "--shift-by", "1", "--topic",
        topic, "--execute", *boot))
    assert one_error(*run("groups", "delete", "--group", "no-such-group", *boot)) == (
        "cannot delete group 'no-such-group': no such group (GROUP_ID_NOT_FOUND)")
    assert one_error(*run("groups", "list", *boot, "--coordinator", trio.url)) == (
        "give --bootstrap-server or --coordinator, not both")

    for argv, option in (([*reset, "--to-datetime", "2026-13-01T00:00:00"], "--to-datetime"),
                         ([*reset, "--to-datetime", "yesterday"], "--to-datetime"),
                         ([*reset, "--to-datetime", "2026-11-24"], "--to-datetime"),
                         ([*reset, "--by-duration", "1h"], "--by-duration"),
                         ([*reset, "--to-offset", "x"], "--to-offset"),
                         ([*reset, "--to-offset", "-1"], "--to-offset"),
                         (["groups", "list", "--bootstrap-server", "127.0.0.1"],
                          "--bootstrap-server"),
                         (["groups", "list", "--state", "Busy"], "--state")):
        code, out, err = run(*argv, *(["--all-topics"] if "reset-offsets" in argv else []))
        assert (code, out) == (2, ""), argv
        assert err.startswith("usage: partctl groups ") and "Traceback" not in err, err
        assert err.splitlines()[-1].startswith(f"partctl groups {argv[1]}: error: argument "
                                               f"{option}"), err

    silent = socket.create_server(("127.0.0.1", 0))  # accepts connections, never answers
    try:
        address = f"127.0.0.1:{silent.getsockname()[1]}"
        message = one_error(*run("groups", "list", "--bootstrap-server", address,
                                 "--timeout", "0.5"))
        assert message.startswith(f"cannot reach any broker: {address}: "), message
    finally:
        silent.close()
    refused = free_port()
    message = one_error(*run("groups", "describe", "--all-groups", "--bootstrap-server",
                             f"127.0.0.1:{refused}"))
    assert message.startswith(f"cannot reach any broker: cannot connect to 127.0.0.1:{refused}")

    assert committed(trio, group, topic, 2) == {0: 2, 1: 3}


# --- without servers -------------------------------------------------------------------------


def test_no_cluster_named_is_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("PARTCTL_COORDINATOR", raising=False)
    assert one_error(*run("groups", "list")) == (
        "no cluster: pass --bootstrap-server HOST:PORT or --coordinator URL, or set "
        "PARTCTL_COORDINATOR")


@pytest.mark.parametrize(("text", "expected"), [
    ("2026-11-24T07:00:00Z", datetime(2026, 11, 24, 7, tzinfo=UTC)),
    ("2026-11-24T08:00:00+01:00", datetime(2026, 11, 24, 7, tzinfo=UTC)),
    ("2026-11-24T07:00:00.250Z", datetime(2026, 11, 24, 7, 0, 0, 250000, tzinfo=UTC)),
    ("2026-11-24T07:00:00", datetime(2026, 11, 24, 7).astimezone()),
])
def test_datetimes_as_kafka_takes_them(text: str, expected: datetime) -> None:
    from partctl.commands.groups import datetime_ms

    assert datetime_ms(text) == int(expected.timestamp() * 1000)


@pytest.mark.parametrize(("text", "expected"), [
    ("PT1H", timedelta(hours=1)), ("PT30M", timedelta(minutes=30)),
    ("P1DT12H", timedelta(days=1, hours=12)), ("PT0.5S", timedelta(seconds=0.5)),
    ("pt1h30m", timedelta(hours=1, minutes=30)), ("P2D", timedelta(days=2)),
])
def test_durations_as_java_reads_them(text: str, expected: timedelta) -> None:
    from partctl.commands.groups import duration

    assert duration(text) == expected


@pytest.mark.parametrize("text", ["", "P", "PT", "1h", "PT1X", "P1H", "-PT1H", "PT"])
def test_bad_durations(text: str) -> None:
    import argparse

    from partctl.commands.groups import duration

    with pytest.raises(argparse.ArgumentTypeError):
        duration(text)
