"""The table of Kafka's APIs in docs/kafka-compatibility.md: every api key Apache Kafka 3.9.1
and 4.x know (read from their own ``ApiKeys``, by a small Java program compiled against each
version's ``kafka-clients``), the versions a Kafka broker serves, and the versions partctl's
broker serves (its registry, as ApiVersions advertises it).

``python -m tests.kafka.api_table`` writes the table into the page (between its markers);
``tests/kafka/test_api_table.py`` fails when the page is not what this makes."""

from __future__ import annotations

import subprocess
import sys
import tempfile
from pathlib import Path

from broker.apis import ApiRegistry, controller_registry, default_registry
from tests.kafka.harness import KAFKA_3, KAFKA_4, kafka_jars

__all__ = ["BEGIN", "END", "DOC", "kafka_apis", "partctl_apis", "render", "write"]

DOC = Path(__file__).resolve().parents[2] / "docs" / "kafka-compatibility.md"
BEGIN = "<!-- api-table: made by `python -m tests.kafka.api_table` -->"
END = "<!-- /api-table -->"
SOURCE = Path(__file__).resolve().parent / "java" / "ListApis.java"

Api = tuple[int, str, int, int, frozenset[str]]
"""(key, name, oldest version, latest version, listeners: ZK_BROKER, BROKER, CONTROLLER)."""

NOTES = {
    24: "transactions (issue 33)", 25: "transactions (issue 33)",
    26: "transactions (issue 33)", 27: "transactions (issue 33)",
    28: "transactions (issue 33)", 65: "transactions (issue 33)",
    66: "transactions (issue 33)", 48: "read only: quotas are not enforced",
    49: "quotas are not enforced", 57: "finalized features are KRaft's (`kafka-features`)",
    58: "forwarding to a KRaft controller",
    56: "partctl's brokers write the ISR to the store (ZooKeeper mode before 2.7); its "
        "controller answers Kafka brokers' AlterPartition",
    67: "served by partctl's controller to Kafka brokers",
}
"""Why, where partctl differs; a missing API with no note here is marked by its kind."""


def kafka_apis(version: str, workdir: Path) -> list[Api]:
    """Every api key of ``version``'s ``ApiKeys``."""
    clients = kafka_jars(version) / f"kafka-clients-{version}.jar"
    out = workdir / version
    out.mkdir(parents=True, exist_ok=True)
    subprocess.run(["javac", "-nowarn", "-cp", str(clients), "-d", str(out), str(SOURCE)],
                   check=True, capture_output=True, text=True, timeout=300)
    listed = subprocess.run(["java", "-Xmx64m", "-XX:+UseSerialGC", "-cp",
                             f"{out}:{clients}", "ListApis"],
                            check=True, capture_output=True, text=True, timeout=120)
    apis = []
    for line in listed.stdout.splitlines():
        key, name, oldest, latest, listeners = line.split("\t")
        apis.append((int(key), name, int(oldest), int(latest),
                     frozenset(listeners.split(",")) - {""}))
    return apis


def partctl_apis() -> dict[int, tuple[int, int]]:
    """(min, max) version by api key: what a broker serves, and a controller-only process."""
    served: dict[int, tuple[int, int]] = {}
    registries: tuple[ApiRegistry, ...] = (default_registry(), controller_registry())
    for registry in registries:
        for api in registry.values():
            low, high = served.get(api.key, (api.min_version, api.max_version))
            served[api.key] = (min(low, api.min_version), max(high, api.max_version))
    return served


def _cell(api: Api | None, listener: str) -> str:
    if api is None:
        return "—"
    if listener not in api[4]:
        return "controller only" if "CONTROLLER" in api[4] else "—"
    return f"{api[2]}–{api[3]}"


def render(kafka3: list[Api], kafka4: list[Api], partctl: dict[int, tuple[int, int]]) -> str:
    by3 = {a[0]: a for a in kafka3}
    by4 = {a[0]: a for a in kafka4}
    rows = ["| key | API | partctl | Kafka 3.9.1 (ZooKeeper-mode broker) | Kafka 4.4.0 (broker) "
            "| notes |", "|---|---|---|---|---|---|"]
    for key in sorted(set(by3) | set(by4)):
        api = by4.get(key) or by3[key]
        mine = partctl.get(key)
        ours = f"{mine[0]}–{mine[1]}" if mine else "—"
        note = NOTES.get(key, "")
        if not note and mine is None:
            zk = by3.get(key)
            if not ({"BROKER", "ZK_BROKER"} & api[4]):
                note = "KRaft quorum and controllers"
            elif zk is None or "ZK_BROKER" not in zk[4]:
                note = "Kafka 4.x brokers only (KRaft)"
            else:
                note = "not yet"
        rows.append(f"| {key} | {api[1]} | {ours} | {_cell(by3.get(key), 'ZK_BROKER')} "
                    f"| {_cell(by4.get(key), 'BROKER')} | {note} |")
    return "\n".join(rows)


def table() -> str:
    with tempfile.TemporaryDirectory(prefix="partctl-apis-") as tmp:
        return render(kafka_apis(KAFKA_3, Path(tmp)), kafka_apis(KAFKA_4, Path(tmp)),
                      partctl_apis())


def write(doc: Path = DOC) -> None:
    text = doc.read_text()
    start, end = text.index(BEGIN) + len(BEGIN), text.index(END)
    doc.write_text(text[:start] + "\n" + table() + "\n" + text[end:])


if __name__ == "__main__":
    write()
    print(f"wrote the API table into {DOC}", file=sys.stderr)
