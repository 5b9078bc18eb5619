"""The data plane's APIs under Kafka's authorizer, on three SASL broker processes:
WriteTxnMarkers needs ClusterAction on the cluster (CLUSTER_AUTHORIZATION_FAILED for every
partition otherwise, nothing appended), DescribeProducers needs Read on the topic."""

from __future__ import annotations

from kio.schema.describe_producers.v0 import request as dp
from kio.schema.errors import ErrorCode
from kio.schema.write_txn_markers.v1 import request as wtm

from tests.broker.security import test_security_acls as acls
from tests.broker.security.test_security_acls import AclCluster, _call_each, _topic

cluster = acls.cluster
"""The ACL tests' cluster fixture (SASL/SCRAM, the authorizer, super users broker and admin)."""

PID = 8800


def marker(topic: str) -> wtm.WriteTxnMarkersRequest:
    return wtm.WriteTxnMarkersRequest(markers=(wtm.WritableTxnMarker(
        producer_id=PID, producer_epoch=0, transaction_result=False, coordinator_epoch=3,
        topics=(wtm.WritableTxnMarkerTopic(name=topic, partition_indexes=(0,)),)),))


def describe(topic: str) -> dp.DescribeProducersRequest:
    return dp.DescribeProducersRequest(topics=(dp.TopicRequest(name=topic,
                                                               partition_indexes=(0,)),))


def codes(answers: list) -> list[ErrorCode]:
    return [p.error_code for a in answers for m in a.markers for t in m.topics
            for p in t.partitions]


def producer_ids(answers: list) -> list[list[int]]:
    return [[s.producer_id for s in p.active_producers] for a in answers for t in a.topics
            for p in t.partitions if p.error_code == ErrorCode.none]


def test_markers_need_cluster_action_and_producers_need_read(cluster: AclCluster) -> None:
    topic = _topic(cluster, "txn")
    refused = _call_each(cluster, "bob", marker(topic))
    assert codes(refused) == [ErrorCode.cluster_authorization_failed] * 3
    described = _call_each(cluster, "bob", describe(topic))
    assert [p.error_code for a in described for t in a.topics for p in t.partitions] == [
        ErrorCode.topic_authorization_failed] * 3
    assert producer_ids(_call_each(cluster, "admin", describe(topic))) == [[]]  # nothing written
    written = codes(_call_each(cluster, "admin", marker(topic)))
    assert sorted(written) == sorted([ErrorCode.none, ErrorCode.unknown_topic_or_partition,
                                      ErrorCode.unknown_topic_or_partition])
    assert producer_ids(_call_each(cluster, "admin", describe(topic))) == [[PID]]
