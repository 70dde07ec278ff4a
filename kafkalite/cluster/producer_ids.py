# Producer ids unique across a ZooKeeper-coordinated cluster (issue 17), as Kafka's
# ZooKeeper-mode ProducerIdManager hands them out: the cluster's last claimed block lives in
# /latest_producer_id_block ({"version":1,"broker":N,"block_start":"..","block_end":".."});
# a broker claims the next 1000 ids by writing the block after it with a conditional write on
# the znode's version, so two brokers racing for a block never both win: the loser re-reads
# and takes the one after. The broker's ProducerIdAllocator (coordinator/producers.py) asks
# for the next block ahead of need (half of the current one used), on a task of its own, so
# InitProducerId waits on ZooKeeper only when a burst outruns the prefetch.
from __future__ import annotations

import logging

from ..wire.errors import ErrorCode, KafkaError
from . import zkdata
from .zk import BadVersion, NodeExists, NoNode, ZkClient, ZkError

log = logging.getLogger("kafkalite.cluster")

BLOCK_SIZE = 1000  # ProducerIdsBlock.PRODUCER_ID_BLOCK_SIZE
INT64_MAX = 2**63 - 1
CLAIM_ATTEMPTS = 20  # bounded: each lost race means another broker got a block meanwhile


def next_block(latest: zkdata.ProducerIdBlock | None, broker_id: int,
               size: int = BLOCK_SIZE) -> zkdata.ProducerIdBlock:
    """The block after `latest` (the first one, from 0, when none was claimed yet), for
    `broker_id`. Raises KafkaError when the id space is used up, as Kafka refuses it."""
    start = 0 if latest is None else latest.block_end + 1
    if latest is not None and latest.block_end > INT64_MAX - size:
        raise KafkaError(ErrorCode.unknown_server_error,
                         "Have exhausted all producerIds.")
    return zkdata.ProducerIdBlock(broker_id, start, start + size - 1)


async def read_latest(zk: ZkClient) -> tuple[zkdata.ProducerIdBlock | None, int]:
    """The last claimed block (None: none yet, the znode empty) and the znode's version
    (zkdata.UNKNOWN_VERSION when the znode is missing)."""
    try:
        data, st = await zk.get(zkdata.PRODUCER_ID_BLOCK)
    except NoNode:
        return None, zkdata.UNKNOWN_VERSION
    return (zkdata.ProducerIdBlock.decode(data) if data else None), st.version


async def claim_block(zk: ZkClient, broker_id: int,
                      size: int = BLOCK_SIZE) -> tuple[int, int]:
    """Claim the cluster's next block for this broker: (first id, last id). Raises
    KafkaError (COORDINATOR_LOAD_IN_PROGRESS, which clients retry) when ZooKeeper cannot be
    written or every attempt lost a race."""
    for _ in range(CLAIM_ATTEMPTS):
        try:
            latest, version = await read_latest(zk)
            block = next_block(latest, broker_id, size)
            if version == zkdata.UNKNOWN_VERSION:
                await zk.create(zkdata.PRODUCER_ID_BLOCK, block.encode(), makepath=True)
            else:
                await zk.set(zkdata.PRODUCER_ID_BLOCK, block.encode(), version)
        except (BadVersion, NodeExists, NoNode):
            continue  # another broker claimed a block between our read and write
        except ZkError as e:
            raise KafkaError(ErrorCode.coordinator_load_in_progress,
                             f"Cannot claim a producer id block in ZooKeeper: {e!r}") from e
        log.info("Claimed producer id block %d-%d", block.block_start, block.block_end)
        return block.block_start, block.block_end
    raise KafkaError(ErrorCode.coordinator_load_in_progress,
                     f"No producer id block after {CLAIM_ATTEMPTS} attempts")
