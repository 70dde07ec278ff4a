# Topic config changes across a ZooKeeper-coordinated cluster (issue 17), as Kafka's
# ZooKeeper mode propagates them: AlterConfigs / IncrementalAlterConfigs on any broker write
# the topic's override set to /config/topics/<t> and announce it with
# /config/changes/config_change_<seq>; every broker follows the notifications and applies the
# configs to its local log, so DescribeConfigs on every broker shows them. Dynamic broker
# configs go the same way through /config/brokers/<default> and /config/brokers/<id>. A
# 2-broker Apache Kafka 3.8.0 in ZooKeeper mode and a 2-broker kafkalite cluster run the same
# steps: same znodes, same answers. Old notifications are purged after 15 minutes on the
# broker's (here fake) clock.
from __future__ import annotations

import json
import time

from kafkalite.broker.broker import Broker
from kafkalite.clock import FakeClock
from kafkalite.cluster import zkdata
from kafkalite.cluster.config_changes import CHANGE_EXPIRATION_MS, ConfigChanges
from kafkalite.cluster.zk import ZkClient
from kafkalite.config import BrokerConfig
from kafkalite.wire.errors import ErrorCode
from tests.cluster.test_membership import (WAIT_S, Zk, brokers, connect, registered,  # noqa: F401
                                           zk)
from tests.cluster.test_zk_admin_apis import controller_id, create, local_configs
from tests.cluster.test_zk_admin_apis_vs_kafka import (kafka_cluster,  # noqa: F401
                                                      kafkalite_cluster)
from tests.helpers import kconfigs as kc
from tests.helpers import zookeeper as zkh
from tests.helpers.real_kafka import eventually

TOPIC_CONFIG_SOURCE = 1  # DescribeConfigs' TOPIC_CONFIG
DYNAMIC_DEFAULT_SOURCE = 3  # DYNAMIC_DEFAULT_BROKER_CONFIG


def described(bootstrap: str, topic: str, key: str) -> tuple | None:
    """(value, source) of one topic config on that broker (None: not answered)."""
    code, _, entries = kc.describe(bootstrap, kc.TOPIC, topic, [key])
    if code != 0 or key not in entries:
        return None
    return entries[key][0], entries[key][2]


def broker_described(bootstrap: str, node: int, key: str) -> tuple | None:
    """(value, source) of one config of BROKER resource `node`, asked from that broker."""
    code, _, entries = kc.describe(bootstrap, kc.BROKER, str(node), [key])
    if code != 0 or key not in entries:
        return None
    return entries[key][0], entries[key][2]


def notifications(z: Zk) -> list[bytes]:
    names = sorted(z.client.get_children(zkdata.CONFIG_CHANGES))
    return [z.client.get(f"{zkdata.CONFIG_CHANGES}/{n}")[0] for n in names]


def test_a_change_on_one_broker_reaches_every_broker(brokers, zk):
    procs = dict(zip((1, 2, 3), brokers(1, 2, 3)))
    z = zk()
    registered(z, {1, 2, 3})
    cid = eventually(lambda: controller_id(z), lambda c: c in procs, timeout=WAIT_S)
    assert create(procs[cid].bootstrap, "cfg", partitions=1, rf=3).error_code == 0
    for p in procs.values():  # every broker holds a replica: its local log exists
        eventually(lambda: described(p.bootstrap, "cfg", "retention.ms"),
                   lambda d: d is not None, timeout=WAIT_S)

    assert kc.alter(procs[1].bootstrap, kc.TOPIC, "cfg", {"retention.ms": "1234"}) == (0, None)
    assert zkdata.decode_topic_config(z.client.get(zkdata.topic_config_path("cfg"))[0]) == \
        {"retention.ms": "1234"}
    assert notifications(z) == [b'{"version":2,"entity_path":"topics/cfg"}']
    assert described(procs[1].bootstrap, "cfg", "retention.ms") == ("1234", TOPIC_CONFIG_SOURCE)
    for p in procs.values():
        assert eventually(lambda: described(p.bootstrap, "cfg", "retention.ms"),
                          lambda d: d == ("1234", TOPIC_CONFIG_SOURCE), timeout=WAIT_S) == \
            ("1234", TOPIC_CONFIG_SOURCE)

    # incremental on another broker builds on ZooKeeper's set, not on its local one
    assert kc.alter_incremental(procs[3].bootstrap, kc.TOPIC, "cfg", [
        ("cleanup.policy", kc.SET, "compact")]) == (0, None)
    want = {"retention.ms": "1234", "cleanup.policy": "compact"}
    assert zkdata.decode_topic_config(z.client.get(zkdata.topic_config_path("cfg"))[0]) == want
    assert len(notifications(z)) == 2
    for p in procs.values():
        assert eventually(lambda: local_configs(p, "cfg"), lambda c: c == want,
                          timeout=WAIT_S) == want  # applied to (and stored with) the log
        assert described(p.bootstrap, "cfg", "cleanup.policy") == ("compact",
                                                                   TOPIC_CONFIG_SOURCE)

    # the cluster's dynamic broker defaults, set on one broker, reach every broker
    assert kc.alter(procs[2].bootstrap, kc.BROKER, "", {"log.retention.ms": "7200000"}) == \
        (0, None)
    for n, p in procs.items():
        assert eventually(lambda: broker_described(p.bootstrap, n, "log.retention.ms"),
                          lambda d: d == ("7200000", DYNAMIC_DEFAULT_SOURCE),
                          timeout=WAIT_S) == ("7200000", DYNAMIC_DEFAULT_SOURCE)

    # a restarted broker reads what changed while it was down
    procs[2].stop()
    assert kc.alter(procs[1].bootstrap, kc.TOPIC, "cfg", {"retention.ms": "99"}) == (0, None)
    procs[2].start()
    assert eventually(lambda: described(procs[2].bootstrap, "cfg", "retention.ms"),
                      lambda d: d == ("99", TOPIC_CONFIG_SOURCE), timeout=WAIT_S) == \
        ("99", TOPIC_CONFIG_SOURCE)
    assert kc.alter(procs[1].bootstrap, kc.TOPIC, "nope", {"retention.ms": "1"})[0] == \
        ErrorCode.unknown_topic_or_partition


def scenario(connect: str, bootstraps: dict[int, str]) -> list:
    """What each step wrote to ZooKeeper and what the brokers answer."""
    z = Zk(connect)
    try:
        ids = sorted(bootstraps)
        cid = eventually(lambda: controller_id(z), lambda c: c in bootstraps, timeout=WAIT_S)
        first, other = bootstraps[ids[0]], bootstraps[ids[1]]
        out: list = [create(bootstraps[cid], "t", partitions=2, rf=2).error_code]
        for b in bootstraps.values():
            eventually(lambda: described(b, "t", "retention.ms"), lambda d: d is not None,
                       timeout=WAIT_S)
        out.append(kc.alter(first, kc.TOPIC, "t", {"retention.ms": "1234"}))
        out.append(z.client.get(zkdata.topic_config_path("t"))[0])
        out.append(notifications(z))
        out.append(eventually(lambda: described(other, "t", "retention.ms"),
                              lambda d: d is not None and d[0] == "1234", timeout=WAIT_S))
        out.append(kc.alter_incremental(other, kc.TOPIC, "t", [
            ("cleanup.policy", kc.SET, "compact"), ("retention.ms", kc.DELETE, None)]))
        out.append(json.loads(z.client.get(zkdata.topic_config_path("t"))[0]))
        out.append(len(notifications(z)))
        out.append(eventually(lambda: described(first, "t", "cleanup.policy"),
                              lambda d: d is not None and d[0] == "compact", timeout=WAIT_S))
        out.append(eventually(lambda: described(first, "t", "retention.ms"),
                              lambda d: d is not None and d[1] != TOPIC_CONFIG_SOURCE,
                              timeout=WAIT_S))
        # validate_only writes nothing; a missing topic is named before a bad config
        out.append(kc.alter(other, kc.TOPIC, "t", {"retention.ms": "5"}, validate_only=True))
        out.append(len(notifications(z)))
        out.append(kc.alter(first, kc.TOPIC, "missing", {"retention.ms": "x"})[0])
        out.append(kc.alter(first, kc.TOPIC, "t", {"retention.ms": "x"})[0])
        # dynamic broker configs: the cluster's defaults reach every broker
        out.append(kc.alter(first, kc.BROKER, "", {"log.retention.ms": "7200000"}))
        out.append(z.client.get(zkdata.entity_config_path("brokers", "<default>"))[0])
        out.append(notifications(z)[-1])
        out.append(eventually(lambda: broker_described(other, ids[1], "log.retention.ms"),
                              lambda d: d is not None and d[0] == "7200000", timeout=WAIT_S))
        out.append(eventually(lambda: described(other, "t", "retention.ms"),
                              lambda d: d is not None and d[0] == "7200000", timeout=WAIT_S))
        out.append(kc.alter_incremental(other, kc.BROKER, str(ids[1]), [
            ("message.max.bytes", kc.SET, "2000000")]))
        out.append(z.client.get(zkdata.entity_config_path("brokers", str(ids[1])))[0])
        out.append(notifications(z)[-1])
        # Kafka applies its own change when its notification comes back: wait for it
        out.append(eventually(lambda: broker_described(other, ids[1], "message.max.bytes"),
                              lambda d: d is not None and d[0] == "2000000", timeout=WAIT_S))
        out.append(kc.alter(first, kc.BROKER, str(ids[1]), {"message.max.bytes": "1"})[0])
        # a topic with a replica on one broker only: the other answers from ZooKeeper
        out.append(create(bootstraps[cid], "solo", partitions=1, rf=1).error_code)
        out.append(kc.alter(first, kc.TOPIC, "solo", {"retention.ms": "777"}))
        out.append([eventually(lambda: described(b, "solo", "retention.ms"),
                               lambda d: d == ("777", TOPIC_CONFIG_SOURCE), timeout=WAIT_S)
                    for b in (first, other)])
        return out
    finally:
        z.close()


def test_znodes_and_answers_match_kafka_in_zookeeper_mode(kafka_cluster, kafkalite_cluster):
    expected = scenario(*kafka_cluster)
    assert scenario(*kafkalite_cluster) == expected


async def test_notifications_older_than_15_minutes_are_purged_on_the_brokers_clock(
        zookeeper, tmp_path):
    connect_ = zkh.chroot_connect(zookeeper)
    client = ZkClient(connect_, 6000)
    await client.start()
    clock = FakeClock(wall_start_ms=int(time.time() * 1000))
    broker = Broker(BrokerConfig({"log.dirs": str(tmp_path), "node.id": "1"}), clock=clock)
    broker.open()
    follower = ConfigChanges(broker, client, clock)
    try:
        await client.ensure_persistent_paths()
        for _ in range(2):
            await client.create(f"{zkdata.CONFIG_CHANGES}/{zkdata.CONFIG_CHANGE_PREFIX}",
                                zkdata.encode_config_change("topics/x"), sequence=True)
        await follower.refresh()
        assert len(await client.children(zkdata.CONFIG_CHANGES)) == 2
        assert follower.last_seq == 1
        clock.step_wall(CHANGE_EXPIRATION_MS - 60_000)  # not yet 15 minutes old
        await follower.refresh()
        assert len(await client.children(zkdata.CONFIG_CHANGES)) == 2
        clock.step_wall(120_000)
        await follower.refresh()
        assert await client.children(zkdata.CONFIG_CHANGES) == []
    finally:
        broker.close()
        await client.close()
