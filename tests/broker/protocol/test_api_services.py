"""Each API handler is typed against kio's message types and a narrow protocol of the services
it uses (issue 30): BrokerServices satisfies every protocol, ControllerNodeServices those of the
APIs a controller-only process serves, and no registered handler takes or returns ``Any``."""

from __future__ import annotations

import dataclasses
import re

import pytest

from broker.apis import (
    BrokerServices,
    ControllerNodeServices,
    controller_registry,
    default_registry,
    messages,
    services,
)

PROTOCOLS = {name: getattr(services, name) for name in services.__all__}


def members(protocol: type) -> set[str]:
    return {name for klass in protocol.__mro__ for name, value in vars(klass).items()
            if isinstance(value, property)}


def fields(cls: type) -> set[str]:
    return {f.name for f in dataclasses.fields(cls)}


@pytest.mark.parametrize("name", sorted(PROTOCOLS))
def test_broker_services_satisfy_each_protocol(name: str) -> None:
    assert members(PROTOCOLS[name]) <= fields(BrokerServices)


def test_a_controller_node_serves_what_its_handlers_use() -> None:
    used = {api.handle.__annotations__["ctx"] for api in controller_registry().values()}
    names = {"VersionServices", "ControllerRequestServices", "AlterPartitionServices"}
    assert used == {f"RequestContext[{name}]" for name in names}
    for name in names:
        assert members(PROTOCOLS[name]) <= fields(ControllerNodeServices)


def test_every_handler_is_typed_with_its_messages_and_services() -> None:
    with open(messages.__file__) as source:
        aliases = set(re.findall(r"^    (\w+): TypeAlias", source.read(), re.M))
    for key, api in [*default_registry().items(), *controller_registry().items()]:
        hints = {name: re.sub(r"\s+", " ", hint.replace("messages.", "")).strip("()")
                 for name, hint in api.handle.__annotations__.items()}
        context = re.fullmatch(r"RequestContext\[(\w+)\]", hints["ctx"])
        assert context is not None and context.group(1) in PROTOCOLS, (api.name, hints)
        assert f"{api.name}Request" in hints["request"].split(" | "), (api.name, hints)
        assert set(hints["request"].split(" | ")) <= aliases, (api.name, hints)
        returned = re.fullmatch(r"(?:Reply\[)?(.+?)\]?", hints["return"])
        assert returned is not None
        assert f"{api.name}Response" in returned.group(1).split(" | "), (key, api.name, hints)


def _statically(broker: BrokerServices, node: ControllerNodeServices) -> None:
    """Not run: what mypy checks of the same claims."""
    _a: services.AclServices = broker
    _b: services.AlterPartitionServices = broker
    _c: services.ClusterServices = broker
    _d: services.ConfigServices = broker
    _e: services.ConsumerGroupServices = broker
    _f: services.ControllerRequestServices = broker
    _g: services.DeleteRecordsServices = broker
    _h: services.ElectionServices = broker
    _i: services.FetchServices = broker
    _j: services.GroupServices = broker
    _k: services.LogDirServices = broker
    _l: services.MetadataServices = broker
    _m: services.OffsetServices = broker
    _n: services.ProduceServices = broker
    _o: services.ProducerIdServices = broker
    _p: services.TopicServices = broker
    _q: services.VersionServices = broker
    _r: services.AdminServices = broker
    _s: services.ControllerRequestServices = node
    _t: services.VersionServices = node
    _u: services.AlterPartitionServices = node
