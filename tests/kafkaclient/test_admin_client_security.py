"""kafkaclient.admin.AdminClient over SASL_SSL with SCRAM-SHA-512, configured by a Kafka
client properties file (``--command-config``), against three partctl broker processes whose
only listener is SASL_SSL, with Kafka's ACL authorizer (``admin`` a super user, ``alice``
without ACLs): the Admin API works as ``admin``; a wrong password and a missing ALTER on the
cluster are each one line, with no password in it."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

import coordinator
from coordinator.admin import Admin
from coordinator.codecs import TopicPartition
from kafkaclient.admin import AdminClient, AdminError
from tests.broker.processes import BrokerProcess, coordinator_settings, start_broker
from tests.broker.security_fixtures import (
    client_properties,
    listener_ports,
    sasl_ssl_acl_settings,
    scram_users,
)
from tests.broker.tls_material import Material, make_material
from tests.servers import Server
from tests.waiting import wait_until

pytestmark = pytest.mark.servers


@dataclass
class Secure:
    brokers: list[BrokerProcess]
    material: Material
    secrets: dict[str, str]
    url: str
    directory: Path

    @property
    def bootstrap(self) -> str:
        return ",".join(f"127.0.0.1:{listener_ports(b)['SASL_SSL']}" for b in self.brokers)

    def properties(self, user: str, password: str) -> str:
        return client_properties(self.directory, self.material, user, password)


@pytest.fixture(scope="module")
def secure(zookeeper_server: Server, tmp_path_factory: pytest.TempPathFactory
           ) -> Iterator[Secure]:
    directory: Path = tmp_path_factory.mktemp("admin-client-secure")
    material = make_material(directory / "tls")
    settings = coordinator_settings(zookeeper_server)
    secrets, _ = scram_users(settings[1], directory, ("admin", "alice"))
    extra = sasl_ssl_acl_settings(material, secrets["admin"])
    brokers: list[BrokerProcess] = []
    try:
        for broker_id in (1, 2, 3):
            brokers.append(start_broker(directory / f"b{broker_id}", zookeeper_server,
                                        broker_id=broker_id, settings=settings, extra=extra))
        yield Secure(brokers, material, secrets, settings[1], directory)
    finally:
        for broker in brokers:
            broker.stop()
    for broker in brokers:
        for password in secrets.values():
            assert password not in broker.log()


def test_the_admin_api_over_sasl_ssl_from_a_client_properties_file(secure: Secure) -> None:
    name = f"s-{uuid.uuid4().hex[:8]}"
    client = coordinator.connect(secure.url, timeout=10)
    try:
        Admin(client).create_topic(name, assignment={0: [1, 2]})
    finally:
        client.close()
    path = secure.properties("admin", secure.secrets["admin"])
    with AdminClient.from_command_config(secure.bootstrap, path, timeout=30) as admin:
        assert secure.secrets["admin"] not in repr(admin)
        assert "SASL_SSL" in repr(admin)
        assert [b.id for b in admin.describe_cluster().brokers] == [1, 2, 3]
        wait_until(lambda: name in admin.topics([name]) and all(
            p.leader >= 0 for p in admin.topics([name])[name].partitions), timeout=60,
            interval=0.1, message="the topic's leader")
        assert set(admin.log_dirs()) == {1, 2, 3}
        tp = TopicPartition(name, 0)
        assert admin.alter_reassignments({tp: [2, 3]}) == {tp: None}
        wait_until(lambda: not admin.list_reassignments([tp]) and admin.topics(
            [name])[name].partitions[0].replicas == (2, 3), timeout=60, interval=0.1,
            message="the move to finish")


def test_a_wrong_password_is_one_line_without_the_password(secure: Secure) -> None:
    wrong = f"wrong-{uuid.uuid4().hex}"
    path = secure.properties("alice", wrong)
    with AdminClient.from_command_config(secure.bootstrap, path, timeout=30) as admin, \
            pytest.raises(AdminError) as raised:
        admin.describe_cluster()
    message = str(raised.value)
    assert message.startswith("SCRAM-SHA-512 authentication as 'alice' failed"), message
    assert wrong not in message and "\n" not in message


def test_a_principal_without_alter_on_the_cluster_is_told_so(secure: Secure) -> None:
    path = secure.properties("alice", secure.secrets["alice"])
    with AdminClient.from_command_config(secure.bootstrap, path, timeout=30) as admin:
        with pytest.raises(AdminError) as raised:
            admin.alter_reassignments({TopicPartition("any", 0): [1, 2]})
        assert str(raised.value) == (
            "not authorized: CLUSTER_AUTHORIZATION_FAILED on AlterPartitionReassignments "
            "(the principal needs ALTER on the cluster)")
        assert raised.value.code == "CLUSTER_AUTHORIZATION_FAILED"
        with pytest.raises(AdminError, match="^not authorized: CLUSTER_AUTHORIZATION_FAILED "
                                             "on DescribeLogDirs"):
            admin.log_dirs([1])
