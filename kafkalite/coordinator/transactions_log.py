# The transaction coordinator's durable state: the compacted internal topic __transaction_state,
# as Kafka keeps it. A transactional id lives in partition abs(javaHashCode(id)) % partitions
# (transaction.state.log.num.partitions, default 50, fixed once the topic exists); each
# transition is one record keyed by Kafka's TransactionLogKey (version 0: the id) with a
# TransactionLogValue (written at version 0, as Kafka 3.8 does; version 1, the flexible one,
# is read too); an expired id is a tombstone. At start every partition is replayed, the last
# record of each id winning.
#
# The topic machinery (creation on first use, appends, replay) is the offsets log's, pointed
# at this topic; the log cleaner compacts it as any compacted topic.
from __future__ import annotations

import struct
from typing import Any, Callable

from .offsets_log import OffsetsLog
from .transactions import Transit, TxnState

TOPIC = "__transaction_state"
SEGMENT_BYTES = 104857600  # Kafka's transaction.state.log.segment.bytes default
_VALUE_HEAD = struct.Struct(">hqhib")  # version, producer id, epoch, timeout, status
_TIMES = struct.Struct(">qq")  # last update, start


def encode_key(transactional_id: str) -> bytes:
    raw = transactional_id.encode()
    return struct.pack(">hh", 0, len(raw)) + raw


def decode_key(data: bytes) -> str | None:
    """The transactional id, or None for a key of another (unknown) version."""
    version, n = struct.unpack_from(">hh", data)
    if version != 0:
        return None
    return data[4:4 + n].decode()


def encode_value(t: Transit) -> bytes:
    """TransactionLogValue v0. Partitions are null in Empty, as Kafka writes them."""
    out = [_VALUE_HEAD.pack(0, t.producer_id, t.producer_epoch, t.timeout_ms, int(t.state))]
    if t.state == TxnState.EMPTY:
        out.append(struct.pack(">i", -1))
    else:
        by_topic: dict[str, list[int]] = {}
        for topic, partition in sorted(t.partitions):
            by_topic.setdefault(topic, []).append(partition)
        out.append(struct.pack(">i", len(by_topic)))
        for topic, parts in by_topic.items():
            raw = topic.encode()
            out.append(struct.pack(f">h{len(raw)}si{len(parts)}i", len(raw), raw, len(parts),
                                   *parts))
    out.append(_TIMES.pack(t.update_ms, t.start_ms))
    return b"".join(out)


class _Reader:
    def __init__(self, data: bytes, pos: int, flexible: bool):
        self.data, self.pos, self.flexible = data, pos, flexible

    def fixed(self, fmt: str) -> Any:
        (v,) = struct.unpack_from(fmt, self.data, self.pos)
        self.pos += struct.calcsize(fmt)
        return v

    def uvarint(self) -> int:
        shift = value = 0
        while True:
            b = self.data[self.pos]
            self.pos += 1
            value |= (b & 0x7F) << shift
            if not b & 0x80:
                return value
            shift += 7

    def length(self) -> int:
        """An array's or string's length; -1 for null."""
        return self.uvarint() - 1 if self.flexible else self.fixed(">i")

    def string(self) -> str:
        n = self.uvarint() - 1 if self.flexible else self.fixed(">h")
        s = self.data[self.pos:self.pos + n].decode()
        self.pos += n
        return s

    def skip_tags(self) -> None:
        if self.flexible:
            for _ in range(self.uvarint()):
                self.uvarint()
                self.pos += self.uvarint()


def decode_value(key: str, data: bytes) -> Transit:
    """A TransactionLogValue (v0 or v1); ValueError for another version."""
    version = struct.unpack_from(">h", data)[0]
    if version not in (0, 1):
        raise ValueError(f"TransactionLogValue version {version} of {key!r} is unknown")
    _, pid, epoch, timeout, status = _VALUE_HEAD.unpack_from(data)
    r = _Reader(data, _VALUE_HEAD.size, flexible=version >= 1)
    partitions: set[tuple[str, int]] = set()
    n = r.fixed(">i") if version == 0 else r.length()
    for _ in range(max(n, 0)):
        topic = r.string()
        count = r.length() if r.flexible else r.fixed(">i")
        partitions.update((topic, r.fixed(">i")) for _ in range(count))
        r.skip_tags()
    update_ms, start_ms = struct.unpack_from(">qq", data, r.pos)
    # Kafka 3.8 keeps the previous epoch in memory only: it is -1 after a load.
    return Transit(pid, -1, epoch, -1, timeout, TxnState(status), frozenset(partitions),
                   start_ms, update_ms)


class TransactionLog(OffsetsLog):
    """The offsets log's topic machinery on __transaction_state."""

    def __init__(self, logs: Any, create_topic: Callable[..., Any], num_partitions: int,
                 notify: Callable[[str, int], None] | None = None,
                 segment_bytes: int = SEGMENT_BYTES, min_isr: int = 2):
        # Kafka's transaction topic configs (TransactionStateManager): compacted,
        # uncompressed, its segment size, min.insync.replicas from
        # transaction.state.log.min.isr, no unclean leader election.
        super().__init__(logs, create_topic, num_partitions, notify, name=TOPIC,
                         topic_configs={"cleanup.policy": "compact",
                                        "compression.type": "uncompressed",
                                        "min.insync.replicas": str(min_isr),
                                        "segment.bytes": str(segment_bytes),
                                        "unclean.leader.election.enable": "false"})

    def write(self, transactional_id: str, t: Transit | None, now_ms: int) -> int:
        """Append one record (None: the id's tombstone); returns its partition. Raises
        StorageError or ValueError as OffsetsLog.append_to."""
        partition = self.partition_for(transactional_id)
        value = None if t is None else encode_value(t)
        self.append_to(partition, [(encode_key(transactional_id), value)], now_ms)
        return partition
