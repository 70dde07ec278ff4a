# zk_admin.settle, the wait behind the admin answers in a ZooKeeper cluster: calls run in a
# real controller's turn (a real ZooKeeper, the test's chroot) and the wait ends at the
# request's timeout on the broker's clock, here a FakeClock moved by hand: what is unfinished
# or failed then is named (REQUEST_TIMED_OUT in the answer), the rest is not.
from __future__ import annotations

import asyncio
import time
from types import SimpleNamespace

from kafkalite.clock import FakeClock
from kafkalite.cluster.controller import Controller
from kafkalite.cluster.zk import ZkClient
from kafkalite.cluster.zk_admin import settle
from tests.helpers.zookeeper import chroot_connect


async def active_controller(connect: str) -> Controller:
    zk = ZkClient(connect, 4000)
    await zk.start()
    controller = Controller(zk, 1)
    await controller.start()
    deadline = time.monotonic() + 15
    while not controller.active and time.monotonic() < deadline:
        await asyncio.sleep(0.02)
    assert controller.active
    return controller


async def test_settle_names_the_calls_unfinished_at_the_timeout_of_the_brokers_clock(zookeeper):
    controller = await active_controller(chroot_connect(zookeeper))
    clock = FakeClock()
    broker = SimpleNamespace(controller=controller, clock=clock)
    release = asyncio.Event()
    ran: list[str] = []

    async def quick() -> None:
        ran.append("quick")

    async def failing() -> None:
        raise RuntimeError("no state")

    async def slow() -> None:
        await release.wait()
    try:
        wait = asyncio.ensure_future(settle(
            broker, {"quick": quick, "failing": failing, "slow": slow}, 5000))
        for _ in range(200):  # the controller runs quick and failing, then waits in slow
            if ran:
                break
            await asyncio.sleep(0.01)
        await asyncio.sleep(0.05)
        assert ran == ["quick"] and not wait.done()  # the clock has not reached the timeout
        clock.advance(4999)
        await asyncio.sleep(0.05)
        assert not wait.done()
        clock.advance(1)
        assert await asyncio.wait_for(wait, 5) == {"failing", "slow"}
        assert await settle(broker, {"x": slow}, 0) == set()  # timeout 0: no wait at all
    finally:
        release.set()
        await controller.stop()
        await controller.zk.close()
