# The on-disk format of group state, checked without a broker: the records of
# __consumer_offsets have Kafka's key/value layouts, groups map to partitions as Kafka's
# partitionFor (Java's String.hashCode), and the batches the coordinator writes are valid v2
# batches as kafka-python's independent record decoder reads them.
from __future__ import annotations

import struct

from kafka.record.default_records import DefaultRecordBatch

from kafkalite.coordinator.offsets_log import java_string_hash, partition_for
from kafkalite.coordinator.offsets_records import (GroupValue, MemberValue, OffsetValue,
                                                   group_key, group_value, offset_key,
                                                   offset_value, parse_group_value, parse_key,
                                                   parse_offset_value)
from kafkalite.wire.batch_builder import build_batch


def test_java_string_hash_and_partition_for():
    assert java_string_hash("") == 0
    assert java_string_hash("hello") == 99162322
    assert java_string_hash("\U0001f600") == 31 * 0xD83D + 0xDE00  # a UTF-16 surrogate pair
    assert java_string_hash("polygenelubricants") == -(2**31)
    assert partition_for("polygenelubricants", 50) == 0  # Utils.abs(Integer.MIN_VALUE) is 0
    assert partition_for("hello", 50) == 99162322 % 50


def test_offset_commit_key_and_value_layouts():
    assert offset_key("g", "t", 7) \
        == b"\x00\x01" + b"\x00\x01g" + b"\x00\x01t" + b"\x00\x00\x00\x07"
    assert parse_key(offset_key("grüppe", "t", 3)) == ("offset", "grüppe", "t", 3)
    assert group_key("g") == b"\x00\x02\x00\x01g"
    assert parse_key(group_key("g")) == ("group", "g", None, -1)
    v3 = offset_value(OffsetValue(5, 3, "m", 1000))
    assert v3 == (b"\x00\x03" + struct.pack(">qi", 5, 3) + b"\x00\x01m"
                  + struct.pack(">q", 1000))
    assert parse_offset_value(v3) == OffsetValue(5, 3, "m", 1000, -1)
    v1 = offset_value(OffsetValue(5, -1, "", 1000, 2000))  # an explicit expiry: version 1
    assert v1[:2] == b"\x00\x01"
    assert parse_offset_value(v1) == OffsetValue(5, -1, "", 1000, 2000)
    v0 = b"\x00\x00" + struct.pack(">q", 9) + b"\x00\x00" + struct.pack(">q", 1)
    assert parse_offset_value(v0) == OffsetValue(9, -1, "", 1, -1)


def test_group_metadata_value_round_trip():
    value = GroupValue("consumer", 4, "range", "m-1", 123, [
        MemberValue("m-1", None, "client", "/127.0.0.1", 300000, 10000, b"sub", b"assign"),
        MemberValue("m-2", "instance-2", "client", "/127.0.0.1", 300000, 10000, b"", b"")])
    raw = group_value(value)
    assert raw[:2] == b"\x00\x03"
    assert parse_group_value(raw) == value
    empty = GroupValue("consumer", 5, None, None, 456, [])
    assert parse_group_value(group_value(empty)) == empty


def test_batches_read_back_with_an_independent_decoder():
    records = [(offset_key("g", "t", 0), offset_value(OffsetValue(1, -1, "é", 5))),
               (group_key("g"), None)]
    batch = DefaultRecordBatch(build_batch(records, 1_700_000_000_000, base_offset=42))
    assert batch.validate_crc()
    got = [(r.offset, r.timestamp, r.key, r.value) for r in batch]
    assert got == [(42, 1_700_000_000_000, records[0][0], records[0][1]),
                   (43, 1_700_000_000_000, records[1][0], None)]
