"""A request the controller answers (ControlledShutdown, ElectLeaders) waits for the
controller's reply, a future its event thread completes. When the client hangs up first, the
wait is cancelled, but the reply must not be: the controller completing a cancelled reply
raised InvalidStateError on its thread and resigned (the fuzzer found it: a ControlledShutdown
for an unknown broker id from a client that hung up made the controller resign)."""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
from types import SimpleNamespace
from typing import Any

import pytest

from broker.apis.controller_requests import _controlled_shutdown
from broker.apis.elections import _elect
from interbroker.errors import BrokerNotAvailable


class Controller:
    active = True

    def __init__(self) -> None:
        self.reply: concurrent.futures.Future[Any] = concurrent.futures.Future()

    def request_controlled_shutdown(self, broker_id: int, broker_epoch: int
                                    ) -> concurrent.futures.Future[Any]:
        return self.reply

    def request_leader_election(self, partitions: object, *, unclean: bool
                                ) -> concurrent.futures.Future[Any]:
        return self.reply


def _context(controller: Controller) -> SimpleNamespace:
    return SimpleNamespace(broker=SimpleNamespace(controller=lambda: controller),
                           api_version=3, authorized=lambda *args: True)


SHUTDOWN = (_controlled_shutdown, SimpleNamespace(broker_id=-1, broker_epoch=1))
ELECT = (_elect, SimpleNamespace(election_type=0, topic_partitions=(
    SimpleNamespace(topic="t", partitions=(0,)),)))


@pytest.mark.parametrize(("handler", "request_"), [SHUTDOWN, ELECT],
                         ids=["controlled-shutdown", "elect-leaders"])
def test_a_client_hanging_up_leaves_the_controllers_reply_to_the_controller(
        handler: Any, request_: Any) -> None:
    controller = Controller()

    async def hang_up() -> None:
        waiting = asyncio.ensure_future(handler(_context(controller), request_))
        await asyncio.sleep(0.01)
        waiting.cancel()  # what the server does to a connection's requests when it closes
        with contextlib.suppress(asyncio.CancelledError):
            await waiting
        assert not controller.reply.cancelled()
        # the controller's thread answers later, as it would: no InvalidStateError there
        controller.reply.set_exception(BrokerNotAvailable(-1))
        await asyncio.sleep(0.01)

    asyncio.run(hang_up())
