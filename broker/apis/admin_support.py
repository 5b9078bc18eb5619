"""What the admin APIs share: running the admin path off the loop, and waiting for the
metadata cache to show an outcome.

The admin path (:class:`coordinator.admin.Admin` on the broker's coordinator session) blocks on
the coordinator, so each request does its reads and writes in one call on the loop's executor.
What Kafka then waits for in its topic purgatory (``DelayedCreatePartitions``,
``DelayedDeleteTopics``, ``DelayedElectLeader``: the broker's metadata cache showing the
leaders, or the topic gone) is a condition on the metadata cache here, checked now and each
time the purgatory is woken (every request from the controller wakes it), and given up at the
request's timeout.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
from collections.abc import Callable
from datetime import timedelta
from typing import TYPE_CHECKING, Any, TypeVar

from broker.apis.base import RequestContext

if TYPE_CHECKING:
    from broker.apis.services import LoopServices, ParkingServices

__all__ = ["ADMIN_KEY", "blocking", "controller_reply", "milliseconds", "wait_for"]

T = TypeVar("T")

ADMIN_KEY = ("admin",)
"""The purgatory key admin requests wait under (woken with every other parked request)."""


def milliseconds(value: timedelta | int) -> int:
    """A request's timeout field in milliseconds (kio gives a timedelta)."""
    if isinstance(value, timedelta):
        return int(value / timedelta(milliseconds=1))
    return int(value)


async def blocking(ctx: RequestContext[LoopServices], fn: Callable[..., T], *args: Any) -> T:
    """``fn(*args)`` on the loop's executor: coordinator reads and writes."""
    return await ctx.broker.loop.run_in_executor(None, fn, *args)


def wait_for(ctx: RequestContext[ParkingServices], timeout_ms: int, ready: Callable[[], bool]
             ) -> asyncio.Future[bool]:
    """A future that is True as soon as ``ready()`` holds, or what ``ready()`` says at the
    timeout (False: timed out). Call on the loop."""
    answer: asyncio.Future[bool] = ctx.broker.loop.create_future()
    if ready():
        answer.set_result(True)
        return answer

    def complete() -> None:
        if not answer.done():
            answer.set_result(ready())

    ctx.broker.purgatory.park(ADMIN_KEY, max(timeout_ms, 0) / 1000,
                              lambda: answer.done() or ready(), complete)
    return answer


async def controller_reply(reply: concurrent.futures.Future[T]) -> T:
    """Wait for a reply the controller's event thread completes. A wait cancelled (its
    client hung up) leaves the reply alone: cancelling it would make the controller's
    ``set_result`` raise on its thread, and the controller resign."""
    waiting = asyncio.wrap_future(reply)
    # nobody may be left to read it: read it here, so asyncio does not log it as lost
    waiting.add_done_callback(lambda f: f.cancelled() or f.exception())
    return await asyncio.shield(waiting)
