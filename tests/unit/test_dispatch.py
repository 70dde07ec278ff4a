# Broker.dispatch without sockets: requests encoded by kafka-python, responses decoded by
# kafka-python, for every served version of the core APIs.
from __future__ import annotations

import time

import pytest
from kafka.protocol.consumer import FetchRequest, FetchResponse, ListOffsetsRequest
from kafka.protocol.consumer import ListOffsetsResponse
from kafka.protocol.metadata import (ApiVersionsRequest, ApiVersionsResponse, MetadataRequest,
                                     MetadataResponse)
from kafka.protocol.producer import (InitProducerIdRequest, InitProducerIdResponse,
                                     ProduceRequest, ProduceResponse)

from kafkalite.broker.broker import Broker
from kafkalite.broker.registry import supported_versions
from kafkalite.config import BrokerConfig
from kafkalite.wire.errors import MalformedRequest

from tests.helpers.kbatch import decode_records, decode_response, request_bytes, simple_batch, stored_form


@pytest.fixture
def broker(tmp_path):
    b = Broker(BrokerConfig({"log.dirs": str(tmp_path), "node.id": "3",
                             "listeners": "PLAINTEXT://127.0.0.1:19092"}))
    b.open()
    try:
        yield b
    finally:
        b.close()


async def call(broker, req, resp_cls, corr=7):
    out = await broker.dispatch(bytes(request_bytes(req, corr))[4:])
    if out is None:
        return None
    got_corr, resp = decode_response(resp_cls, req.API_VERSION, b"".join(out))
    assert got_corr == corr
    return resp


def produce_req(version, topic, parts, acks=-1):
    Req = ProduceRequest[version]
    T = Req.TopicProduceData
    return Req(transactional_id=None, acks=acks, timeout_ms=1000, topic_data=[
        T(name=topic, partition_data=[T.PartitionProduceData(index=i, records=r)
                                      for i, r in parts])])


def fetch_req(version, key, parts, max_wait=0, min_bytes=1, max_bytes=1 << 20):
    Req = FetchRequest[version]
    T = Req.FetchTopic
    return Req(replica_id=-1, max_wait_ms=max_wait, min_bytes=min_bytes, max_bytes=max_bytes,
               isolation_level=0, session_id=0, session_epoch=-1, forgotten_topics_data=[],
               rack_id="", topics=[T(topic=key, topic_id=key, partitions=[
                   T.FetchPartition(partition=i, fetch_offset=o, partition_max_bytes=pm,
                                    current_leader_epoch=-1, log_start_offset=-1)
                   for i, o, pm in parts])])


@pytest.mark.parametrize("version", range(0, 5))
async def test_api_versions(broker, version):
    req = ApiVersionsRequest[version](client_software_name="t", client_software_version="1")
    r = await call(broker, req, ApiVersionsResponse)
    assert r.error_code == 0
    assert [(k.api_key, k.min_version, k.max_version) for k in r.api_keys] == \
        supported_versions()


async def test_api_versions_unknown_version_answers_v0(broker):
    import struct
    frame = struct.pack(">hhih", 18, 99, 5, 1) + b"c" + b"\x00\x00\x00"
    out = await broker.dispatch(frame)
    data = b"".join(out)
    assert data[:4] == b"\x00\x00\x00\x05"
    r = ApiVersionsResponse.decode(data[4:], version=0)
    assert r.error_code == 35
    assert [(k.api_key, k.min_version, k.max_version) for k in r.api_keys] == \
        [k for k in supported_versions() if k[0] == 18]


async def test_unsupported_versions_and_unknown_keys_close(broker):
    import struct
    for key, version in ((3, 13), (1, 3), (0, 12), (9999, 0), (-1, 0)):
        with pytest.raises(MalformedRequest):
            await broker.dispatch(struct.pack(">hhih", key, version, 1, -1) + b"\x00" * 8)


@pytest.mark.parametrize("version", range(0, 13))
async def test_metadata_all_versions(broker, version):
    broker.create_topic("known", 3)
    Req = MetadataRequest[version]
    topics = [Req.MetadataRequestTopic(name=n) for n in ("known", "auto-made", "bad name!")]
    r = await call(broker, Req(topics=topics, allow_auto_topic_creation=True,
                               include_cluster_authorized_operations=False,
                               include_topic_authorized_operations=False), MetadataResponse)
    [b] = r.brokers
    assert (b.node_id, b.host, b.port) == (3, "127.0.0.1", 19092)
    if version >= 1:
        assert r.controller_id == 3
    if version >= 2:
        assert r.cluster_id == broker.logs.cluster_id
    by_name = {t.name: t for t in r.topics}
    known = by_name["known"]
    assert known.error_code == 0
    assert [(p.partition_index, p.leader_id, p.replica_nodes, p.isr_nodes)
            for p in known.partitions] == [(i, 3, [3], [3]) for i in range(3)]
    if version >= 10:
        assert known.topic_id == broker.logs.get("known").topic_id
    assert by_name["auto-made"].error_code == 0 and len(by_name["auto-made"].partitions) == 1
    assert by_name["bad name!"].error_code == 17  # INVALID_TOPIC_EXCEPTION


async def test_metadata_without_auto_create(broker):
    Req = MetadataRequest[12]
    r = await call(broker, Req(topics=[Req.MetadataRequestTopic(name="nope")],
                               allow_auto_topic_creation=False,
                               include_topic_authorized_operations=False), MetadataResponse)
    assert r.topics[0].error_code == 3 and broker.logs.get("nope") is None
    r = await call(broker, Req(topics=None, allow_auto_topic_creation=False,
                               include_topic_authorized_operations=False), MetadataResponse)
    assert r.topics == []


@pytest.mark.parametrize("version", range(0, 6))
async def test_init_producer_id(broker, version):
    Req = InitProducerIdRequest[version]
    a = await call(broker, Req(transactional_id=None, transaction_timeout_ms=1000,
                               producer_id=-1, producer_epoch=-1), InitProducerIdResponse)
    b = await call(broker, Req(transactional_id=None, transaction_timeout_ms=1000,
                               producer_id=-1, producer_epoch=-1), InitProducerIdResponse)
    assert (a.error_code, a.producer_epoch, b.error_code) == (0, 0, 0)
    assert b.producer_id > a.producer_id >= 0


@pytest.mark.parametrize("pv,fv", [(3, 4), (5, 6), (7, 10), (8, 11), (9, 12), (10, 13),
                                   (11, 17)])
async def test_produce_then_fetch(broker, pv, fv):
    topic = broker.create_topic("pf", 2)
    b0, b1 = simple_batch(3, tag=b"zero"), simple_batch(2, tag=b"one")
    r = await call(broker, produce_req(pv, "pf", [(0, b0), (1, b1)]), ProduceResponse)
    got = [(p.index, p.error_code, p.base_offset) for p in r.responses[0].partition_responses]
    assert got == [(0, 0, 0), (1, 0, 0)]
    r = await call(broker, produce_req(pv, "pf", [(0, b1)]), ProduceResponse)
    assert r.responses[0].partition_responses[0].base_offset == 3
    key = topic.topic_id if fv >= 13 else "pf"
    f = await call(broker, fetch_req(fv, key, [(0, 0, 1 << 20), (1, 1, 1 << 20)]),
                   FetchResponse)
    parts = {p.partition_index: p for p in f.responses[0].partitions}
    assert bytes(parts[0].records) == stored_form(b0, 0) + stored_form(b1, 3)
    assert bytes(parts[1].records) == stored_form(b1, 0)  # offset 1 is inside that batch
    assert (parts[0].high_watermark, parts[1].high_watermark) == (5, 2)
    f = await call(broker, fetch_req(fv, key, [(0, 6, 100)]), FetchResponse)
    assert f.responses[0].partitions[0].error_code == 1  # OFFSET_OUT_OF_RANGE


async def test_produce_errors(broker):
    broker.create_topic("small", 1, {"max.message.bytes": "200"})
    r = await call(broker, produce_req(9, "small", [(0, simple_batch(1, size=500)), (5, b"")]),
                   ProduceResponse)
    assert [p.error_code for p in r.responses[0].partition_responses] == [10, 3]
    r = await call(broker, produce_req(9, "missing", [(0, simple_batch(1))]), ProduceResponse)
    assert r.responses[0].partition_responses[0].error_code == 3
    bad = bytearray(simple_batch(2))
    bad[-1] ^= 1
    r = await call(broker, produce_req(9, "small", [(0, bytes(bad))]), ProduceResponse)
    assert r.responses[0].partition_responses[0].error_code == 2  # CORRUPT_MESSAGE
    r = await call(broker, produce_req(9, "small", [(0, simple_batch(1))], acks=2),
                   ProduceResponse)
    assert r.responses[0].partition_responses[0].error_code == 21  # INVALID_REQUIRED_ACKS


async def test_produce_acks0_answers_nothing_and_closes_on_error(broker):
    broker.create_topic("a0", 1)
    assert await call(broker, produce_req(9, "a0", [(0, simple_batch(1))], acks=0),
                      ProduceResponse) is None
    assert broker.logs.partition("a0", 0).log_end_offset == 1
    with pytest.raises(MalformedRequest):
        await call(broker, produce_req(9, "gone", [(0, simple_batch(1))], acks=0),
                   ProduceResponse)


async def test_idempotent_duplicate_gets_original_offset(broker):
    broker.create_topic("idem", 1)
    batches = [simple_batch(2, producer_id=5, producer_epoch=0, base_sequence=s)
               for s in (0, 2, 4)]
    offsets = []
    for b in batches:
        r = await call(broker, produce_req(9, "idem", [(0, b)]), ProduceResponse)
        offsets.append(r.responses[0].partition_responses[0].base_offset)
    assert offsets == [0, 2, 4]
    r = await call(broker, produce_req(9, "idem", [(0, batches[1])]), ProduceResponse)
    p = r.responses[0].partition_responses[0]
    assert (p.error_code, p.base_offset) == (0, 2)
    gap = simple_batch(1, producer_id=5, producer_epoch=0, base_sequence=9)
    r = await call(broker, produce_req(9, "idem", [(0, gap)]), ProduceResponse)
    assert r.responses[0].partition_responses[0].error_code == 45  # OUT_OF_ORDER_SEQUENCE
    assert broker.logs.partition("idem", 0).log_end_offset == 6


async def test_fetch_max_bytes_and_first_batch(broker):
    broker.create_topic("mb", 2)
    big = simple_batch(1, size=5000)
    for _ in range(2):
        await call(broker, produce_req(9, "mb", [(0, big), (1, big)]), ProduceResponse)
    f = await call(broker, fetch_req(12, "mb", [(0, 0, 100), (1, 0, 100)], max_bytes=100),
                   FetchResponse)
    parts = {p.partition_index: bytes(p.records) for p in f.responses[0].partitions}
    assert parts[0] == stored_form(big, 0) and parts[1] == b""  # KIP-74, then the limit
    f = await call(broker, fetch_req(12, "mb", [(0, 0, 6000), (1, 0, 6000)],
                                     max_bytes=20000), FetchResponse)
    got = [r[0] for p in f.responses[0].partitions for r in decode_records(bytes(p.records))]
    assert got == [0, 0]  # one whole batch each; the second batch of each is cut short


async def test_fetch_long_poll_woken_by_produce(broker):
    import asyncio
    broker.create_topic("lp", 1)
    fetch = asyncio.ensure_future(call(broker, fetch_req(12, "lp", [(0, 0, 1 << 20)],
                                                         max_wait=10_000), FetchResponse))
    await asyncio.sleep(0.05)
    assert not fetch.done()
    t0 = time.monotonic()
    await call(broker, produce_req(9, "lp", [(0, simple_batch(1))]), ProduceResponse)
    f = await asyncio.wait_for(fetch, 5)
    assert time.monotonic() - t0 < 5
    assert len(decode_records(bytes(f.responses[0].partitions[0].records))) == 1


async def test_fetch_long_poll_rereads_only_the_partitions_that_had_appends(broker):
    """A woken long poll on 8 partitions reads again only the one with an append (the
    others' answers cannot have changed), and still answers every partition."""
    import asyncio
    topic = broker.create_topic("lp8", 8)
    reads = {i: 0 for i in range(8)}
    for p in topic.partitions:
        real = p.read_async

        async def counted(*args, _real=real, _i=p.partition, **kwargs):
            reads[_i] += 1  # observes, then runs the real read
            return await _real(*args, **kwargs)
        p.read_async = counted
    fetch = asyncio.ensure_future(call(broker, fetch_req(
        12, "lp8", [(i, 0, 1 << 20) for i in range(8)], max_wait=10_000, min_bytes=1),
        FetchResponse))
    await asyncio.sleep(0.05)
    assert not fetch.done() and reads == {i: 1 for i in range(8)}
    await call(broker, produce_req(9, "lp8", [(5, simple_batch(1))]), ProduceResponse)
    f = await asyncio.wait_for(fetch, 5)
    assert reads == {**{i: 1 for i in range(8)}, 5: 2}
    parts = {p.partition_index: p for p in f.responses[0].partitions}
    assert sorted(parts) == list(range(8))
    assert len(decode_records(bytes(parts[5].records))) == 1
    assert all(parts[i].high_watermark == 0 for i in range(8) if i != 5)


@pytest.mark.parametrize("version", range(1, 10))
async def test_list_offsets_all_versions(broker, version):
    # Each query asks its own partition (Kafka refuses a partition named twice), all five
    # holding the same batches.
    broker.create_topic("lo", 5)
    ts = 1_700_000_000_000
    for i in range(3):
        await call(broker, produce_req(9, "lo", [(p, simple_batch(2, ts=ts + 10 * i))
                                                 for p in range(5)]), ProduceResponse)
    Req = ListOffsetsRequest[version]
    T = Req.ListOffsetsTopic
    queries = [-1, -2, ts + 11, ts + 100] + ([-3] if version >= 7 else [])
    req = Req(replica_id=-1, isolation_level=0, topics=[T(name="lo", partitions=[
        T.ListOffsetsPartition(partition_index=p, timestamp=q, current_leader_epoch=-1)
        for p, q in enumerate(queries)])])
    r = await call(broker, req, ListOffsetsResponse)
    answers = [(p.error_code, p.offset, p.timestamp) for p in r.topics[0].partitions]
    want = [(0, 6, -1), (0, 0, -1), (0, 3, ts + 11), (0, -1, -1)]
    if version >= 7:
        want.append((0, 5, ts + 21))
    assert answers == want


async def test_list_offsets_partition_named_twice(broker):
    """Kafka answers INVALID_REQUEST at each mention of a partition named twice (its
    duplicatePartitions check), and the other partitions normally."""
    broker.create_topic("lodup", 2)
    Req = ListOffsetsRequest[7]
    T = Req.ListOffsetsTopic
    P = T.ListOffsetsPartition
    r = await call(broker, Req(replica_id=-1, isolation_level=0, topics=[
        T(name="lodup", partitions=[P(partition_index=0, timestamp=-1, current_leader_epoch=-1),
                                    P(partition_index=1, timestamp=-1, current_leader_epoch=-1)]),
        T(name="lodup", partitions=[P(partition_index=0, timestamp=-2,
                                      current_leader_epoch=-1)])]), ListOffsetsResponse)
    assert [[(p.partition_index, p.error_code, p.offset, p.leader_epoch) for p in t.partitions]
            for t in r.topics] == [[(0, 42, -1, -1), (1, 0, 0, 0)], [(0, 42, -1, -1)]]


async def test_fsync_before_ack_survives_a_roll_meanwhile(tmp_path):
    """acks=all with kafkalite.fsync.before.ack fsyncs in a worker thread; the segment it
    appended to may roll (closing its index descriptors) before that thread runs."""
    import asyncio
    b = Broker(BrokerConfig({"log.dirs": str(tmp_path), "kafkalite.fsync.before.ack": "true",
                             "listeners": "PLAINTEXT://127.0.0.1:19092"}))
    b.open()
    try:
        b.create_topic("durable", 2)
        p0 = b.logs.partition("durable", 0)
        tasks = [asyncio.ensure_future(call(b, produce_req(9, "durable", [(0, simple_batch(2)),
                                                                          (1, simple_batch(1))]),
                                            ProduceResponse, corr=i)) for i in range(20)]
        for _ in range(20):
            await asyncio.sleep(0)
            p0.roll()
        results = await asyncio.gather(*tasks)
        codes = {p.error_code for r in results for p in r.responses[0].partition_responses}
        assert codes == {0}
        assert p0.log_end_offset == 40 and len(p0.segments) == 2
    finally:
        b.close()


@pytest.mark.parametrize("name,version,ok", [
    ("kafka-python", "3.0.12", True), ("confluent-kafka-python", "2.16.1-rdkafka-2.12.0", True),
    ("apache-kafka-java", "3.9.0", True), ("x", "1", True),
    ("bad name!", "1.0", False), ("-lead", "1", False), ("trail.", "1", False),
    ("ok", "", False), ("ok", "1 0", False)])
async def test_api_versions_validates_client_software(broker, name, version, ok):
    """ApiVersionsRequest.isValid (v3+): INVALID_REQUEST and no list for a bad name. The
    error body stays at the request's version, as Kafka sends it (kafka-python's decoder
    reads error bodies as v0, so it is checked by hand here)."""
    for v in (3, 4):
        req = ApiVersionsRequest[v](client_software_name=name, client_software_version=version)
        body = b"".join(await broker.dispatch(bytes(request_bytes(req, 9))[4:]))[4:]
        if ok:
            assert ApiVersionsResponse.decode(body, version=v).error_code == 0
        else:  # error, empty compact array, throttle 0, no tagged fields
            assert body == b"\x00\x2a\x01\x00\x00\x00\x00\x00"
    r = await call(broker, ApiVersionsRequest[2](), ApiVersionsResponse)
    assert r.error_code == 0


@pytest.mark.parametrize("version,code", [(3, 76), (6, 76), (7, 0), (11, 0)])
async def test_zstd_needs_produce_v7(broker, version, code):
    broker.create_topic("z", 1)
    r = await call(broker, produce_req(version, "z", [(0, simple_batch(3, codec=4))]),
                   ProduceResponse)
    assert r.responses[0].partition_responses[0].error_code == code
    assert broker.logs.partition("z", 0).log_end_offset == (3 if code == 0 else 0)
    r = await call(broker, produce_req(version, "z", [(0, simple_batch(1, codec=3))]),
                   ProduceResponse)
    assert r.responses[0].partition_responses[0].error_code == 0


@pytest.mark.parametrize("codec", [0, 1, 4])
async def test_compacted_topic_refuses_keyless_records(broker, codec):
    from tests.helpers.kbatch import build_batch
    broker.create_topic("compacted", 1, {"cleanup.policy": "compact"})
    keyless = build_batch([(b"k", b"v" * 50, [], None), (None, b"v" * 50, [], None)], codec)
    r = await call(broker, produce_req(9, "compacted", [(0, keyless)]), ProduceResponse)
    assert r.responses[0].partition_responses[0].error_code == 87  # INVALID_RECORD
    keyed = build_batch([(b"k%d" % i, b"v" * 50, [], None) for i in range(3)], codec)
    r = await call(broker, produce_req(9, "compacted", [(0, keyed)]), ProduceResponse)
    assert r.responses[0].partition_responses[0].error_code == 0
    broker.create_topic("deleting", 1)
    r = await call(broker, produce_req(9, "deleting", [(0, keyless)]), ProduceResponse)
    assert r.responses[0].partition_responses[0].error_code == 0


async def test_list_offsets_over_an_undecodable_batch(broker):
    """A stored batch whose body does not decompress (accepted: Produce checks headers and
    CRC only) answers CORRUPT_MESSAGE for its partition instead of dropping the connection."""
    import crc32c
    import struct
    broker.create_topic("bad", 2)
    b = bytearray(simple_batch(1, size=40))
    b[22] = (b[22] & 0xF8) | 2  # claims snappy; the payload is not
    struct.pack_into(">I", b, 17, crc32c.crc32c(bytes(b[21:])))
    r = await call(broker, produce_req(9, "bad", [(p, bytes(b)) for p in range(2)]),
                   ProduceResponse)
    assert [p.error_code for p in r.responses[0].partition_responses] == [0, 0]
    Req = ListOffsetsRequest[7]
    T = Req.ListOffsetsTopic
    r = await call(broker, Req(replica_id=-1, isolation_level=0, topics=[T(name="bad", partitions=[
        T.ListOffsetsPartition(partition_index=p, timestamp=ts, current_leader_epoch=-1)
        for p, ts in enumerate((1, -1))])]), ListOffsetsResponse)
    assert [(p.error_code, p.offset) for p in r.topics[0].partitions] == [(2, -1), (0, 1)]
