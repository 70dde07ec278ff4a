# Persistence of group state in the internal, compacted topic __consumer_offsets, as Kafka
# keeps it: a group lives in partition abs(javaHashCode(group id)) % partitions; every commit,
# group change and deletion is a v2 batch appended to that partition (offsets_records.py has
# the record schemas); at start every partition is replayed from its log start offset.
#
# The topic is created on first use (FindCoordinator or a write), like Kafka, with
# offsets.topic.num.partitions partitions (default 50, as Kafka: the count is fixed once the
# topic exists, and matching Kafka keeps partitionFor identical), cleanup.policy=compact and
# Kafka's offsets.topic.segment.bytes (100 MiB).
#
# Compaction is the log cleaner's (kafkalite/log/cleaner.py), as for any compacted topic:
# it keeps each key's latest record below the active segment, tombstones until
# delete.retention.ms, and never cleans past the last stable offset.
#
# Transactional offsets (TxnOffsetCommit) are written as a transactional batch (attributes
# bit 4, the producer's id and epoch, base sequence 0, as Kafka's GroupMetadataManager
# writes them); the COMMIT/ABORT control batch that ends the transaction is written by the
# marker writer. The batch opens the producer's transaction in the partition's producer state
# (as Kafka's append does), so that the last stable offset holds the cleaner back from an
# open transaction and an ABORT marker records the transaction in the `.txnindex` (which is
# how the cleaner knows to remove its records). Replay hands both to the loader, which keeps
# a transaction's records pending until its marker.
#
# In a ZooKeeper cluster the coordinators write as an acks=all producer does (Kafka's
# appendRecords with requiredAcks=-1): below the partition's min.insync.replicas nothing is
# appended (NotReplicated, NOT_ENOUGH_REPLICAS), and the answer waits in `replicated` until
# the high watermark passes what was appended, so that an acknowledged commit survives the
# coordinator's broker. A single node (no `replication`) answers at once.
from __future__ import annotations

import asyncio
import logging
import struct
from typing import Any, Callable, Iterator, NamedTuple

import crc32c

from ..wire.batch_builder import build_batch
from ..wire.errors import ErrorCode
from ..wire.record_iter import iter_records
from ..wire.records import LOG_OVERHEAD, parse_header, read_offset_and_length

log = logging.getLogger("kafkalite.coordinator")

TOPIC = "__consumer_offsets"
SEGMENT_BYTES = 104857600  # Kafka's offsets.topic.segment.bytes default
READ_CHUNK = 1 << 20
Record = tuple[bytes, bytes | None]
TRANSACTIONAL = 0x10
CONTROL = 0x20
_TXN_FIELDS = struct.Struct(">h")  # attributes, at byte 21 of a v2 batch
_PRODUCER = struct.Struct(">qhi")  # producer id, epoch, base sequence, at byte 43
_CONTROL_KEY = struct.Struct(">hh")  # EndTransactionMarker key: version, type (1: COMMIT)


class Replayed(NamedTuple):
    """One record read back: `producer_id` is -1 outside transactions; a transaction
    marker has `marker` True (COMMIT) or False (ABORT) and no key."""
    key: bytes | None
    value: bytes | None
    offset: int  # base offset of its batch
    producer_id: int = -1
    marker: bool | None = None


class NotReplicated(ValueError):  # caught where the writes' other errors are
    """A write the ISR did not take: `code` is the log's error (NOT_ENOUGH_REPLICAS,
    NOT_ENOUGH_REPLICAS_AFTER_APPEND, REQUEST_TIMED_OUT, NOT_LEADER_OR_FOLLOWER), which each
    coordinator maps to its answer as Kafka's does."""

    def __init__(self, code: int, where: str):
        super().__init__(f"{ErrorCode(code).name} writing {where}")
        self.code = code


def transactional_batch(records: list[Record], now_ms: int, producer_id: int,
                        producer_epoch: int) -> bytes:
    """build_batch's batch with the transactional bit and the producer's id and epoch (the
    CRC covers attributes onwards, so it is computed again)."""
    batch = bytearray(build_batch(records, now_ms))
    _TXN_FIELDS.pack_into(batch, 21, TRANSACTIONAL)
    _PRODUCER.pack_into(batch, 43, producer_id, producer_epoch, 0)
    struct.pack_into(">I", batch, 17, crc32c.crc32c(bytes(batch[21:])))
    return bytes(batch)


def java_string_hash(s: str) -> int:
    """Java's String.hashCode (over UTF-16 code units, 32-bit wrap-around)."""
    h = 0
    data = s.encode("utf-16-be")
    for i in range(0, len(data), 2):
        h = (31 * h + ((data[i] << 8) | data[i + 1])) & 0xFFFFFFFF
    return h - (1 << 32) if h >= 1 << 31 else h


def partition_for(group_id: str, partitions: int) -> int:
    h = java_string_hash(group_id)
    return (0 if h == -(1 << 31) else abs(h)) % partitions


class OffsetsLog:
    """`name` and `topic_configs` let the other coordinators' topics (__transaction_state,
    __share_group_state) reuse this machinery."""

    def __init__(self, logs: Any, create_topic: Callable[..., Any], num_partitions: int,
                 on_append: Callable[[str, int], None] | None = None, name: str = TOPIC,
                 topic_configs: dict[str, str] | None = None):
        self.logs = logs  # the LogManager: .get(name) -> Topic | None
        self.create_topic = create_topic
        self.name = name
        self.topic_configs = topic_configs if topic_configs is not None else {
            "cleanup.policy": "compact", "segment.bytes": str(SEGMENT_BYTES)}
        self.configured_partitions = num_partitions
        self.on_append = on_append
        # The broker's cluster.replication.Replication, or None on a single node.
        self.replication: Callable[[], Any] = lambda: None
        self.write_timeout_ms = 5000  # Kafka's offsets.commit.timeout.ms
        self._unacked: dict[int, list[Callable[[bool], None]]] = {}

    # --- topic ----------------------------------------------------------------------------

    def topic(self) -> Any:
        return self.logs.get(self.name)

    @property
    def num_partitions(self) -> int:
        t = self.topic()
        return len(t.partitions) if t is not None else self.configured_partitions

    def partition_for(self, group_id: str) -> int:
        return partition_for(group_id, self.num_partitions)

    def topic_spec(self) -> tuple[str, int, dict[str, str]]:
        """(name, partitions, configs) the topic is created with, as Kafka's."""
        return self.name, self.configured_partitions, dict(self.topic_configs)

    def ensure_topic(self) -> Any:
        """The topic, created if missing. The broker creates it without holding the loop at
        the coordinator's first use (FindCoordinator); a write with none before it (a raw
        request) creates it here, blocking."""
        t = self.topic()
        if t is None:
            t = self.create_topic(*self.topic_spec(), internal=True)
        return t

    # --- writes ---------------------------------------------------------------------------

    def append(self, group_id: str, records: list[Record], now_ms: int) -> int:
        """Append `records` as one batch to the group's partition; returns its base offset
        (-1 when there is nothing to write). Raises StorageError, or ValueError when the
        batch exceeds the topic's max.message.bytes."""
        if not records:
            return -1
        return self.append_to(self.partition_for(group_id), records, now_ms)

    def append_to(self, partition: int, records: list[Record], now_ms: int) -> int:
        return self._append(partition, build_batch(records, now_ms), now_ms)

    def append_txn(self, group_id: str, records: list[Record], now_ms: int, producer_id: int,
                   producer_epoch: int) -> int:
        """Append `records` as one transactional batch of the producer; its base offset."""
        batch = transactional_batch(records, now_ms, producer_id, producer_epoch)
        return self._append(self.partition_for(group_id), batch, now_ms)

    def _append(self, partition: int, batch: bytes, now_ms: int) -> int:
        p = self.ensure_topic().partitions[partition]
        if len(batch) > p.config.max_message_bytes:
            raise ValueError(f"{len(batch)} bytes exceed max.message.bytes "
                             f"{p.config.max_message_bytes} of {self.name}")
        replication = self.replication()
        if replication is not None:  # min.insync.replicas, before anything is appended
            code = replication.produce_error(self.name, partition)
            if code:
                raise NotReplicated(code, f"{self.name}-{partition}")
        h = parse_header(batch)
        base = p.append(batch, h, now_ms)
        state = p.producer_state
        if h.attributes & TRANSACTIONAL and state is not None:
            state.begin(h.producer_id, base)
        if self.on_append is not None:
            self.on_append(self.name, partition)
        return base

    def when_replicated(self, partition: int, settle: Callable[[bool], None]) -> None:
        """Call `settle(True)` (what a write makes visible) once `replicated` says the ISR
        has what was appended, settle(False) if that failed, as Kafka's pending offset
        commits; settle(True) at once on a single node."""
        if self.replication() is None:
            settle(True)
        else:
            self._unacked.setdefault(partition, []).append(settle)

    async def replicated(self, partition: int) -> int:
        """After a write, in a cluster: NONE once the partition's high watermark passes
        everything appended to it so far; else the error the wait ended with, or
        REQUEST_TIMED_OUT after write_timeout_ms. NONE at once on a single node. The
        writer calls it right after its append (no await between), so the pending
        `when_replicated` work it takes is its own write's."""
        pending = self._unacked.pop(partition, [])
        replication = self.replication()
        t = self.topic()
        if replication is None or t is None:
            code = ErrorCode.none
        else:
            fut = replication.wait_acks(self.name, partition,
                                        t.partitions[partition].log_end_offset)
            if fut is None:  # leadership moved away since the append
                code = ErrorCode.not_leader_or_follower
            else:
                done, _ = await asyncio.wait([fut], timeout=self.write_timeout_ms / 1000)
                code = fut.result() if done else ErrorCode.request_timed_out
        for settle in pending:
            settle(code == ErrorCode.none)
        return code

    # --- replay ---------------------------------------------------------------------------

    def replay(self, partition: int) -> Iterator[Replayed | None]:
        """Every record of a partition from its log start offset, in order, and every
        transaction marker. Yields None between chunks so that a caller can give other work
        a turn."""
        t = self.topic()
        if t is None:
            return
        p = t.partitions[partition]
        offset = p.log_start_offset
        while offset < p.log_end_offset:
            data = p.read(offset, READ_CHUNK)
            pos = 0
            advanced = False
            while pos + LOG_OVERHEAD <= len(data):
                _, size = read_offset_and_length(data, pos)
                if pos + size > len(data):
                    break  # a batch cut short at the end of the chunk
                h = parse_header(data, pos)
                batch = bytes(data[pos:pos + size])
                pos += size
                offset = h.last_offset + 1
                advanced = True
                try:
                    records = list(iter_records(batch))
                except (ValueError, IndexError) as e:
                    log.warning("Skipping an undecodable batch at offset %d of %s-%d: %s",
                                h.base_offset, self.name, partition, e)
                    continue
                pid = h.producer_id if h.attributes & TRANSACTIONAL else -1
                if h.attributes & CONTROL:
                    # A transaction marker: it carries no group state, it ends a transaction.
                    marker = _marker(records[0].key if records else None)
                    if marker is not None and pid >= 0:
                        yield Replayed(None, None, h.base_offset, pid, marker)
                    continue
                for r in records:
                    if r.offset >= p.log_start_offset and r.key is not None:
                        yield Replayed(r.key, r.value, h.base_offset, pid)
            if not advanced:
                log.error("%s-%d: no whole batch at offset %d; stopping its replay",
                          self.name, partition, offset)
                break
            yield None


def _marker(key: bytes | None) -> bool | None:
    """True for a COMMIT marker, False for ABORT, None for what is neither."""
    if key is None or len(key) < _CONTROL_KEY.size:
        return None
    _, kind = _CONTROL_KEY.unpack_from(key)
    return {0: False, 1: True}.get(kind)
