# The cluster's producer-id blocks without ZooKeeper: the next block's arithmetic and encoding
# (Kafka's ZkProducerIdManager: from 0, 1000 at a time, the end inclusive, the numbers as JSON
# strings), and the allocator taking ids from claimed blocks that need not follow each other,
# claiming the next one ahead of need.
from __future__ import annotations

import asyncio

import pytest

from kafkalite.cluster import zkdata
from kafkalite.cluster.producer_ids import INT64_MAX, next_block
from kafkalite.coordinator.producers import ProducerIdAllocator
from kafkalite.wire.errors import ErrorCode, KafkaError


def test_the_first_block_and_the_next():
    first = next_block(None, broker_id=3)
    assert first.encode() == b'{"version":1,"broker":3,"block_start":"0","block_end":"999"}'
    second = next_block(zkdata.ProducerIdBlock.decode(first.encode()), broker_id=1)
    assert second.encode() == \
        b'{"version":1,"broker":1,"block_start":"1000","block_end":"1999"}'


def test_the_id_space_runs_out_as_in_kafka():
    last = zkdata.ProducerIdBlock(1, INT64_MAX - 1500, INT64_MAX - 501)
    with pytest.raises(KafkaError) as e:
        next_block(last, broker_id=1)
    assert e.value.code == ErrorCode.unknown_server_error


async def test_ids_come_from_claimed_blocks_and_the_next_is_claimed_ahead(tmp_path):
    handed = iter([(5000, 5003), (9000, 9003), (12000, 12003)])
    claims: list[int] = []

    async def claim() -> tuple[int, int]:
        claims.append(len(claims))
        return next(handed)
    pids = ProducerIdAllocator(str(tmp_path / "producer-ids"), block=4)
    pids.use_blocks(claim)
    ids = []
    for _ in range(8):
        ids.append(await pids.allocate())
        for _wait in range(100):  # let a claim started in the background land
            if not pids.reserving:
                break
            await asyncio.sleep(0)
    assert ids == [5000, 5001, 5002, 5003, 9000, 9001, 9002, 9003]
    assert len(claims) == 3  # the third block was claimed while the second had ids left
    assert not (tmp_path / "producer-ids").exists()  # the cluster's blocks, not the file's


async def test_a_failed_claim_fails_the_request_and_the_next_request_claims_again(tmp_path):
    outcomes: list = [KafkaError(ErrorCode.coordinator_load_in_progress), (0, 3)]

    async def claim() -> tuple[int, int]:
        out = outcomes.pop(0)
        if isinstance(out, Exception):
            raise out
        return out
    pids = ProducerIdAllocator(str(tmp_path / "producer-ids"), block=4)
    pids.use_blocks(claim)
    with pytest.raises(KafkaError):
        await pids.allocate()
    assert await pids.allocate() == 0
