# Replication of a compacted topic against the reference: the same scenario on three
# kafkalite brokers and on three Apache Kafka 3.8.0 brokers in ZooKeeper mode. A follower is
# SIGSTOPped while keys are overwritten and the leader's cleaner removes whole batches; it
# resumes, fetches batches with offset gaps, and rejoins the ISR. The follower's caught-up
# log must hold each key at the same offset as on Kafka's.
from __future__ import annotations

import glob
import os
import signal


from kafkalite.wire.errors import ErrorCode
from tests.cluster.test_membership import (WAIT_S, Zk, brokers, connect, registered,  # noqa: F401
                                           zk)
from tests.cluster.test_replication_compacted import COMPACTED, KEYS, overwrite, per_key
from tests.cluster.test_zk_admin_apis import controller_id, create, states
from tests.helpers import zookeeper as zkh
from tests.helpers.kbatch import batch_headers, decode_records
from tests.helpers.real_kafka import eventually

TOPIC = "replicated"
SETTINGS = {"replica.lag.time.max.ms": "2000", "zookeeper.session.timeout.ms": "20000",
            "log.cleaner.backoff.ms": "200", "log.cleaner.dedupe.buffer.size": "4194304"}


def log_bytes(broker) -> bytes:
    """The partition's segment files in offset order (Kafka's under logs/, ours directly)."""
    found = sorted(glob.glob(os.path.join(broker.data_dir, f"{TOPIC}-0", "*.log"))) or \
        sorted(glob.glob(os.path.join(broker.data_dir, "logs", f"{TOPIC}-0", "*.log")))
    out = b""
    for f in found:
        with open(f, "rb") as fh:
            out += fh.read()
    return out


def records(broker) -> list[tuple[int, bytes, bytes]]:
    return [(o, k, v) for o, _ts, k, v, _h in decode_records(log_bytes(broker))]


def gaps(broker) -> bool:
    """Whether offsets are missing between batches (or before the first: Kafka's cleaner
    can leave the first segment empty)."""
    hs = batch_headers(log_bytes(broker))
    return bool(hs) and (hs[0].base_offset > 0 or any(
        b.base_offset > a.last_offset + 1 for a, b in zip(hs, hs[1:])))


def scenario(procs: dict, z: Zk) -> list:
    seen: list = []
    cid = eventually(lambda: controller_id(z), lambda c: c in procs, timeout=WAIT_S)
    row = eventually(lambda: create(procs[cid].bootstrap, TOPIC, 1, 3, COMPACTED),
                     lambda r: r.error_code in (0, ErrorCode.topic_already_exists),
                     timeout=WAIT_S)
    assert row.error_code == 0
    first = eventually(lambda: states(z, TOPIC, [0]).get(0),
                       lambda s: s is not None and len(s.isr) == 3, timeout=WAIT_S)
    lead = procs[first.leader]
    # neither the leader nor the controller (whom Kafka's leader asks for ISR changes)
    stopped = next(i for i in procs if i not in (first.leader, cid))
    victim = procs[stopped]
    overwrite(lead.bootstrap, range(3))
    victim.proc.send_signal(signal.SIGSTOP)
    try:
        latest = overwrite(lead.bootstrap, range(3, 30))
        shrunk = eventually(lambda: states(z, TOPIC, [0])[0], lambda st: len(st.isr) == 2,
                            timeout=WAIT_S)
        seen.append(("isr without the stopped follower", stopped in shrunk.isr))
        cleaned = eventually(lambda: gaps(lead) and len(records(lead)) < 29 * KEYS,
                             lambda ok: ok, timeout=WAIT_S)
        seen.append(("leader cleaned, with gaps", cleaned))
    finally:
        victim.proc.send_signal(signal.SIGCONT)
    back = eventually(lambda: states(z, TOPIC, [0])[0], lambda st: len(st.isr) == 3,
                      timeout=WAIT_S)
    seen.append(("isr rejoined", len(back.isr), back.leader == first.leader))
    theirs = per_key(records(lead))
    mine = eventually(lambda: per_key(records(victim)), lambda m: m == theirs, timeout=WAIT_S)
    seen.append(("follower's offset and value per key", sorted(mine.items())))
    seen.append(("values are the latest", {k: v for k, (_o, v) in mine.items()} == latest))
    seen.append(("follower's last offset", batch_headers(log_bytes(victim))[-1].last_offset))
    return seen


def test_a_follower_catches_up_with_a_compacted_leader_as_kafka(brokers, zk, zookeeper):
    # Kafka's brokers are stopped before kafkalite's start (2 cores for both)
    with zkh.kafka_on_zookeeper(zookeeper, (1, 2, 3), {
            **SETTINGS, "auto.leader.rebalance.enable": "false"}) as (kafka_connect, made):
        kafka_z = Zk(kafka_connect)
        try:
            expected = scenario(made, kafka_z)
        finally:
            kafka_z.close()
    procs = dict(zip((1, 2, 3), brokers(1, 2, 3, **SETTINGS)))
    z = zk()
    registered(z, {1, 2, 3})
    assert scenario(procs, z) == expected
