# Replication of a compacted topic between kafkalite brokers (issue 17): the leader's log
# cleaner removes whole batches, so a follower that was away fetches batches with offset
# gaps (the first one above its log end). It appends them as they are (Kafka's
# appendAsFollower), rejoins the ISR with each key's records at the leader's offsets, and
# serves consumers the same once it leads.
from __future__ import annotations

import time

from tests.cluster.test_membership import WAIT_S, brokers, connect, registered, zk  # noqa: F401
from tests.cluster.test_replication import (TOPIC, bootstrap, cluster, isr, log_bytes,
                                            resume, state, stop, wait_isr)
from tests.helpers.kbatch import batch_headers, decode_records
from tests.helpers.real_kafka import eventually

KEYS = 8
COMPACTED = {"cleanup.policy": "compact", "segment.bytes": "1024",
             "min.cleanable.dirty.ratio": "0.01", "delete.retention.ms": "86400000"}
BROKER = {"log.cleaner.backoff.ms": "200", "zookeeper.session.timeout.ms": "20000"}


def overwrite(servers: str, rounds: range) -> dict[bytes, bytes]:
    """One acks=all batch per round, each writing every key (so a later round makes a whole
    earlier batch obsolete); returns the latest value per key."""
    import confluent_kafka as ck
    p = ck.Producer({"bootstrap.servers": servers, "acks": "all", "linger.ms": 0,
                     "message.timeout.ms": 30000})
    errors: list = []
    latest = {}
    for r in rounds:
        for k in range(KEYS):
            key, value = b"k%d" % k, b"v%d-%d" % (k, r)
            p.produce(TOPIC, key=key, value=value, partition=0,
                      on_delivery=lambda err, msg: err and errors.append(err))
            latest[key] = value
        assert p.flush(40) == 0
    assert errors == []
    return latest


def records(broker) -> list[tuple[int, bytes, bytes]]:
    return [(o, k, v) for o, _ts, k, v, _h in decode_records(log_bytes(broker))]


def has_gap(broker) -> bool:
    offsets = [h for h in batch_headers(log_bytes(broker))]
    return any(b.base_offset > a.last_offset + 1 for a, b in zip(offsets, offsets[1:]))


def per_key(recs) -> dict[bytes, tuple[int, bytes]]:
    return {k: (o, v) for o, k, v in recs}


def consume_latest(servers: str, end: int, timeout: float = 30.0) -> dict[bytes, bytes]:
    """Each key's last value read from the beginning up to offset `end` (exclusive)."""
    import confluent_kafka as ck
    c = ck.Consumer({"bootstrap.servers": servers, "group.id": "g", "enable.auto.commit": False,
                     "auto.offset.reset": "earliest"})
    c.assign([ck.TopicPartition(TOPIC, 0, 0)])
    got: dict[bytes, bytes] = {}
    last = -1
    deadline = time.monotonic() + timeout
    try:
        while last < end - 1 and time.monotonic() < deadline:
            m = c.poll(0.5)
            if m is not None and m.error() is None:
                got[m.key()] = m.value()
                last = m.offset()
    finally:
        c.close()
    assert last == end - 1, f"read up to {last}, the log ends at {end}"
    return got


def test_a_follower_away_during_compaction_catches_up_and_serves_after_failover(brokers, zk):
    procs, z = cluster(brokers, zk, topic_configs=COMPACTED, **BROKER)
    lead = state(z).leader
    victim = next(i for i in procs if i != lead)
    overwrite(bootstrap(procs), range(3))
    stop(procs[victim])
    try:
        live = bootstrap({i: b for i, b in procs.items() if i != victim})
        latest = overwrite(live, range(3, 30))
        assert victim not in isr(z)
        written = 30 * KEYS
        # the leader's cleaner removed whole batches after the stopped follower's log end
        eventually(lambda: has_gap(procs[lead]) and len(records(procs[lead])) < written - KEYS,
                   lambda ok: ok, timeout=WAIT_S)
    finally:
        resume(procs[victim])
    assert wait_isr(z, lambda s: s == set(procs)) == set(procs)
    theirs = per_key(records(procs[lead]))
    assert {k: v for k, (_o, v) in theirs.items()} == latest
    mine = eventually(lambda: per_key(records(procs[victim])), lambda m: m == theirs,
                      timeout=WAIT_S)
    assert mine == theirs
    leader_records = dict((o, (k, v)) for o, k, v in records(procs[lead]))
    for o, k, v in records(procs[victim]):  # every record the follower has, at its offset
        assert leader_records.get(o, (k, v)) == (k, v)
        assert v == b"v%s-%d" % (k[1:], (o // KEYS))
    end = written
    assert batch_headers(log_bytes(procs[victim]))[-1].last_offset == end - 1
    # the third broker, then the leader shut down (controlled): the caught-up follower
    # leads, and consumers read the same from it
    third = next(i for i in procs if i not in (lead, victim))
    procs[third].stop()
    procs[lead].stop()
    assert eventually(lambda: state(z).leader, lambda n: n == victim,
                      timeout=WAIT_S) == victim
    assert consume_latest(procs[victim].bootstrap, end) == latest


def test_a_follower_restarted_without_its_log_replicates_the_compacted_leader(brokers, zk):
    """A follower shut down, its partition directory deleted, started after the leader's
    cleaner compacted: its empty log takes the leader's batches from a first one above
    offset 0 (what a replica added by a reassignment does too), rejoins the ISR, and its own
    cleaner then cleans its replica (its `cleaner-offset-checkpoint`)."""
    import os
    import shutil

    from kafkalite.log.cleaner_checkpoint import read_checkpoint
    procs, z = cluster(brokers, zk, topic_configs=COMPACTED, **BROKER)
    lead = state(z).leader
    victim = next(i for i in procs if i != lead)
    procs[victim].stop()
    shutil.rmtree(os.path.join(procs[victim].data_dir, f"{TOPIC}-0"))
    live = bootstrap({i: b for i, b in procs.items() if i != victim})
    overwrite(live, range(20))
    eventually(lambda: batch_headers(log_bytes(procs[lead]))[0].base_offset,
               lambda first: first > 0, timeout=WAIT_S)  # the first batches were removed
    procs[victim].start()
    assert wait_isr(z, lambda s: s == set(procs)) == set(procs)
    theirs = per_key(records(procs[lead]))
    assert eventually(lambda: per_key(records(procs[victim])), lambda m: m == theirs,
                      timeout=WAIT_S) == theirs
    latest = overwrite(bootstrap(procs), range(20, 40))
    cleaned = eventually(lambda: read_checkpoint(procs[victim].data_dir).get((TOPIC, 0), 0),
                         lambda at: at > 20 * KEYS, timeout=WAIT_S)
    assert cleaned > 20 * KEYS
    assert {k: v for k, (_o, v) in per_key(records(procs[victim])).items()} == latest
    below = [k for o, k, _v in records(procs[victim]) if o < cleaned]
    assert len(below) == len(set(below))  # at most one record per key below its checkpoint


def test_a_new_leaders_producer_state_holds_the_last_five_batches_once(brokers, zk):
    """Each replicated batch enters the follower's producer state once (it was applied
    twice, halving the 5 batches remembered): after a failover, the new leader answers a
    retry of the oldest of the last 5 batches as a duplicate, with its original offset."""
    from tests.helpers.kbatch import build_batch, produce_raw
    from tests.helpers.kbatch import connect as open_socket
    procs, z = cluster(brokers, zk)
    lead = state(z).leader
    sent = [build_batch([(b"k", b"v%d" % seq, [], int(time.time() * 1000))],
                        producer_id=4242, producer_epoch=0, base_sequence=seq)
            for seq in range(5)]
    offsets = []
    with open_socket(procs[lead].bootstrap) as s:
        for batch in sent:  # acks=all one by one: each reaches the followers in its own fetch
            r = produce_raw(s, TOPIC, 0, batch)
            assert r.error_code == 0
            offsets.append(r.base_offset)
    procs[lead].stop()  # controlled shutdown: an in-sync follower leads
    new = eventually(lambda: state(z).leader, lambda n: n in procs and n != lead,
                     timeout=WAIT_S)
    with open_socket(procs[new].bootstrap) as s:
        r = eventually(lambda: produce_raw(s, TOPIC, 0, sent[0]),
                       lambda r: r.error_code != 6, timeout=WAIT_S)  # NOT_LEADER at first
    assert (r.error_code, r.base_offset) == (0, offsets[0])


def test_a_replica_added_by_reassignment_copies_the_compacted_leader(brokers, zk):
    """RF=2, compacted by the leader's cleaner; a reassignment adds the third broker, whose
    new log starts with the leader's batches above offset 0, joins the ISR and holds each
    key at the leader's offsets."""
    from tests.cluster.test_reassignment import alter
    from tests.cluster.test_zk_admin_apis import assignment, controller_id, create
    procs = dict(zip((1, 2, 3), brokers(1, 2, 3, **BROKER)))
    z = zk()
    registered(z, {1, 2, 3})
    cid = eventually(lambda: controller_id(z), lambda c: c in procs, timeout=WAIT_S)
    assert create(procs[cid].bootstrap, TOPIC, 1, 2, COMPACTED).error_code == 0
    placed = eventually(lambda: assignment(z, TOPIC), lambda a: a is not None,
                        timeout=WAIT_S).partitions[0]
    added = next(i for i in procs if i not in placed)
    eventually(lambda: set(isr(z)), lambda s: s == set(placed), timeout=WAIT_S)
    lead = state(z).leader
    latest = overwrite(bootstrap(procs), range(20))
    eventually(lambda: batch_headers(log_bytes(procs[lead]))[0].base_offset,
               lambda first: first > 0, timeout=WAIT_S)  # the first batches were removed
    assert alter(procs[cid].bootstrap, {(TOPIC, 0): [*placed, added]})[0] == 0
    assert wait_isr(z, lambda s: s == set(procs)) == set(procs)
    theirs = per_key(records(procs[lead]))
    assert {k: v for k, (_o, v) in theirs.items()} == latest
    assert eventually(lambda: per_key(records(procs[added])), lambda m: m == theirs,
                      timeout=WAIT_S) == theirs
