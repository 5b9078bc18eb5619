"""The API table of docs/kafka-compatibility.md is what partctl's registry and Kafka's own
``ApiKeys`` say today: a served version added, or a Kafka version moved to, without the page
following, fails here (``python -m tests.kafka.api_table`` writes it anew)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.kafka.api_table import BEGIN, DOC, END, kafka_apis, partctl_apis, render
from tests.kafka.conftest import require_kafka
from tests.kafka.harness import KAFKA_3, KAFKA_4

pytestmark = pytest.mark.processes  # javac, then each version's java


def test_the_api_table_in_the_docs_is_what_partctl_and_kafka_serve(tmp_path: Path) -> None:
    require_kafka(KAFKA_3)
    require_kafka(KAFKA_4)
    kafka3, kafka4 = kafka_apis(KAFKA_3, tmp_path), kafka_apis(KAFKA_4, tmp_path)
    assert {a[1] for a in kafka3} >= {"Produce", "LeaderAndIsr", "AlterPartition"}
    text = DOC.read_text()
    shown = text[text.index(BEGIN) + len(BEGIN):text.index(END)].strip()
    assert shown == render(kafka3, kafka4, partctl_apis()), \
        "docs/kafka-compatibility.md is stale: run `python -m tests.kafka.api_table`"
