# Client quotas (48/49) and their enforcement, against kafkalite and the real Kafka 3.8
# (`any_broker`): the expectations below are Kafka's own answers, field by field, in its
# order. Entity names carry a per-run suffix (the real Kafka is shared by the session) and
# defaults set here are removed again.
from __future__ import annotations

import time
import uuid

from kafka.protocol.admin.client_quotas import (AlterClientQuotasRequest,
                                                DescribeClientQuotasRequest)
from kafka.protocol.producer import ProduceRequest

from tests.helpers.kbatch import (_response_cls, call, connect, decode_response, recv_frame,
                                  request_bytes, simple_batch)
from tests.helpers.real_kafka import create_topic, eventually

A = AlterClientQuotasRequest
D = DescribeClientQuotasRequest
INVALID_REQUEST, UNSUPPORTED_VERSION = 42, 35


def alter(bs: str, entries, validate_only: bool = False) -> list:
    E = A.EntryData
    req = A(entries=[E(entity=[E.EntityData(entity_type=t, entity_name=n) for t, n in ent],
                       ops=[E.OpData(key=k, value=v, remove=rm) for k, v, rm in ops])
                     for ent, ops in entries], validate_only=validate_only, version=1)
    with connect(bs) as s:
        r = call(s, req)
    return [(e.error_code, e.error_message, [(x.entity_type, x.entity_name) for x in e.entity])
            for e in r.entries]


def describe(bs: str, comps, strict: bool = False):
    req = D(components=[D.ComponentData(entity_type=t, match_type=m, match=n)
                        for t, m, n in comps], strict=strict, version=1)
    with connect(bs) as s:
        r = call(s, req)
    entries = None if r.entries is None else [
        ([(x.entity_type, x.entity_name) for x in e.entity], [(x.key, x.value) for x in e.values])
        for e in r.entries]
    return r.error_code, r.error_message, entries


def test_alter_validation_as_kafka(any_broker):
    bs = any_broker
    x = uuid.uuid4().hex[:8]
    c, u = f"c-{x}", f"u-{x}"
    cases = [
        ([(("client-id", c),), [("bogus", 1, False)]], "Invalid configuration key bogus"),
        ([(("client-id", c),), [("producer_byte_rate", 1.5, False)]],
         "producer_byte_rate cannot be a fractional value."),
        ([(("client-id", c),), [("connection_creation_rate", 1, False)]],
         "Invalid configuration key connection_creation_rate"),
        ([(("ip", "1.2.3.4"),), [("producer_byte_rate", 1, False)]],
         "Invalid configuration key producer_byte_rate"),
        ([(("ip", "not an ip"),), [("connection_creation_rate", 1, False)]],
         "not an ip is not a valid IP or resolvable host."),
        ([(("bogus", u),), [("consumer_byte_rate", 1, False)]],
         "Unhandled client quota entity type: bogus"),
        ([(), [("consumer_byte_rate", 1, False)]], "Invalid empty client quota entity"),
        ([(("user", ""),), [("consumer_byte_rate", 1, False)]], "Empty user not supported"),
        ([(("user", u),), [("consumer_byte_rate", -5, False)]],
         "Quota consumer_byte_rate must be greater than 0"),
        ([(("user", u),), [("consumer_byte_rate", 1, False), ("consumer_byte_rate", 2, False)]],
         f"Ignoring duplicate entity ClientQuotaEntity(entries={{user={u}}})"),
    ]
    for (entity, ops), message in cases:
        got = alter(bs, [(entity, ops)])
        assert got == [(INVALID_REQUEST, message, list(entity))], (entity, ops)
    # ip with user: Kafka's message (its missing space too), entity parts in its map order.
    assert alter(bs, [((("ip", "1.2.3.4"), ("user", u)), [("connection_creation_rate", 1,
                                                             False)])]) == [
        (INVALID_REQUEST, "Invalid quota entity combination, IP entity shouldnot be combined "
         "with User or ClientId", [("user", u), ("ip", "1.2.3.4")])]
    # validate_only answers success and changes nothing.
    assert alter(bs, [((("user", u),), [("consumer_byte_rate", 2048, False)])],
                 validate_only=True) == [(0, None, [("user", u)])]
    assert describe(bs, [("user", 0, u)]) == (0, "", [])
    # An entity named twice: the first is applied, the answer is one error.
    both = (("user", u), ("client-id", c))
    assert alter(bs, [(both, [("producer_byte_rate", 7, False)]),
                      (both, [("producer_byte_rate", 8, False)])]) == [
        (INVALID_REQUEST, f"Ignoring duplicate entity ClientQuotaEntity(entries="
         f"{{client-id={c}, user={u}}})", [("client-id", c), ("user", u)])]
    seen = eventually(lambda: describe(bs, [("user", 0, u)]), lambda r: r[2])
    assert seen == (0, "", [([("client-id", c), ("user", u)], [("producer_byte_rate", 7.0)])])
    # Removing every value removes the entity.
    assert alter(bs, [(both, [("producer_byte_rate", 0, True)])]) == [
        (0, None, [("client-id", c), ("user", u)])]
    assert eventually(lambda: describe(bs, [("user", 0, u)]), lambda r: not r[2]) == (0, "", [])


def test_describe_filters_as_kafka(any_broker):
    bs = any_broker
    x = uuid.uuid4().hex[:8]
    u, c = f"u-{x}", f"c-{x}"
    setup = [((("user", u),), [("consumer_byte_rate", 2048, False)]),
             ((("user", u), ("client-id", None)), [("request_percentage", 50, False)]),
             ((("user", u), ("client-id", c)), [("producer_byte_rate", 4096, False),
                                                ("consumer_byte_rate", 1024, False)])]
    assert [r[0] for r in alter(bs, setup)] == [0, 0, 0]
    try:
        mine = lambda r: [e for e in r[2] if ("user", u) in e[0]]  # noqa: E731
        full = eventually(lambda: describe(bs, [("user", 0, u)]), lambda r: len(r[2]) == 3)
        assert full[:2] == (0, "") and sorted(map(str, full[2])) == sorted(map(str, [
            ([("user", u)], [("consumer_byte_rate", 2048.0)]),
            ([("client-id", None), ("user", u)], [("request_percentage", 50.0)]),
            ([("client-id", c), ("user", u)], [("consumer_byte_rate", 1024.0),
                                               ("producer_byte_rate", 4096.0)])]))
        # Values inside an entry come in Kafka's order (its records', from a HashMap).
        assert [e for e in full[2] if ("client-id", c) in e[0]][0][1] == [
            ("consumer_byte_rate", 1024.0), ("producer_byte_rate", 4096.0)]
        assert describe(bs, [("user", 0, u)], strict=True)[2] == [
            ([("user", u)], [("consumer_byte_rate", 2048.0)])]
        assert describe(bs, [("user", 0, u), ("client-id", 1, None)])[2] == [
            ([("client-id", None), ("user", u)], [("request_percentage", 50.0)])]
        assert len(describe(bs, [("user", 0, u), ("client-id", 2, None)])[2]) == 2
        assert len(mine(describe(bs, [("client-id", 2, None)]))) == 2
        assert len(mine(describe(bs, [("user", 2, None)]))) == 3
        assert mine(describe(bs, [("user", 2, None)], strict=True)) == [
            ([("user", u)], [("consumer_byte_rate", 2048.0)])]
        refused = [
            ([("user", 0, None)], INVALID_REQUEST,
             "Request specified MATCH_TYPE_EXACT, but set match string to null."),
            ([("user", 1, "x")], INVALID_REQUEST,
             "Request specified MATCH_TYPE_DEFAULT, but also specified a match string."),
            ([("user", 2, "x")], INVALID_REQUEST,
             "Request specified MATCH_TYPE_SPECIFIED, but also specified a match string."),
            ([("user", 3, None)], INVALID_REQUEST, "Unknown match type 3"),
            ([("bogus", 2, None)], UNSUPPORTED_VERSION, "Unsupported entity type bogus"),
            ([("", 2, None)], INVALID_REQUEST, "Invalid empty entity type."),
            ([("user", 2, None), ("user", 2, None)], INVALID_REQUEST,
             "Entity type user cannot appear more than once in the filter."),
            ([("ip", 2, None), ("user", 2, None)], INVALID_REQUEST,
             "Invalid entity filter component combination. IP filter component should not "
             "be used with user or clientId filter component."),
        ]
        for comps, code, message in refused:
            assert describe(bs, comps) == (code, message, None), comps
    finally:
        alter(bs, [(ent, [(k, 0, True) for k, _, _ in ops]) for ent, ops in setup])


def _produce_flat_out(bs: str, topic: str, client_id: str, seconds: float):
    """Produce 16 KiB batches back to back on one connection, ignoring throttle_time_ms (the
    broker's mute is what holds this client); returns (bytes, elapsed, throttle times)."""
    Req = ProduceRequest[9]
    T = Req.TopicProduceData
    batch = simple_batch(16, size=1000)
    req = Req(transactional_id=None, acks=1, timeout_ms=5000, topic_data=[
        T(name=topic, partition_data=[T.PartitionProduceData(index=0, records=batch)])])
    sent, throttles, corr = 0, [], 0
    t0 = time.monotonic()
    with connect(bs, timeout=30) as s:
        while time.monotonic() - t0 < seconds and corr < 2000:
            corr += 1
            s.sendall(request_bytes(req, corr, client_id=client_id))
            _, r = decode_response(_response_cls(req), 9, recv_frame(s))
            assert r.responses[0].partition_responses[0].error_code == 0
            sent += len(batch)
            throttles.append(r.throttle_time_ms)
    return sent, time.monotonic() - t0, throttles


def test_producer_byte_rate_is_enforced_as_kafka(any_broker):
    """producer_byte_rate=100 KiB/s: Kafka lets a new client burst to quota x 10 s (its rate
    is measured over at least ten 1 s windows), then throttles and mutes it. Measured here:
    kafkalite 334 KiB/s over 3.5 s, first throttled at request 63, longest throttle 1159 ms;
    Kafka 341 KiB/s, request 63, 1159 ms."""
    bs = any_broker
    x = uuid.uuid4().hex[:8]
    topic, client = f"quota-{x}", f"c1-{x}"
    quota = 100 * 1024
    create_topic(bs, topic)
    assert alter(bs, [((("client-id", client),), [("producer_byte_rate", quota, False)])]) \
        == [(0, None, [("client-id", client)])]
    eventually(lambda: describe(bs, [("client-id", 0, client)]), lambda r: r[2])
    time.sleep(1)  # Kafka's broker applies the quota shortly after the controller commits
    try:
        sent, elapsed, throttles = _produce_flat_out(bs, topic, client, 3.0)
    finally:
        alter(bs, [((("client-id", client),), [("producer_byte_rate", 0, True)])])
    first = next((i for i, t in enumerate(throttles) if t), None)
    assert first is not None and 55 <= first <= 70, throttles  # ~quota x 10 s recorded
    # Held: never more than the burst plus the quota for the time spent, one batch of slack.
    assert quota * 10 <= sent <= quota * (10 + elapsed) + 2 * 16 * 1024, (sent, elapsed)
    assert 500 <= max(throttles) <= 2000, throttles
