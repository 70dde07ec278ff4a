# A bounced broker (issue 17, design step 9): a broker that registers again, under a new broker
# epoch (its znode's czxid), before the controller has seen its registration go. Kafka 3.8's
# ZooKeeper-mode controller (BrokerChange: bouncedBrokerIds by epoch) handles it as a failure
# followed by a start-up: its partitions get other leaders and it leaves every ISR, since the
# restarted broker may have lost what it had. The controller runs in-process on a real
# Membership (the broker's live set with epochs) on a real ZooKeeper; brokers 1-3 are
# simulated registrations (test_controller.py).
from __future__ import annotations

import asyncio

from kafkalite.clock import SystemClock
from kafkalite.cluster import admin_zk, zkdata
from kafkalite.cluster.controller import Controller
from kafkalite.cluster.membership import Membership
from tests.cluster.test_controller import (SESSION_MS, active, cluster, eventually,  # noqa: F401
                                           register, wait_states)

ASSIGNMENT = {0: [1, 2, 3], 1: [2, 3, 1], 2: [3, 1, 2]}


async def test_a_broker_back_under_a_new_epoch_is_failed_and_restarted(cluster, tmp_path):
    membership = Membership(cluster.connect, 9, SystemClock(), SESSION_MS)
    await membership.join(str(tmp_path))
    await membership.register([zkdata.Endpoint("PLAINTEXT", "127.0.0.1", 19009)],
                              {"PLAINTEXT": "PLAINTEXT"})
    ctl = Controller(membership.client, 9, live=membership)
    try:
        brokers = {b: await cluster.broker(b) for b in (1, 2, 3)}
        await ctl.start()
        assert await eventually(lambda: active(ctl), bool)
        await admin_zk.create_topic(cluster.admin, "t", 3, 3, assignment=ASSIGNMENT)
        before = await wait_states(cluster.admin, "t", lambda s: len(s) == 3)
        old_epoch = membership.members[1].epoch

        # The controller is kept busy while broker 1 restarts: it sees the result only.
        gate = asyncio.Event()
        busy = asyncio.ensure_future(ctl.submit(gate.wait))
        await brokers[1].close()
        cluster.sessions.append(await register(cluster.connect, 1))
        await eventually(lambda: asyncio.sleep(0, membership.members.get(1)),
                         lambda m: m is not None and m.epoch != old_epoch)
        gate.set()
        await busy

        got = await wait_states(cluster.admin, "t", lambda s: all(
            1 not in st.isr for st, _ in s.values()))
        assert got[0][0].leader == 2  # the next in-sync replica in assignment order
        assert {p: got[p][0].leader for p in (1, 2)} == {1: 2, 2: 3}
        for p, (state, _) in got.items():
            assert state.leader_epoch == before[p][0].leader_epoch + 1
        assert ctl.epochs[1] == membership.members[1].epoch
    finally:
        await ctl.stop()
        await membership.close()
