"""The state-change log (``state.change.logger``): each transition, election and fenced
decision of a controller scenario on the memory coordinator, in order, with its structured
fields; and the json log format that writes them out, one object per line."""

from __future__ import annotations

import io
import json
import logging
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest

from broker.logs import setup_logging
from coordinator import layout
from interbroker.errors import ErrorCode
from interbroker.fencing import FIELD, LOGGER_NAME
from interbroker.requests import UpdateMetadataRequest
from partctl.cli import build_parser
from tests.statemachines.conftest import Cluster, tp


class Changes(logging.Handler):
    """Collects the state-change log's structured fields, in order."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.fields: list[dict] = []  # type: ignore[type-arg]

    def emit(self, record: logging.LogRecord) -> None:
        fields = getattr(record, FIELD, None)
        if fields is not None:
            self.fields.append(fields)

    def about(self, topic: str) -> list[tuple]:  # type: ignore[type-arg]
        """Each line about ``topic`` as (event, replica or election, from or result, to)."""
        out = []
        for f in self.fields:
            if f.get("topic") != topic:
                continue
            match f["event"]:
                case "partition":
                    out.append(("partition", f["from"], f["to"], f.get("leader"),
                                tuple(f.get("isr", ()))))
                case "replica":
                    out.append(("replica", f["replica"], f["from"], f["to"]))
                case "election":
                    out.append(("election", f["election"], f["result"], f.get("leader"),
                                f.get("unclean")))
                case "isr":
                    out.append(("isr", f["leader"], tuple(f["isr"])))
                case other:
                    out.append((other,))
        return out


@pytest.fixture
def changes() -> Iterator[Changes]:
    logger = logging.getLogger(LOGGER_NAME)
    handler, level = Changes(), logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.DEBUG)
    yield handler
    logger.removeHandler(handler)
    logger.setLevel(level)


def test_the_state_change_log_records_each_transition_of_a_scenario_in_order(
        changes: Changes) -> None:
    """A topic is created on 3 and 2; 3 dies (an offline election moves the lead to 2 and the
    ISR shrinks); 3 returns out of sync; 2 dies: the clean election fails and the topic's
    unclean setting elects 3 out of sync."""
    c = Cluster()
    try:
        for b in (1, 2, 3):
            c.add(b)
        c.admin.create_topic("s", assignment={0: [3, 2]},
                             config={"unclean.leader.election.enable": "true"})
        c.pump()
        created = changes.about("s")
        c.kill(3)
        killed = changes.about("s")[len(created):]
        c.add(3)
        back = changes.about("s")[len(created) + len(killed):]
        c.kill(2)
        lost = changes.about("s")[len(created) + len(killed) + len(back):]
    finally:
        c.close()
    NEW, ON, OFF = "NewPartition", "OnlinePartition", "OfflinePartition"
    assert created == [
        ("partition", "NonExistentPartition", NEW, None, ()),
        ("replica", 3, "NonExistentReplica", "NewReplica"),
        ("replica", 2, "NonExistentReplica", "NewReplica"),
        ("partition", NEW, ON, 3, (3, 2)),
        ("replica", 3, "NewReplica", "OnlineReplica"),
        ("replica", 2, "NewReplica", "OnlineReplica"),
    ]
    assert killed == [
        ("partition", ON, OFF, 3, (3, 2)),
        ("election", "offline", "elected", 2, False),
        ("partition", OFF, ON, 2, (2,)),
        ("replica", 3, "OnlineReplica", "OfflineReplica"),
    ]
    assert back == [("replica", 3, "OfflineReplica", "OnlineReplica")]
    assert lost == [
        ("partition", ON, OFF, 2, (2,)),
        ("election", "offline", "failed", None, None),
        ("election", "unclean_offline", "elected", 3, True),
        ("partition", OFF, ON, 3, (3,)),
        ("replica", 2, "OnlineReplica", "OfflineReplica"),
    ]
    first = next(f for f in changes.fields if f.get("topic") == "s")
    assert (first["controller_id"], first["controller_epoch"], first["partition"]) == (1, 1, 0)


def test_a_replica_of_a_deleted_topic_on_a_broker_down_is_logged_ineligible(
        three: Cluster, changes: Changes) -> None:
    """Nothing is stored for the replicas of a broker that is gone (they read Offline by the
    rule), and one of a topic whose deletion begins then reads Ineligible by the rule: it is
    stored so, and the log shows the move from Offline, as Kafka's controller logs it."""
    three.admin.create_topic("d", assignment={0: [3, 2]})
    three.pump()
    three.kill(3)
    start = len(changes.about("d"))
    three.admin.delete_topic("d")
    three.pump()
    replicas = [line for line in changes.about("d")[start:] if line[0] == "replica"]
    assert ("replica", 3, "OfflineReplica", "ReplicaDeletionIneligible") in replicas
    assert ("replica", 2, "OnlineReplica", "OfflineReplica") in replicas


def test_a_returning_broker_s_replica_of_a_topic_being_deleted_is_not_taken_online(
        three: Cluster, changes: Changes) -> None:
    """A broker that comes back while a topic of its replicas is being deleted: its other
    replicas go Online, those go from Ineligible to the deletion's start (through Offline, as
    Kafka's deletion resumes it), never Online: d-0's, whose partition has a leader, and
    d-1's, whose has none (the deletion took it out of the partitions waiting for one)."""
    three.admin.create_topic("d", assignment={0: [3, 2], 1: [3, 1]})
    three.pump()
    three.kill(1)  # d-1 waits for a broker of its own: 1 does not come back
    three.pump()
    three.kill(3)
    three.admin.delete_topic("d")
    three.pump()
    start, others = len(changes.about("d")), len(changes.about("t"))
    three.add(3)
    replicas = [line for line in changes.about("d")[start:] if line[0] == "replica"]
    assert replicas.count(("replica", 3, "ReplicaDeletionIneligible", "OfflineReplica")) == 2
    assert replicas.count(("replica", 3, "OfflineReplica", "ReplicaDeletionStarted")) == 2
    assert not [line for line in replicas if line[3] == "OnlineReplica"]
    assert ("replica", 3, "OfflineReplica", "OnlineReplica") in changes.about("t")[others:]


def test_a_broker_refusing_a_request_from_an_older_controller_is_logged(
        three: Cluster, changes: Changes) -> None:
    three.kill(1)  # controller moves to 2 at epoch 2
    b3 = three.participants[3].handler
    old = replace(b3.received(UpdateMetadataRequest)[-1], controller_epoch=1)
    answers: list = []  # type: ignore[type-arg]
    three.network.channel().send(3, [old], lambda _b, _r, answer: answers.append(answer))
    assert answers[0].error == ErrorCode.STALE_CONTROLLER_EPOCH
    fenced = [f for f in changes.fields if f["event"] == "fenced"]
    assert fenced == [{
        "event": "fenced", "node": "broker", "node_id": 3, "request": "UpdateMetadata",
        "reason": "stale controller epoch", "given_epoch": 1, "current_epoch": 2,
        "controller_id": old.controller_id, "controller_epoch": 1}]


def test_a_controlled_shutdown_from_an_earlier_registration_is_logged(
        three: Cluster, changes: Changes) -> None:
    stale = three.participants[2].broker_epoch
    three.bounce(2)
    current = three.participants[2].broker_epoch
    three.active().controller.request_controlled_shutdown(2, stale)
    three.pump()
    fenced = [f for f in changes.fields if f["event"] == "fenced"]
    assert [(f["node"], f["node_id"], f["request"], f["reason"], f["given_epoch"],
             f["current_epoch"]) for f in fenced] == [
        ("controller", 1, "ControlledShutdown of broker 2", "stale broker epoch", stale,
         current)]


def test_a_controller_write_refused_by_the_epoch_check_is_logged(
        three: Cluster, changes: Changes) -> None:
    """Another controller's election bumps the epoch behind the active one's back: its next
    write fails the store's epoch check, and the refusal is on the log before it resigns."""
    three.admin_client.set(layout.CONTROLLER_EPOCH, b"99")
    three.admin.create_topic("late", assignment={0: [1, 2]})
    three.pump()
    fenced = [f for f in changes.fields if f["event"] == "fenced"]
    assert fenced and fenced[0]["node"] == "controller" and fenced[0]["node_id"] == 1
    assert fenced[0]["reason"] == "stale controller epoch" and fenced[0]["given_epoch"] == 1


def test_json_lines_parse_one_by_one_and_the_state_change_log_can_have_its_own_file(
        tmp_path: Path, restored_logging: None) -> None:
    err = io.StringIO()
    own = tmp_path / "state-change.log"
    setup_logging(err, log_format="json", state_change_file=str(own))
    logging.getLogger("partctl.test").warning("two\nlines")
    c = Cluster()
    try:
        for b in (1, 2):
            c.add(b)
        c.admin.create_topic("j", assignment={0: [2, 1]})
        c.pump()
    finally:
        c.close()
    main = [json.loads(line) for line in err.getvalue().splitlines()]
    assert {"time", "level", "logger", "message"} <= main[0].keys()
    assert (main[0]["level"], main[0]["logger"], main[0]["message"]) == (
        "WARNING", "partctl.test", "two\nlines")
    assert all(m["logger"] != LOGGER_NAME for m in main)
    lines = [json.loads(line) for line in own.read_text().splitlines()]
    online = [m for m in lines if m[FIELD]["event"] == "partition"
              and m[FIELD]["to"] == "OnlinePartition"]
    assert [m[FIELD]["topic"] for m in online] == ["j"]
    assert online[0]["logger"] == LOGGER_NAME and online[0]["level"] == "INFO"
    assert (online[0][FIELD]["leader"], online[0][FIELD]["isr"]) == (2, [2, 1])
    assert "NewPartition -> OnlinePartition" in online[0]["message"]
    assert tp("j", 0) == (online[0][FIELD]["topic"], online[0][FIELD]["partition"])


@pytest.mark.parametrize("command", [
    ["broker", "start", "--config", "x"], ["controller", "start", "--config", "x"],
    ["scheduler", "run"], ["demo"]])
def test_every_long_running_command_takes_a_log_format(command: list[str]) -> None:
    parser = build_parser()
    assert parser.parse_args([*command, "--log-format", "json"]).log_format == "json"
    assert parser.parse_args(command).log_format == "text"
