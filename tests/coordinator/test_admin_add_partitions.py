"""Admin.add_partitions with an explicit assignment of the added partitions (what
CreatePartitions' assignments carry), on memory, ZooKeeper and etcd: written as given, and
every bad assignment refused with nothing written."""

from __future__ import annotations

import pytest

from coordinator.admin import Admin, InvalidRequest
from coordinator.codecs import BrokerInfo
from coordinator.metadata import MetadataClient
from tests.contract.conftest import Harness, backend  # noqa: F401 - a fixture, found here


@pytest.fixture
def admin(backend: Harness) -> Admin:  # noqa: F811 - the fixture above
    client = backend.connect()
    md = MetadataClient(client)
    for b in (1, 2, 3):
        md.register_broker(BrokerInfo(id=b, host="127.0.0.1", port=9000 + b))
    admin = Admin(client)
    admin.create_topic("t", assignment={0: [1, 2], 1: [2, 3]})
    return admin


def test_added_partitions_are_placed_as_given(admin: Admin) -> None:
    grown = admin.add_partitions("t", 4, assignment={2: [3, 1], 3: [1, 3]})
    stored = admin.metadata.assignments(["t"])["t"].value
    assert stored.partitions == grown.partitions == {0: (1, 2), 1: (2, 3), 2: (3, 1), 3: (1, 3)}
    assert stored.topic_id is not None and stored.topic_id == grown.topic_id


@pytest.mark.parametrize(("assignment", "message"), [
    ({2: [3, 1]}, "by 2 but 1 assignment"),
    ({2: [3, 1], 4: [1, 2]}, "expected 2..3"),
    ({2: [3, 1], 3: []}, "partition 3 has no replicas"),
    ({2: [3, 3], 3: [1, 2]}, "names a broker twice"),
    ({2: [3, 1], 3: [1, 9]}, r"unknown broker\(s\) in the assignment of partition 3: \[9\]"),
    ({2: [3, 1], 3: [1]}, "partition 3 has 1 replicas where the topic's partition 0 has 2"),
])
def test_a_bad_assignment_is_refused_and_nothing_written(
        admin: Admin, assignment: dict[int, list[int]], message: str) -> None:
    with pytest.raises(InvalidRequest, match=message):
        admin.add_partitions("t", 4, assignment=assignment)
    assert sorted(admin.metadata.assignments(["t"])["t"].value.partitions) == [0, 1]
