"""Every command of the CLI, discovered from its argparse parser, under ``--help``, with no
arguments, and with generic bad values: each ends with its exit status, one ``partctl: error:``
line (or argparse's usage and error) and never a traceback.

A new command or option is walked without touching this file. An option that needs a valid value
for the command to get as far as the bad one (a required option) takes it from ``valid_value``;
a new kind of required option fails here until that function knows it.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

import coordinator
from broker.cluster import LaunchedBroker
from coordinator.admin import Admin
from coordinator.codecs import BrokerInfo
from coordinator.metadata import MetadataClient
from partctl.cli import build_parser, main
from tests.broker.processes import create_topic, start_broker
from tests.cli.memory_cluster import Cluster
from tests.servers import Server, free_port

pytestmark = pytest.mark.servers  # its context asks for ZooKeeper by name, and a broker process

REPO = Path(__file__).resolve().parents[2]


# --- discovery ---------------------------------------------------------------------------------


def leaf_commands(parser: argparse.ArgumentParser, path: tuple[str, ...] = ()
                  ) -> Iterator[tuple[tuple[str, ...], argparse.ArgumentParser]]:
    """Every runnable command (a parser without sub-commands), by its words."""
    subs = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    if not subs:
        yield path, parser
        return
    seen: set[int] = set()
    for action in subs:
        for name, sub in action.choices.items():
            if id(sub) not in seen:  # aliases share a parser
                seen.add(id(sub))
                yield from leaf_commands(sub, (*path, name))


COMMANDS = dict(leaf_commands(build_parser()))


def options(parser: argparse.ArgumentParser) -> list[argparse.Action]:
    return [a for a in parser._actions if not isinstance(a, argparse._HelpAction)]


def flag(action: argparse.Action) -> str:
    return max(action.option_strings, key=len)


# --- the context every command runs in ---------------------------------------------------------


class WalkBroker:
    """A broker process on the session's ZooKeeper with a topic ``t`` of 3 partitions, for the
    commands that speak Kafka's protocol to brokers (``groups``); started when first asked
    for. Without a ZooKeeper server those commands' cases skip."""

    def __init__(self, server: Server | None, root: Path) -> None:
        self.server = server
        self.root = root
        self.broker: LaunchedBroker | None = None

    def url(self) -> str:
        if self.server is None:
            pytest.skip("the groups commands need a broker process, on a ZooKeeper server")
        if self.broker is None:
            self.broker = start_broker(self.root, self.server)
            create_topic(self.broker, "t", 3)
        return self.broker.coordinator_url

    def close(self) -> None:
        if self.broker is not None:
            assert self.broker.stop() == 0, self.broker.log()[-3000:]


@dataclass
class Context:
    cluster: Cluster
    broker: WalkBroker
    tmp: Path
    db: str
    silent: str
    """host:port of a listener that accepts connections and never answers."""
    refused_port: int
    """A port nothing listens on."""
    plan: Path
    """A valid plan that moves nothing (t-0 stays on [1, 2])."""

    @property
    def env(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if k not in ("PARTCTL_COORDINATOR",
                                                                 "PARTCTL_DB")}
        return {**env, "PARTCTL_HOME": str(self.tmp / "home"), "PYTHONUNBUFFERED": "1"}


@pytest.fixture(scope="module")
def ctx(tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest
        ) -> Iterator[Context]:
    tmp = tmp_path_factory.mktemp("walk")
    try:
        server: Server | None = request.getfixturevalue("zookeeper_server")
    except pytest.skip.Exception:
        server = None
    cluster = Cluster()
    listener = socket.create_server(("127.0.0.1", 0))
    c = Context(cluster=cluster, broker=WalkBroker(server, tmp / "broker"), tmp=tmp,
                db=f"sqlite:///{tmp / 'walk.db'}",
                silent=f"127.0.0.1:{listener.getsockname()[1]}", refused_port=free_port(),
                plan=tmp / "plan.json")
    c.plan.write_text(json.dumps({"version": 1, "partitions": [
        {"topic": "t", "partition": 0, "replicas": [1, 2]}]}))
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("PARTCTL_HOME", c.env["PARTCTL_HOME"])  # never the user's own store
        for name in ("PARTCTL_COORDINATOR", "PARTCTL_DB"):
            mp.delenv(name, raising=False)
        code, _, err = run("jobs", "add", "preferred-election", "--every", "1h", "--id", "j",
                           "--coordinator", cluster.url, "--db", c.db)
        assert code == 0, err
        yield c
    listener.close()
    c.broker.close()
    cluster.close()


def valid_value(ctx: Context, path: tuple[str, ...], action: argparse.Action) -> list[str]:
    """A value that lets the command get past this (required) option."""
    dest = action.dest
    if action.option_strings and action.nargs == 0:
        return []  # a flag (one of a required group)
    if dest == "coordinator":
        return ([ctx.broker.url()] if path[0] in ("groups", "transactions")
                else [ctx.cluster.url])
    if dest == "group":
        return ["walk-group"]
    if dest == "transactional_id":
        return ["walk-txn"]
    if dest == "partition":
        return ["0"]
    if dest == "by_duration":
        return ["PT1H"]
    if dest == "topic":
        return ["fresh-" + uuid.uuid4().hex[:6]] if path[-1] == "create" else ["t"]
    if dest == "output":
        return [str(ctx.tmp / f"out-{uuid.uuid4().hex[:6]}.json")]
    if dest == "reassignment_json_file":
        return [str(ctx.plan)]
    if dest == "revision":
        return ["head"]
    if dest in ("cron", "every"):
        return ["1h"] if dest == "every" else ["0 3 * * *"]
    if dest == "job_id":
        return ["j"]
    if dest == "name" and path[0] == "users":
        return ["walk-user"]
    if dest == "mechanism":
        return ["SCRAM-SHA-512"]
    if dest == "broker_ids":  # partctl rebalance: a broker of the walk's cluster
        return ["1"]
    raise AssertionError(f"{' '.join(path)}: no valid value known for {dest}: teach valid_value")


EXCLUDES = {"snapshot": "coordinator"}
"""Options that exclude another one (``reassign generate``: a snapshot file or a cluster)."""


def baseline(ctx: Context, path: tuple[str, ...], parser: argparse.ArgumentParser,
             skip: str | None = None) -> list[str]:
    """The command with every required option (and group) given a valid value, and the
    coordinator and database of the context; ``skip`` (and what it excludes) left out."""
    argv = [*path]
    positionals: list[str] = []
    groups = [g for g in parser._mutually_exclusive_groups if g.required]
    in_groups = {id(a) for g in groups for a in g._group_actions}
    for action in options(parser):
        if action.dest in (skip, EXCLUDES.get(skip or "")):
            continue
        if not action.option_strings:
            if action.required and action.nargs is None:
                positionals += valid_value(ctx, path, action)
            continue
        if id(action) in in_groups:
            continue
        if action.required or action.dest == "coordinator":
            argv += [flag(action), *valid_value(ctx, path, action)]
        elif action.dest == "db":
            argv += ["--db", ctx.db]
    for g in groups:
        if any(a.dest == skip for a in g._group_actions):
            continue
        chosen = g._group_actions[-1]
        argv += [flag(chosen), *valid_value(ctx, path, chosen)]
    if path == ("topics", "create"):  # the count and the factor go together (or an assignment)
        for dest in ("partitions", "replication_factor"):
            if dest != skip:
                argv += [f"--{dest.replace('_', '-')}", "1"]
    if path[0] == "acls":  # a resource (and, to add, what is allowed to whom)
        if skip != "topic":
            argv += ["--topic", "t"]
        if path[-1] == "add":
            argv += ["--operation", "Read", "--allow-principal", "User:walk"]
    if path == ("transactions", "abort") and skip != "start_offset":  # which transaction
        argv += ["--start-offset", "0"]
    if path == ("transactions", "find-hanging") and skip != "topic":  # where to search
        argv += ["--topic", "t"]
    if path == ("topics", "alter-config") and skip != "set":  # one change at least
        argv += ["--set", "retention.ms=1000"]
    return argv + positionals


# --- running -----------------------------------------------------------------------------------


def run(*argv: str) -> tuple[int, str, str]:
    """In-process; argparse writes to sys.stdout/sys.stderr, so both are captured too."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main(list(argv), out=out, err=err)
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else 1
    return code, out.getvalue(), err.getvalue()


RUNS_UNTIL_STOPPED = {("scheduler", "run"): "partctl scheduler: running ",
                      ("cluster", "up"): "bootstrap.servers="}
"""Commands that run in the foreground until a signal, and the line that says they started."""
SERVES_UNTIL_STOPPED = {("ui",): "partctl ui: serving "}
"""Commands that serve until SIGINT or SIGTERM, handled by the command itself from before it
says it started: run in this process (a process each costs a second), sent SIGTERM when the
line shows."""


def run_until_started(started: str, *argv: str) -> tuple[int, str, str]:
    """:func:`run`, with a thread that sends this process SIGTERM once ``started`` is out."""
    out, err = io.StringIO(), io.StringIO()
    done = threading.Event()

    def stop_when_started() -> None:
        while not done.wait(0.02):
            if started in out.getvalue():
                os.kill(os.getpid(), signal.SIGTERM)
                return

    watcher = threading.Thread(target=stop_when_started, daemon=True)
    watcher.start()
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                code = main(list(argv), out=out, err=err)
            except SystemExit as exc:
                code = exc.code if isinstance(exc.code, int) else 1
    finally:
        done.set()
        watcher.join()
    return code, out.getvalue(), err.getvalue()


def run_process(ctx: Context, *argv: str) -> tuple[int, str, str]:
    """The installed command in a process. One that runs until stopped gets SIGTERM once it
    says it runs (it accepted its arguments); its exit status then says how it stopped."""
    started = RUNS_UNTIL_STOPPED.get(tuple(argv[:2]))
    proc = subprocess.Popen([sys.executable, "-m", "partctl", *argv], cwd=REPO, env=ctx.env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        lines = []
        if started is not None:
            assert proc.stdout is not None
            for line in proc.stdout:
                lines.append(line)
                if line.startswith(started):
                    proc.send_signal(signal.SIGTERM)
                    break
        out, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    return proc.returncode, "".join(lines) + out, err


def run_any(ctx: Context, *argv: str) -> tuple[int, str, str]:
    serves = SERVES_UNTIL_STOPPED.get(tuple(argv[:1]))
    if serves is not None:
        return run_until_started(serves, *argv)
    return run_process(ctx, *argv) if tuple(argv[:2]) in RUNS_UNTIL_STOPPED else run(*argv)


USAGE_ERROR = re.compile(r"^partctl( [\w-]+)*: error: .+$")


def check_failure(code: int, err: str, what: str, expect: tuple[str, ...] | None) -> None:
    """Exit 1 with one ``partctl: error:`` line saying one of ``expect``, or argparse's usage and
    one error line (exit 2); never a traceback, never the internal-error safety net."""
    assert "Traceback" not in err and "internal error" not in err, (what, err)
    lines = err.splitlines()
    if code == 2:
        assert lines and lines[0].startswith("usage: partctl"), (what, err)
        assert USAGE_ERROR.match(lines[-1]), (what, err)
        message = lines[-1]
    else:
        assert code == 1, (what, code, err)
        assert len(lines) == 1 and lines[0].startswith("partctl: error: "), (what, err)
        message = lines[0]
    if expect is not None:
        assert any(e in message for e in expect), (what, message, expect)


# --- cases ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Case:
    path: tuple[str, ...]
    option: str
    value: str
    expect: tuple[str, ...]
    may_succeed: bool = False

    @property
    def id(self) -> str:
        return f"{' '.join(self.path)} {self.option}={self.value}"


UNREACHABLE = "unreachable"
NEGATIVE_OK = {"seed", "shift_by"}
"""Options where a negative number is a meaningful value."""


def bad_values(path: tuple[str, ...], action: argparse.Action) -> list[Case]:
    opt = flag(action) if action.option_strings else action.dest
    out: list[Case] = []
    if action.option_strings and action.nargs == 0:
        return out  # a flag takes no value
    if action.metavar == "FILE":
        writes = action.dest in ("output", "plot")
        out.append(Case(path, opt, "<missing>",
                        ("cannot write", "No such file") if writes
                        else ("cannot read", "no such file")))
        out.append(Case(path, opt, "<dir>", ("cannot write", "directory") if writes
                        else ("cannot read", "directory")))
    elif action.dest == "coordinator":
        out += [Case(path, opt, "nosuch://x", ("unknown coordinator scheme",), True),
                Case(path, opt, "zookeeper://127.0.0.1:99999/x", ("bad port",), True),
                Case(path, opt, "zk://", ("empty host",), True),
                Case(path, opt, UNREACHABLE, ("could not connect", "could not reach"), True)]
    elif action.dest == "topic":
        # an ACL may name a topic not created yet, as Kafka's ACLs may
        out += [Case(path, opt, "<unknown-topic>", ("does not exist",),
                     path[-1] == "create" or path[0] == "acls"),
                Case(path, opt, "bad/name", ("illegal characters",))]
    elif action.dest == "job_id":
        out.append(Case(path, opt, "no-such-job", ("no-such-job",)))
    elif action.dest == "db":
        out += [Case(path, opt, "<dir>", ("neither a database URL", "exists and is not a file")),
                Case(path, opt, "<dir-url>", ("exists and is not a file",)),
                Case(path, opt, "<refused-db>", ("connection failed", "Connection refused"))]
    number = numeric(action)
    if number is not None:
        words = (opt, opt.lstrip("-").replace("-", " "))
        out.append(Case(path, opt, "-5", words, action.dest in NEGATIVE_OK))
        if number is float:
            out.append(Case(path, opt, "nan", words))
    return out


def numeric(action: argparse.Action) -> type | None:
    """int or float when the option takes a number (whatever function parses it)."""
    if action.type is None or not callable(action.type):
        return None
    try:
        value = action.type("1.5")
    except (ValueError, TypeError, argparse.ArgumentTypeError):
        try:
            value = action.type("1")
        except (ValueError, TypeError, argparse.ArgumentTypeError):
            return None
    return type(value) if type(value) in (int, float) else None


CASES = [case for path, parser in COMMANDS.items() for action in options(parser)
         for case in bad_values(path, action)]

@pytest.mark.parametrize("path", list(COMMANDS), ids=" ".join)
def test_help(path: tuple[str, ...]) -> None:
    code, out, err = run(*path, "--help")
    assert code == 0 and not err
    assert out.startswith(f"usage: partctl {' '.join(path)}")


STARTS_A_CLUSTER = {("cluster", "up")}
"""Commands that, given no arguments, start a coordinator server and three broker processes:
in the long tier here (tests/conftest.py); tests/cli/test_cli_cluster_up.py runs them every
time."""


@pytest.mark.parametrize("path", [pytest.param(p, marks=pytest.mark.long)
                                  if p in STARTS_A_CLUSTER else p for p in COMMANDS],
                         ids=" ".join)
def test_no_arguments(path: tuple[str, ...], ctx: Context) -> None:
    code, out, err = run_any(ctx, *path)
    if code == 0:
        assert not err or path in RUNS_UNTIL_STOPPED or path in SERVES_UNTIL_STOPPED, err
        assert "Traceback" not in err
    else:
        check_failure(code, err, " ".join(path), None)


def argv_for(ctx: Context, case: Case) -> list[str]:
    parser = COMMANDS[case.path]
    dest = next(a.dest for a in options(parser)
                if (flag(a) if a.option_strings else a.dest) == case.option)
    argv = baseline(ctx, case.path, parser, skip=dest)
    value = {"<dir>": str(ctx.tmp), "<dir-url>": f"sqlite:///{ctx.tmp}",
             "<missing>": str(ctx.tmp / f"missing-{uuid.uuid4().hex[:6]}" / "dir" / "file"),
             "<unknown-topic>": f"no-such-topic-{uuid.uuid4().hex[:6]}",
             "<refused-db>": f"postgresql://127.0.0.1:{ctx.refused_port}/none",
             }.get(case.value, case.value)
    extra: list[str] = []
    if value == UNREACHABLE:  # etcd for the planner's commands, ZooKeeper for the others
        value = f"{'etcd' if 'reassign' in case.path else 'zookeeper'}://{ctx.silent}"
        names = {flag(a) for a in options(parser) if a.option_strings}
        timeout = "--connect-timeout" if "--connect-timeout" in names else "--timeout"
        if timeout in names:
            extra = [timeout, "0.5"]
    if case.option.startswith("-"):
        return [*argv, f"{case.option}={value}", *extra]
    return [*argv, value, *extra]


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_bad_value(case: Case, ctx: Context) -> None:
    code, out, err = run_any(ctx, *argv_for(ctx, case))
    if code == 0 and case.may_succeed:
        assert not err, err
        return
    check_failure(code, err, case.id, case.expect)


def test_every_command_is_walked() -> None:
    names = {" ".join(p) for p in COMMANDS}
    assert {"topics create", "reassign execute", "jobs add rebalance", "scheduler run",
            "db current", "demo", "cluster up"} <= names
    kinds = {(c.path, c.value) for c in CASES}
    assert (("reassign", "verify"), "<missing>") in kinds
    assert (("topics", "describe"), UNREACHABLE) in kinds
    assert (("reassign", "execute"), "-5") in kinds
    assert (("cluster", "up"), UNREACHABLE) in kinds and (("cluster", "up"), "-5") in kinds


# --- the two ways in: the same mistake reads the same in every command --------------------------

BY_BOOTSTRAP = [path for path, parser in COMMANDS.items()
                if {"bootstrap_server", "command_config", "coordinator"}
                <= {a.dest for a in options(parser)}]
"""Every command that reaches a cluster either way: Kafka's Admin API or the coordinator."""

WAY_IN_MISTAKES = {
    "an unreadable --command-config": (
        ["--bootstrap-server", "127.0.0.1:9", "--command-config", "<missing>"],
        "cannot read --command-config file <missing>: No such file or directory"),
    "a directory for --command-config": (
        ["--bootstrap-server", "127.0.0.1:9", "--command-config", "<dir>"],
        "cannot read --command-config file <dir>: Is a directory"),
    "a bad security.protocol": (
        ["--bootstrap-server", "127.0.0.1:9", "--command-config", "<bad>"],
        "client properties <bad>: security.protocol: 'BOGUS' is not one of PLAINTEXT, SSL, "
        "SASL_PLAINTEXT, SASL_SSL"),
    "both ways": (["--bootstrap-server", "127.0.0.1:9", "--coordinator", "memory://x"],
                  "give --bootstrap-server or --coordinator, not both"),
    "neither": ([], "no cluster: pass --bootstrap-server HOST:PORT or --coordinator URL, or "
                    "set PARTCTL_COORDINATOR"),
    "--command-config alone": (["--command-config", "<good>"],
                               "--command-config goes with --bootstrap-server"),
    "a bad port": (["--bootstrap-server", "h:99999"],
                   "bootstrap server 'h:99999': the port must be a number from 1 to 65535"),
}
OWN_LINE = {(("reassign", "generate"), "neither")}
"""``reassign generate`` has a third way in, ``--snapshot FILE``, and says so."""


def test_every_command_that_reaches_a_cluster_is_compared() -> None:
    assert {("reassign", "execute"), ("reassign", "list"), ("elect", "preferred"),
            ("cluster", "snapshot"), ("rebalance", "remove-brokers"),
            ("jobs", "add", "self-heal"), ("acls", "add")} <= set(BY_BOOTSTRAP)


@pytest.mark.parametrize("mistake", list(WAY_IN_MISTAKES))
def test_the_same_mistake_reads_the_same(mistake: str, ctx: Context) -> None:
    """An unreadable or invalid --command-config, both ways in, neither, --command-config
    without --bootstrap-server, a malformed bootstrap server: one line, the same words in
    reassign, elect, cluster snapshot, rebalance, jobs add and acls."""
    bad = ctx.tmp / "bad.properties"
    bad.write_text("security.protocol=BOGUS\n")
    good = ctx.tmp / "good.properties"
    good.write_text("security.protocol=PLAINTEXT\n")
    files = {"<missing>": str(ctx.tmp / "missing" / "c.properties"), "<dir>": str(ctx.tmp),
             "<bad>": str(bad), "<good>": str(good)}
    argv, line = WAY_IN_MISTAKES[mistake]
    argv = [files.get(a, a) for a in argv]
    for placeholder, value in files.items():
        line = line.replace(placeholder, value)
    for path in BY_BOOTSTRAP:
        if (path, mistake) in OWN_LINE:
            continue
        command = baseline(ctx, path, COMMANDS[path], skip="coordinator")
        code, out, err = run(*command, *argv)
        assert (code, err) == (1, f"partctl: error: {line}\n"), (" ".join(path), err)


# --- the installed command, a representative few -------------------------------------------------


def test_the_installed_command_fails_cleanly(ctx: Context) -> None:
    deep = ctx.tmp / "deep.json"
    deep.write_text("[" * 100_000 + "]" * 100_000)
    cases = [
        (["reassign", "verify", "--coordinator", ctx.cluster.url, "--reassignment-json-file",
          str(deep)], 1, "partctl: error: not valid JSON: nested too deeply"),
        (["topics", "list", "--coordinator", f"zookeeper://{ctx.silent}", "--timeout", "0.5"],
         1, f"partctl: error: could not connect to ZooKeeper at {ctx.silent} within 0.5s"),
        (["topics", "list", "--coordinator", "zookeeper://127.0.0.1:99999"], 1,
         "partctl: error: bad port '99999' in 'zookeeper://127.0.0.1:99999'"),
        (["reassign", "generate", "--snapshot", str(ctx.tmp / "none.json"), "-o",
          str(ctx.tmp / "p.json")], 1,
         f"partctl: error: cannot read --snapshot {ctx.tmp / 'none.json'}: No such file or "
         f"directory"),
        (["topics", "list", "--timeout=-5"], 2,
         "partctl topics list: error: argument --timeout: must be more than 0 seconds, got -5"),
    ]
    for argv, status, last in cases:
        code, out, err = run_process(ctx, *argv)
        assert (code, out) == (status, ""), (argv, err)
        assert err.splitlines()[-1] == last, argv
        assert "Traceback" not in err and (status == 2 or err.count("\n") == 1), err


def test_a_closed_pipe_ends_the_command_quietly(zookeeper_server, tmp_path: Path
                                               ) -> None:  # noqa: ANN001
    """``partctl topics describe | head``: the reader is gone before partctl writes; partctl
    exits as tools killed by SIGPIPE do (status 141, nothing on stderr)."""
    url = f"zookeeper://{zookeeper_server.address}/pipe{uuid.uuid4().hex[:8]}"
    client = coordinator.connect(url)
    try:
        MetadataClient(client).register_broker(BrokerInfo(id=1, host="127.0.0.1", port=9001))
        Admin(client).create_topic("t", assignment={p: [1] for p in range(2000)})
    finally:
        client.close()
    read, write = os.pipe()
    os.close(read)  # the reader has gone (head has read its lines)
    env = {**os.environ, "PARTCTL_COORDINATOR": url}
    for argv in (["topics", "describe"], ["topics", "describe", "--topic", "t"]):
        done = subprocess.run([sys.executable, "-m", "partctl", *argv], stdout=write,
                              stderr=subprocess.PIPE, text=True, env=env, cwd=REPO, timeout=120)
        assert (done.returncode, done.stderr) == (141, ""), done.stderr
    os.close(write)


def test_an_unexpected_error_is_one_line_unless_debugging(
        ctx: Context, monkeypatch: pytest.MonkeyPatch) -> None:
    """The safety net, for bugs only: every known bad input has its own message (above)."""
    from partctl.commands import topics

    def broken(args: argparse.Namespace, out: object) -> int:
        raise KeyError("replicas")

    monkeypatch.setattr(topics, "cmd_list", broken)
    argv = ["topics", "list", "--coordinator", ctx.cluster.url]
    monkeypatch.delenv("PARTCTL_DEBUG", raising=False)
    code, out, err = run(*argv)
    assert (code, out) == (2, "")
    assert err == ("partctl: internal error: KeyError: 'replicas'; rerun with PARTCTL_DEBUG=1 "
                   "for the traceback\n")
    monkeypatch.setenv("PARTCTL_DEBUG", "1")
    with pytest.raises(KeyError):
        run(*argv)
    monkeypatch.delenv("PARTCTL_DEBUG")

    def value_error(args: argparse.Namespace, out: object) -> int:
        raise ValueError("a bug, not bad input")

    monkeypatch.setattr(topics, "cmd_list", value_error)  # ValueError is not a user error
    code, _, err = run(*argv)
    assert code == 2 and err.startswith("partctl: internal error: ValueError: a bug")


def test_a_help_reworded_for_one_command_is_that_command_s_alone() -> None:
    """``cluster up`` words --coordinator its own way (it starts a server when none is given);
    the option comes from the parent parser every command shares, and its new help showed in
    every command's --help."""
    up = run("cluster", "up", "--help")[1]
    assert "start one, see --store" in up
    for path in (("topics", "list"), ("reassign", "execute")):
        out = run(*path, "--help")[1]
        assert "start one, see --store" not in out and "$PARTCTL_COORDINATOR" in out, path
