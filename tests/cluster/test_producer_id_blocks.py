# Producer ids unique across a ZooKeeper-coordinated cluster (issue 17): brokers claim blocks
# of 1000 ids from /latest_producer_id_block with conditional writes, as Kafka's ZooKeeper-mode
# ProducerIdManager. Racing claimers on the real ZooKeeper never share a block; three spawned
# kafkalite brokers answering InitProducerId at once hand out distinct ids from contiguous
# blocks, each block one broker's; the znode is byte for byte what Kafka 3.8 in ZooKeeper mode
# writes for the same broker id.
from __future__ import annotations

import asyncio
import threading

from kafka.protocol.producer import InitProducerIdRequest

from kafkalite.cluster import zkdata
from kafkalite.cluster.producer_ids import BLOCK_SIZE, claim_block
from kafkalite.cluster.zk import ZkClient
from tests.cluster.test_membership import (WAIT_S, Zk, brokers, connect, registered,  # noqa: F401
                                           zk)
from tests.cluster.test_kafka_znodes import kafka_on_zookeeper  # noqa: F401
from tests.helpers import zookeeper as zkh
from tests.helpers.kbatch import connect as open_socket
from tests.helpers.kbatch import decode_response, recv_frame, request_bytes
from tests.helpers.real_kafka import eventually

PER_BROKER = 700  # beyond half a block: every broker claims a second block ahead


def init_producer_ids(bootstrap: str, n: int) -> list[int]:
    """n idempotent InitProducerId v4 requests, pipelined on one connection: the ids."""
    req = InitProducerIdRequest[4](transactional_id=None, transaction_timeout_ms=60000,
                                   producer_id=-1, producer_epoch=-1)
    from kafka.protocol.api_header import ResponseClassRegistry
    cls = ResponseClassRegistry._response_class_registry[req.API_KEY]
    out = []
    with open_socket(bootstrap, timeout=30) as s:
        for start in range(0, n, 50):  # a window of 50 in flight
            count = min(50, n - start)
            s.sendall(b"".join(request_bytes(req, start + i) for i in range(count)))
            for i in range(count):
                corr, resp = decode_response(cls, 4, recv_frame(s))
                assert (corr, resp.error_code) == (start + i, 0)
                out.append(resp.producer_id)
    return out


def latest_block(z: Zk) -> tuple[zkdata.ProducerIdBlock | None, bytes]:
    data, _ = z.client.get(zkdata.PRODUCER_ID_BLOCK)
    return (zkdata.ProducerIdBlock.decode(data) if data else None), data


async def test_racing_claimers_never_share_a_block_and_blocks_are_contiguous(zookeeper):
    connect_ = zkh.chroot_connect(zookeeper)
    clients = [ZkClient(connect_, 6000) for _ in range(3)]
    for c in clients:
        await c.start()
    try:
        await clients[0].ensure_persistent_paths()  # the empty znode, as a broker's start
        claims = [claim_block(c, broker_id=i + 1) for _ in range(5)
                  for i, c in enumerate(clients)]
        blocks = await asyncio.gather(*claims)
        assert sorted(blocks) == [(k * BLOCK_SIZE, k * BLOCK_SIZE + BLOCK_SIZE - 1)
                                  for k in range(15)]
        data, st = await clients[0].get(zkdata.PRODUCER_ID_BLOCK)
        latest = zkdata.ProducerIdBlock.decode(data)
        assert (latest.block_start, latest.block_end) == (14_000, 14_999)
        assert st.version == 15  # one successful conditional write per block
    finally:
        for c in clients:
            await c.close()


def test_three_brokers_hand_out_distinct_ids_from_contiguous_blocks(brokers, zk):
    procs = dict(zip((1, 2, 3), brokers(1, 2, 3)))
    z = zk()
    registered(z, {1, 2, 3})
    got: dict[int, list[int]] = {}
    errors: list[BaseException] = []

    def run(node: int) -> None:
        try:
            got[node] = init_producer_ids(procs[node].bootstrap, PER_BROKER)
        except BaseException as e:  # noqa: BLE001 - reported by the test thread
            errors.append(e)
    threads = [threading.Thread(target=run, args=(n,)) for n in procs]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert not errors, errors
    every = [pid for ids in got.values() for pid in ids]
    assert len(every) == len(set(every)) == 3 * PER_BROKER
    owners: dict[int, set[int]] = {}
    for node, ids in got.items():
        assert ids == sorted(ids)  # one broker's ids only grow
        for pid in ids:
            owners.setdefault(pid // BLOCK_SIZE, set()).add(node)
    assert all(len(o) == 1 for o in owners.values()), owners  # a block is one broker's
    # every broker went past half its first block: each claims a second one ahead
    latest = eventually(lambda: latest_block(z)[0],
                        lambda b: b is not None and b.block_end + 1 >= 6 * BLOCK_SIZE,
                        timeout=WAIT_S)
    assert latest.size == BLOCK_SIZE and latest.block_start % BLOCK_SIZE == 0
    claimed = (latest.block_end + 1) // BLOCK_SIZE
    assert claimed == 6 and set(owners) <= set(range(claimed))
    assert latest.broker in procs


def test_the_znode_is_what_kafka_writes(kafka_on_zookeeper, brokers, zk):
    _, kafka_connect = kafka_on_zookeeper  # Kafka 3.8, broker 0, after an idempotent producer
    theirs = Zk(kafka_connect)
    try:
        kafka_data, kafka_st = theirs.client.get(zkdata.PRODUCER_ID_BLOCK)
    finally:
        theirs.close()
    (proc,) = brokers(0)
    z = zk()
    registered(z, {0})
    init_producer_ids(proc.bootstrap, 1)
    data, st = z.client.get(zkdata.PRODUCER_ID_BLOCK)
    assert data == kafka_data  # {"version":1,"broker":0,"block_start":"0","block_end":"999"}
    assert st.version == kafka_st.version


def test_no_block_to_claim_answers_coordinator_load_in_progress(brokers, tmp_path):
    """ZooKeeper gone when a broker's block runs out: InitProducerId answers the retriable
    COORDINATOR_LOAD_IN_PROGRESS on an open connection (no dropped connection), as Kafka's
    ProducerIdManager without a block, and ids resume once ZooKeeper is back."""
    own = zkh.ZooKeeperProcess(data_dir=str(tmp_path / "zk")).start()
    try:
        connect_ = zkh.chroot_connect(own.connect)
        (proc,) = brokers(1, zk_connect=connect_)
        assert len(set(init_producer_ids(proc.bootstrap, 600))) == 600
        # Past half a block the broker claims the next one in the background: wait for that
        # claim's write before ZooKeeper goes, or the count below depends on the machine's load.
        eventually(lambda: _latest_block_end(connect_), lambda end: end == 2 * BLOCK_SIZE - 1,
                   timeout=WAIT_S)
        port = own.port
        own.stop()
        req = InitProducerIdRequest[4](transactional_id=None, transaction_timeout_ms=60000,
                                       producer_id=-1, producer_epoch=-1)
        from kafka.protocol.api_header import ResponseClassRegistry
        cls = ResponseClassRegistry._response_class_registry[req.API_KEY]
        codes = []
        with open_socket(proc.bootstrap, timeout=60) as s:
            for i in range(1500):  # bounded: the two blocks' 2000 ids, then refusals
                s.sendall(request_bytes(req, i))
                corr, resp = decode_response(cls, 4, recv_frame(s))
                assert corr == i
                codes.append(resp.error_code)
                if resp.error_code:
                    break
            assert codes[-1] == 14  # COORDINATOR_LOAD_IN_PROGRESS
            assert codes[:-1] == [0] * (len(codes) - 1) and len(codes) == 1401
        own = zkh.ZooKeeperProcess(port=port, data_dir=str(tmp_path / "zk")).start()
        ids = eventually(lambda: _try_ids(proc.bootstrap), lambda got: got is not None,
                         timeout=WAIT_S)
        assert ids and ids[0] >= 2 * BLOCK_SIZE  # a fresh block: nothing handed out twice
    finally:
        own.stop()


def _latest_block_end(connect_: str) -> int | None:
    from kazoo.client import KazooClient
    client = KazooClient(hosts=connect_, timeout=10)
    client.start(timeout=10)
    try:
        data, _ = client.get(zkdata.PRODUCER_ID_BLOCK)
        return zkdata.ProducerIdBlock.decode(data).block_end if data else None
    finally:
        client.stop()
        client.close()


def _try_ids(bootstrap: str) -> list[int] | None:
    try:
        return init_producer_ids(bootstrap, 1)
    except AssertionError:  # still refused
        return None
