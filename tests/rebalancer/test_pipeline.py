"""One pipeline from goal to execution: the CLI and the jobs parse goals with one parser, check
plans with one validation, and an execution reads the coordinator through one metadata client.

Against the memory coordinator: a live embedded cluster (participants with recording brokers)
where a controller must act, bare registrations where planning alone is under test.
"""

from __future__ import annotations

import io
import json
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

import coordinator
from coordinator.admin import Admin
from coordinator.codecs import BrokerInfo
from coordinator.metadata import MetadataClient
from partctl.cli import main
from rebalancer import jobs
from rebalancer.jobs import tasks
from rebalancer.plan import PlanError
from rebalancer.store import RunOutcome, Store
from rebalancer.validation import validate_plan
from tests.rebalancer.test_jobs import Cluster


def run(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(list(argv), out=out, err=err)
    return code, out.getvalue(), err.getvalue()


@pytest.fixture
def db(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'jobs.db'}"


@pytest.fixture
def registered() -> Iterator[str]:
    """Four brokers on two racks registered (no controller: planning only), topic audit at
    RF 2 and topic logs at RF 3."""
    url = f"memory://pipeline-{uuid.uuid4().hex[:10]}"
    session = coordinator.connect(url)
    md = MetadataClient(session)
    for b in (1, 2, 3, 4):
        md.register_broker(BrokerInfo(id=b, host="127.0.0.1", port=9000 + b, rack=f"r{b % 2}"))
    admin = Admin(session)
    admin.create_topic("audit", assignment={0: [1, 2], 1: [2, 3], 2: [3, 4], 3: [4, 1]})
    admin.create_topic("logs", assignment={0: [1, 2, 3], 1: [2, 3, 4]})
    yield url
    session.close()


class Constructions:
    """Metadata clients made in this thread (the execution's; the cluster's own threads make
    theirs), counted by wrapping the real class's constructor."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.made: list[MetadataClient] = []
        original = MetadataClient.__init__
        me = threading.get_ident()

        def counting(client: MetadataClient, *args: object, **kwargs: object) -> None:
            original(client, *args, **kwargs)  # type: ignore[arg-type]
            if threading.get_ident() == me:
                self.made.append(client)

        monkeypatch.setattr(MetadataClient, "__init__", counting)


# --- one goal parser -------------------------------------------------------------------------


def test_a_replication_factor_job_plans_what_the_cli_plans(registered: str, db: str,
                                                           tmp_path: Path) -> None:
    plan_path = tmp_path / "plan.json"
    code, out, err = run("reassign", "generate", "--coordinator", registered, "--engine",
                         "local", "--goal", "replication-factor", "--replication-factor",
                         "audit=3", "-o", str(plan_path))
    assert code == 0, err
    cli_plan = json.loads(plan_path.read_text())
    assert {e["topic"] for e in cli_plan["partitions"]} == {"audit"}
    assert all(len(e["replicas"]) == 3 for e in cli_plan["partitions"])

    job = jobs.add_job(db, kind="rebalance", schedule=jobs.make_schedule(every="1h"),
                       arguments={"coordinator": registered, "goal": "replication-factor",
                                  "replication_factor": {"audit": 3}, "dry_run": True})
    summary = jobs.run_job_now(db, job.id)
    assert summary.outcome is RunOutcome.DRY_RUN, summary
    with Store.open(db) as store:
        run_ = store.get_run(summary.run_id)
        assert run_ is not None and run_.plan_id is not None
        record = store.get_plan(run_.plan_id)
    assert record is not None and record.goal == "replication-factor"
    assert dict(record.plan) == cli_plan
    assert record.options["replication_factor"] == {"audit": 3}


def test_a_bad_goal_gets_the_parsers_line_from_the_cli_and_a_job(registered: str, db: str,
                                                                  tmp_path: Path) -> None:
    out_path = str(tmp_path / "plan.json")
    code, _, err = run("reassign", "generate", "--coordinator", registered, "--goal",
                       "replication-factor", "--replication-factor", "audit=x", "-o", out_path)
    assert (code, err) == (1, "partctl: error: bad --replication-factor 'audit=x': want "
                              "topic=rf,topic=rf\n")
    code, _, err = run("jobs", "add", "rebalance", "--db", db, "--every", "1h",
                       "--coordinator", registered, "--goal", "replication-factor",
                       "--replication-factor", "audit=x")
    assert (code, err) == (1, "partctl: error: bad --replication-factor 'audit=x': want "
                              "topic=rf,topic=rf\n")
    # the same goal mistake, said with each surface's names for its options
    code, _, err = run("reassign", "generate", "--coordinator", registered, "--goal",
                       "replication-factor", "-o", out_path)
    assert err == ("partctl: error: --goal replication-factor needs --replication-factor (the "
                   "new replication factor of each topic)\n")
    with pytest.raises(jobs.JobSpecError) as info:
        jobs.add_job(db, kind="rebalance", schedule=jobs.make_schedule(every="1h"),
                     arguments={"coordinator": registered, "goal": "replication-factor"})
    assert str(info.value) == ("goal replication-factor needs replication_factor (the new "
                               "replication factor of each topic)")
    code, _, err = run("jobs", "add", "rebalance", "--db", db, "--every", "1h",
                       "--coordinator", registered, "--goal", "replication-factor")
    assert err == ("partctl: error: --goal replication-factor needs --replication-factor (the "
                   "new replication factor of each topic)\n")
    with pytest.raises(jobs.JobSpecError, match="argument replication_factor must be"):
        jobs.add_job(db, kind="rebalance", schedule=jobs.make_schedule(every="1h"),
                     arguments={"coordinator": registered, "goal": "replication-factor",
                                "replication_factor": {"audit": "3"}})


# --- one plan validation ---------------------------------------------------------------------


def test_a_bad_plan_gets_the_same_line_from_the_cli_and_a_job(registered: str,
                                                               tmp_path: Path) -> None:
    text = json.dumps({"version": 1, "partitions": [
        {"topic": "audit", "partition": 0, "replicas": [1, 9]}]})
    plan_path = tmp_path / "bad.json"
    plan_path.write_text(text)
    code, _, err = run("reassign", "execute", "--coordinator", registered,
                       "--reassignment-json-file", str(plan_path))
    assert (code, err) == (1, "partctl: error: partition audit-0 names unknown brokers [9]\n")
    # a job validates with the same function and records the same problem line, under the
    # plan's heading and with no exception type in front
    with coordinator.connect(registered) as session, pytest.raises(PlanError) as info:
        validate_plan(MetadataClient(session), text)
    assert tasks.one_line(info.value) == ("invalid reassignment plan: partition audit-0 names "
                                          "unknown brokers [9]")


# --- one metadata client per execution -------------------------------------------------------


def test_a_dry_run_job_reads_through_one_metadata_client(registered: str, db: str,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    job = jobs.add_job(db, kind="rebalance", schedule=jobs.make_schedule(every="1h"),
                       arguments={"coordinator": registered, "dry_run": True})
    made = Constructions(monkeypatch).made
    assert jobs.run_job_now(db, job.id).outcome in (RunOutcome.DRY_RUN, RunOutcome.NOTHING_TO_DO)
    assert len(made) == 1


def test_reassign_verify_reads_through_one_metadata_client(registered: str, tmp_path: Path,
                                                           monkeypatch: pytest.MonkeyPatch
                                                           ) -> None:
    plan_path = tmp_path / "done.json"  # already where it is heading: verify removes throttles
    plan_path.write_text(json.dumps({"version": 1, "partitions": [
        {"topic": "audit", "partition": 0, "replicas": [1, 2]}]}))
    made = Constructions(monkeypatch).made
    code, _, err = run("reassign", "verify", "--coordinator", registered,
                       "--reassignment-json-file", str(plan_path))
    assert code == 0, err
    assert len(made) == 1


def test_an_execution_and_a_job_run_each_use_one_metadata_client(
        db: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    c = Cluster((1, 2, 3, 4))
    try:
        c.create("t", {0: [1, 2], 1: [1, 2], 2: [1, 3], 3: [2, 3]})
        plan_path = tmp_path / "plan.json"
        plan_path.write_text(json.dumps({"version": 1, "partitions": [
            {"topic": "t", "partition": 0, "replicas": [3, 4]}]}))
        made = Constructions(monkeypatch).made
        code, out, err = run("reassign", "execute", "--coordinator", c.url,
                             "--reassignment-json-file", str(plan_path), "--timeout", "30",
                             "--poll-interval", "0.05", "--throttle", "1MB/s")
        assert code == 0, (out, err)
        assert len(made) == 1, "reassign execute"
        made.clear()
        job = jobs.add_job(db, kind="rebalance", schedule=jobs.make_schedule(every="1h"),
                           arguments={"coordinator": c.url, "poll_interval": 0.05,
                                      "timeout": 30})
        summary = jobs.run_job_now(db, job.id)
        assert summary.outcome is RunOutcome.SUCCEEDED, summary
        assert len(made) == 1, "rebalance job"
        made.clear()
        job = jobs.add_job(db, kind="preferred-election",
                           schedule=jobs.make_schedule(every="1h"),
                           arguments={"coordinator": c.url})
        jobs.run_job_now(db, job.id)
        assert len(made) == 1, "preferred election job"
    finally:
        c.close()
