"""Hosts in network namespaces on one bridge, and link faults between them.

A :class:`Network` is a switch and the hosts plugged into it, all in network namespaces of their
own, so nothing here touches the machine's interfaces, addresses or routes: the switch is a
bridge (``br0``) in a namespace ``partctl<N>-sw``, each host a namespace ``partctl<N>-<name>``
with ``lo`` up and an ``eth0`` (one end of a veth pair whose other end is a port of the bridge)
holding ``10.77.<N>.<i>/24``. ``N`` is claimed by creating the switch's namespace, which fails
when another network (of this process or another) holds it, so networks running at once get
distinct numbers; their namespaces do not see each other anyway. Closing the network kills the
processes its hosts started and deletes the namespaces, which deletes every interface in them;
a network left behind by a killed test process (the bridge's alias names the owner's PID) is
removed by the next :class:`Network` created.

Link faults are ``tc`` filters on a host's ``eth0`` (a ``clsact`` qdisc with ``u32`` matches on
IP addresses), because this kernel has neither netem nor gact, and iptables/nft are not
installed. A dropped packet is redirected (``mirred``) into a ``sink`` veth pair of the host,
whose far end discards it as addressed to another machine, so the sender sees no error: a
lost packet, as in a real partition, not a refused one (a blackhole route would fail a
``connect`` at once). A delayed packet is redirected into a tap device read by a relay process
in the host, which writes it out on ``eth0`` after the delay, past the qdisc (and so past the
filters). ARP is never filtered: a cut host still resolves its neighbours' addresses. Hosts
speak IPv4 only (no IPv6 address is made on their links), so that no traffic passes beside
the filters.

What one-way loss means for TCP: :meth:`Network.drop` loses a's packets to b and nothing of
b's. A connection either way then fails: b's SYN reaches a, but a's SYN-ACK is lost; a's SYN
is lost. An established connection stalls in the direction a→b (b's data reaches a, a's
acknowledgements do not reach b, so b retransmits until its timeout). Datagrams from b to a
still arrive. A TCP client (a Kafka client, a ZooKeeper session) on either side sees a dead
link.

Every fault is a :class:`Fault` whose :meth:`~Fault.heal` removes it (again does nothing);
:meth:`Network.heal_all` heals what is left. :meth:`Network.reset` is not a lasting fault: it
aborts the TCP connections between two hosts (``ss -K``, the kernel's SOCK_DESTROY), each side
sending a RST, as a middlebox resetting connections would.

Processes run in a host with :meth:`Host.popen` / :meth:`Host.run` (``ip netns exec``) or, for
code of this process, :meth:`Host.call`: a function run in a thread that entered the host's
namespace, so that sockets it opens, threads it starts and processes it spawns (a ZooKeeper
server, a broker) are the host's. Needs root, iproute2 and a kernel with network namespaces,
veth, bridge, clsact, u32, mirred and tun: :func:`unavailable_reason` checks root, the tools
and /dev/net/tun; a kernel without one of the others fails at the first host or fault made,
with ip's or tc's own message in the :class:`NetworkError`.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import heapq
import os
import random
import re
import select
import shutil
import signal
import socket
import struct
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

__all__ = ["Fault", "Host", "Network", "NetworkError", "namespaces", "unavailable_reason"]

PREFIX = "partctl"
NETNS_DIR = Path("/run/netns")
CLONE_NEWNET = 0x40000000
SUBNET = "10.77.{n}.0/24"
DROP_PRIO = 1          # tc filter priorities: drops are matched before delays
DELAY_PRIO = 30000
T = TypeVar("T")


class NetworkError(Exception):
    """A namespace, link or filter could not be made or removed (the message says which)."""


def _ip(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    return _run(["ip", *args], check=check)


def _run(args: Sequence[str], check: bool = True) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(list(args), capture_output=True, text=True, timeout=30)
    if check and done.returncode != 0:
        raise NetworkError(f"{' '.join(args)}: {done.stderr.strip() or done.returncode}")
    return done


def namespaces() -> list[str]:
    """The names of the machine's named network namespaces (``ip netns list``)."""
    out = _ip("netns", "list").stdout
    return [line.split()[0] for line in out.splitlines() if line.strip()]


def unavailable_reason() -> str | None:
    """Why hosts in namespaces cannot be made here, or None when they can."""
    if os.geteuid() != 0:
        return "network namespaces need root"
    for tool in ("ip", "tc", "ss"):
        if shutil.which(tool) is None:
            return f"{tool} is not installed (apt-get install iproute2)"
    if not os.path.exists("/dev/net/tun"):
        return "/dev/net/tun is missing (delays need a tap device)"
    return None


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def remove_stale_networks() -> list[str]:
    """Delete the namespaces of networks whose owner process is gone; their names."""
    names = namespaces()
    removed: list[str] = []
    for switch in names:
        match = re.fullmatch(rf"{PREFIX}(\d+)-sw", switch)
        if match is None:
            continue
        shown = _ip("-n", switch, "-o", "link", "show", "br0", check=False).stdout
        owner = re.search(r"alias partctl-owner-(\d+)", shown)
        if owner is None or _pid_alive(int(owner.group(1))):
            continue   # being built right now, or alive
        for name in names:
            if name.startswith(f"{PREFIX}{match.group(1)}-"):
                _ip("netns", "del", name, check=False)
                removed.append(name)
    return removed


def _enter(namespace: str) -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    fd = os.open(NETNS_DIR / namespace, os.O_RDONLY)
    try:
        if libc.setns(fd, CLONE_NEWNET) != 0:
            err = ctypes.get_errno()
            raise NetworkError(f"setns {namespace}: {os.strerror(err)}")
    finally:
        os.close(fd)


@dataclass(eq=False)
class Host:
    """A machine on the network: a namespace with ``eth0`` at :attr:`address`."""

    network: Network
    name: str
    namespace: str
    address: str
    index: int
    processes: list[subprocess.Popen[Any]] = field(default_factory=list)
    _next_drop: int = DROP_PRIO
    _next_delay: int = DELAY_PRIO

    @property
    def prefix(self) -> list[str]:
        """The command prefix that runs a program in this host: ``ip netns exec <ns>``."""
        return ["ip", "netns", "exec", self.namespace]

    def popen(self, args: Sequence[str], **kwargs: Any) -> subprocess.Popen[Any]:
        """Start ``args`` in this host (killed when the network closes)."""
        process = subprocess.Popen([*self.prefix, *args], **kwargs)
        self.processes.append(process)
        return process

    def run(self, args: Sequence[str], **kwargs: Any) -> subprocess.CompletedProcess[Any]:
        """Run ``args`` in this host to its end (``subprocess.run``'s keywords)."""
        return subprocess.run([*self.prefix, *args], **kwargs)

    def call(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """``fn(*args, **kwargs)`` in a thread inside this host's namespace: what it opens or
        spawns belongs to the host. Returns its result or raises its exception. Processes it
        starts are the caller's to stop (:meth:`popen`'s are stopped with the network)."""
        result: list[Any] = []
        failure: list[BaseException] = []

        def inside() -> None:
            try:
                _enter(self.namespace)
                result.append(fn(*args, **kwargs))
            except BaseException as exc:  # noqa: BLE001 - handed to the caller
                failure.append(exc)

        # named after the caller's thread: a caller that does not stop is shown by what this
        # thread runs (tests.faults.workload.where_stuck)
        thread = threading.Thread(target=inside, daemon=True,
                                  name=f"{threading.current_thread().name}/in-{self.name}")
        thread.start()
        thread.join()
        if failure:
            raise failure[0]
        return result[0]

    def tc(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        return _run(["tc", "-n", self.namespace, *args], check=check)

    def _filter(self, direction: str, prio: int, match: Sequence[str], device: str) -> Rule:
        self.tc("filter", "add", "dev", "eth0", direction, "prio", str(prio), "protocol", "ip",
                "u32", *match, "action", "mirred", "egress", "redirect", "dev", device)
        return Rule(self, direction, prio)

    def drop_rule(self, direction: str, match: Sequence[str]) -> Rule:
        prio = self._next_drop
        self._next_drop += 1
        if prio >= DELAY_PRIO:
            raise NetworkError(f"{self.name}: too many drop rules")
        return self._filter(direction, prio, match, "sink")

    def delay_rule(self, match: Sequence[str], device: str) -> Rule:
        prio = self._next_delay
        self._next_delay += 1
        return self._filter("egress", prio, match, device)

    def __repr__(self) -> str:
        return f"Host({self.name}, {self.address})"


@dataclass(eq=False)
class Rule:
    host: Host
    direction: str
    prio: int

    def remove(self) -> None:
        self.host.tc("filter", "del", "dev", "eth0", self.direction, "prio", str(self.prio),
                     check=False)


@dataclass(eq=False)
class Fault:
    """One injected fault: its filters and relays, removed by :meth:`heal`."""

    network: Network
    description: str
    rules: list[Rule] = field(default_factory=list)
    relays: list[subprocess.Popen[bytes]] = field(default_factory=list)
    healed: bool = False

    def heal(self) -> None:
        """Remove the fault; healing twice does nothing more."""
        with self.network.lock:
            if self.healed:
                return
            self.healed = True
            for rule in self.rules:
                rule.remove()
            for relay in self.relays:
                _stop(relay)
            with contextlib.suppress(ValueError):
                self.network.faults.remove(self)

    def __enter__(self) -> Fault:
        return self

    def __exit__(self, *exc: object) -> None:
        self.heal()

    def __repr__(self) -> str:
        return f"Fault({self.description}{', healed' if self.healed else ''})"


def _stop(process: subprocess.Popen[Any], timeout: float = 5.0) -> None:
    if process.poll() is not None:
        return
    process.send_signal(signal.SIGTERM)
    try:
        process.wait(timeout)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait(timeout)


class Network:
    """A bridge and hosts in namespaces of their own; a context manager that removes them."""

    def __init__(self) -> None:
        reason = unavailable_reason()
        if reason is not None:
            raise NetworkError(reason)
        remove_stale_networks()
        self.hosts: dict[str, Host] = {}
        self.faults: list[Fault] = []
        self.lock = threading.RLock()
        """Held while a fault is made or healed: a scheduler may inject from several threads."""
        self.closed = False
        self.number = self._claim()
        self.switch = f"{PREFIX}{self.number}-sw"
        self.subnet = SUBNET.format(n=self.number)
        try:
            _ip("-n", self.switch, "link", "set", "lo", "up")
            _ip("-n", self.switch, "link", "add", "br0", "type", "bridge")
            _ip("-n", self.switch, "link", "set", "br0", "alias",
                f"partctl-owner-{os.getpid()}")
            _ip("-n", self.switch, "link", "set", "br0", "up")
        except BaseException:
            self.close()
            raise

    @staticmethod
    def _claim() -> int:
        for number in range(1, 255):
            if _ip("netns", "add", f"{PREFIX}{number}-sw", check=False).returncode == 0:
                return number
        raise NetworkError("no free network number (254 partctl networks exist)")

    def add_host(self, name: str) -> Host:
        """A new host on the bridge, at the next address of the subnet."""
        if not re.fullmatch(r"[a-z0-9][a-z0-9-]{0,30}", name) or name == "sw":
            raise NetworkError(f"bad host name {name!r} (lowercase letters, digits, dashes)")
        if name in self.hosts:
            raise NetworkError(f"host {name} exists")
        index = len(self.hosts) + 1
        if index > 250:
            raise NetworkError("a network holds at most 250 hosts")
        namespace = f"{PREFIX}{self.number}-{name}"
        address = f"10.77.{self.number}.{index}"
        _ip("netns", "add", namespace)
        host = Host(self, name, namespace, address, index)
        self.hosts[name] = host
        port = f"h{index}"
        _ip("-n", namespace, "link", "set", "lo", "up")
        _ip("-n", self.switch, "link", "add", port, "type", "veth", "peer", "name", "eth0",
            "netns", namespace)
        _ip("-n", self.switch, "link", "set", port, "master", "br0", "up")
        _ip("-n", namespace, "link", "add", "sink", "type", "veth", "peer", "name", "sink-far")
        # IPv4 only: the filters match IPv4, so no IPv6 link-local address may bypass them.
        for device in ("eth0", "sink", "sink-far"):
            _ip("-n", namespace, "link", "set", device, "addrgenmode", "none")
            _ip("-n", namespace, "link", "set", device, "up")
        _ip("-n", namespace, "addr", "add", f"{address}/24", "dev", "eth0")
        host.tc("qdisc", "add", "dev", "eth0", "clsact")
        return host

    def _host(self, host: Host | str) -> Host:
        if isinstance(host, str):
            if host not in self.hosts:
                raise NetworkError(f"no host {host} on this network")
            return self.hosts[host]
        if host.network is not self:
            raise NetworkError(f"{host} is not on this network")
        return host

    def _fault(self, description: str, build: Callable[[Fault], None]) -> Fault:
        with self.lock:
            if self.closed:
                raise NetworkError("the network is closed")
            fault = Fault(self, description)
            self.faults.append(fault)
            try:
                build(fault)
            except BaseException:
                fault.heal()
                raise
            return fault

    def drop(self, a: Host | str, b: Host | str) -> Fault:
        """Lose every IP packet from ``a`` to ``b`` (one way; see the module's note on TCP)."""
        src, dst = self._host(a), self._host(b)
        return self._fault(f"drop {src.name}->{dst.name}", lambda fault: fault.rules.append(
            src.drop_rule("egress", ["match", "ip", "dst", f"{dst.address}/32"])))

    def cut(self, a: Host | str, b: Host | str) -> Fault:
        """Lose every IP packet between ``a`` and ``b``, both ways."""
        x, y = self._host(a), self._host(b)

        def build(fault: Fault) -> None:
            fault.rules.append(x.drop_rule("egress", ["match", "ip", "dst", f"{y.address}/32"]))
            fault.rules.append(y.drop_rule("egress", ["match", "ip", "dst", f"{x.address}/32"]))

        return self._fault(f"cut {x.name}<->{y.name}", build)

    def isolate(self, a: Host | str) -> Fault:
        """Cut ``a`` from every other host, hosts added later included."""
        host = self._host(a)

        def build(fault: Fault) -> None:
            fault.rules.append(host.drop_rule("egress", ["match", "ip", "dst", self.subnet]))
            fault.rules.append(host.drop_rule("ingress", ["match", "ip", "src", self.subnet]))

        return self._fault(f"isolate {host.name}", build)

    def partition(self, group1: Iterable[Host | str], group2: Iterable[Host | str]) -> Fault:
        """Cut every host of ``group1`` from every host of ``group2`` (both ways); hosts in
        neither group still reach both."""
        one = [self._host(h) for h in group1]
        two = [self._host(h) for h in group2]
        if set(map(id, one)) & set(map(id, two)):
            raise NetworkError("a host cannot be on both sides of a partition")

        def build(fault: Fault) -> None:
            for x in one:
                for y in two:
                    fault.rules.append(
                        x.drop_rule("egress", ["match", "ip", "dst", f"{y.address}/32"]))
                    fault.rules.append(
                        y.drop_rule("egress", ["match", "ip", "dst", f"{x.address}/32"]))

        names = lambda hosts: ",".join(h.name for h in hosts)  # noqa: E731
        return self._fault(f"partition {names(one)} | {names(two)}", build)

    def delay(self, a: Host | str, b: Host | str, ms: float, jitter_ms: float = 0.0, *,
              both_ways: bool = False) -> Fault:
        """Hold every IP packet from ``a`` to ``b`` for ``ms`` (± ``jitter_ms``, uniform)
        milliseconds, one way unless ``both_ways`` (a slow link: ``b`` to ``a`` as well, each
        way drawn on its own). Packets leave in the order they came: jitter does not reorder
        them. A round trip a→b→a takes ``ms`` longer one way, ``2 * ms`` both ways."""
        src, dst = self._host(a), self._host(b)
        if ms < 0 or jitter_ms < 0:
            raise NetworkError("a delay and its jitter are not negative")

        def build(fault: Fault) -> None:
            self._hold(fault, src, dst, ms, jitter_ms)
            if both_ways:
                self._hold(fault, dst, src, ms, jitter_ms)

        arrow = "<->" if both_ways else "->"
        return self._fault(f"delay {src.name}{arrow}{dst.name} {ms}±{jitter_ms}ms", build)

    @staticmethod
    def _hold(fault: Fault, src: Host, dst: Host, ms: float, jitter_ms: float) -> None:
        tap = f"dly{src._next_delay - DELAY_PRIO}"
        relay = src.popen([sys.executable, str(Path(__file__).resolve()), "relay", tap,
                           str(ms), str(jitter_ms)],
                          stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE)
        src.processes.remove(relay)
        fault.relays.append(relay)
        assert relay.stdout is not None and relay.stderr is not None
        ready = relay.stdout.readline()
        if ready.strip() != b"ready":
            _stop(relay)
            raise NetworkError(f"delay relay in {src.name} did not start: "
                               f"{relay.stderr.read().decode(errors='replace').strip()}")
        fault.rules.append(src.delay_rule(["match", "ip", "dst", f"{dst.address}/32"], tap))

    def reset(self, a: Host | str, b: Host | str) -> int:
        """Abort every TCP connection between ``a`` and ``b`` (each end sends a RST): the
        number of sockets closed, counted on both sides."""
        x, y = self._host(a), self._host(b)
        closed = 0
        for here, there in ((x, y), (y, x)):
            done = here.run(["ss", "-K", "-t", "-n", "-H", "dst", there.address],
                            capture_output=True, text=True, timeout=30)
            if done.returncode != 0:
                raise NetworkError(f"ss -K in {here.name}: {done.stderr.strip()}")
            closed += sum(1 for line in done.stdout.splitlines() if line.strip())
        return closed

    def heal_all(self) -> None:
        """Heal every fault still in place."""
        for fault in list(self.faults):
            fault.heal()

    def namespaces(self) -> list[str]:
        """This network's namespaces: the switch's and the hosts'."""
        return [self.switch, *(host.namespace for host in self.hosts.values())]

    def close(self) -> None:
        """Heal, kill the hosts' processes, delete the namespaces (and so every link)."""
        with self.lock:
            if self.closed:
                return
            self.closed = True
        errors: list[str] = []
        for fault in list(self.faults):
            try:
                fault.heal()
            except Exception as exc:  # noqa: BLE001 - the namespaces go anyway
                errors.append(str(exc))
        for host in self.hosts.values():
            for process in host.processes:
                with contextlib.suppress(Exception):
                    _stop(process)
        for name in [*(h.namespace for h in self.hosts.values()), self.switch]:
            done = _ip("netns", "del", name, check=False)
            if done.returncode != 0 and (NETNS_DIR / name).exists():
                errors.append(done.stderr.strip())
        if errors:
            raise NetworkError("; ".join(errors))

    def __enter__(self) -> Network:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


# The delay relay: runs inside a host (``python net.py relay TAP MS JITTER``), reads the frames
# the filter redirects into its tap device and writes each on eth0 after its delay, bypassing
# the qdisc so that the filter does not catch it again. It exits when its stdin closes.

TUNSETIFF = 0x400454CA
IFF_TAP = 0x0002
IFF_NO_PI = 0x1000
PACKET_QDISC_BYPASS = 20
SOL_PACKET = 263


def _relay(tap: str, ms: float, jitter_ms: float) -> None:
    fd = os.open("/dev/net/tun", os.O_RDWR)
    import fcntl
    fcntl.ioctl(fd, TUNSETIFF, struct.pack("16sH", tap.encode(), IFF_TAP | IFF_NO_PI))
    subprocess.run(["ip", "link", "set", tap, "up"], check=True)
    out = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, 0)
    out.setsockopt(SOL_PACKET, PACKET_QDISC_BYPASS, 1)
    out.bind(("eth0", 0))
    sys.stdout.write("ready\n")
    sys.stdout.flush()
    queue: list[tuple[float, int, bytes]] = []
    last = 0.0
    seq = 0
    stdin = sys.stdin.fileno()
    while True:
        timeout = max(0.0, queue[0][0] - time.monotonic()) if queue else None
        readable, _, _ = select.select([fd, stdin], [], [], timeout)
        if stdin in readable and not os.read(stdin, 4096):
            return
        if fd in readable:
            frame = os.read(fd, 65536)
            hold = max(0.0, ms + random.uniform(-jitter_ms, jitter_ms)) / 1000
            last = max(last, time.monotonic() + hold)
            heapq.heappush(queue, (last, seq, frame))
            seq += 1
        now = time.monotonic()
        while queue and queue[0][0] <= now:
            _, _, frame = heapq.heappop(queue)
            try:
                out.send(frame)
            except OSError as exc:
                if exc.errno not in (errno.ENOBUFS, errno.ENETDOWN, errno.EMSGSIZE):
                    raise


if __name__ == "__main__":
    if len(sys.argv) == 5 and sys.argv[1] == "relay":
        signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
        _relay(sys.argv[2], float(sys.argv[3]), float(sys.argv[4]))
    else:
        sys.exit("usage: net.py relay TAP MS JITTER_MS (started by Network.delay)")
