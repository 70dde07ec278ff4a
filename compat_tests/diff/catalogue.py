# The catalogue of diff cases: each sends the same request(s) to kafkalite and to Apache Kafka
# and returns the answer to compare (test_diff.py runs it at every version of its API key that
# both brokers advertise and kafka-python can encode). Beyond one happy-path case per API key,
# the edge cases Kafka clients meet: unknown topics and partitions, null and empty arrays,
# out-of-range offsets, invalid configs, duplicate names, wrong generations and member ids.
#
# A case whose answers differ on purpose carries `deliberate`: the reason, written here and
# nowhere else, and the test then requires the difference to persist (so fixing it flips the
# test and the mark is removed). COMPATIBILITY.md lists these cases.
#
# Cases that change state (create, delete, commit) use names unique to the case and version,
# identical on both brokers, so each broker sees exactly the same history.
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from compat_tests.diff.conftest import DATA_TOPIC, FIXED_TS, RECORDS, TWO_TOPIC, Side, produce


@dataclass(frozen=True)
class Case:
    name: str
    api_key: int
    run: Callable[[Side, int], Any]
    deliberate: str | None = None
    versions: Callable[[int], bool] = lambda v: True


CASES: list[Case] = []


def case(name: str, api_key: int, deliberate: str | None = None,
         versions: Callable[[int], bool] = lambda v: True):
    def register(fn: Callable[[Side, int], Any]) -> Callable[[Side, int], Any]:
        CASES.append(Case(name, api_key, fn, deliberate, versions))
        return fn
    return register


def unique(name: str, v: int) -> str:
    return f"diff-{name}-v{v}"


def sort_by(items: list, key: str) -> list:
    """Kafka answers some arrays in its hash maps' order (partitions in Metadata, results of
    CreatePartitions, DeleteGroups, OffsetDelete), kafkalite in request order; clients key
    these by name or index, so such cases compare them sorted."""
    items.sort(key=lambda x: getattr(x, key))
    return items


# -- Produce (0) ---------------------------------------------------------------------------

@case("produce-ok", 0, versions=lambda v: v >= 3)
def _(s: Side, v: int) -> Any:
    topic = unique("produce", v)
    from compat_tests.diff.conftest import create_topic
    create_topic(s, topic)
    return produce(s, topic, 0, RECORDS, v)


@case("produce-v0-2", 0, versions=lambda v: v < 3,
      deliberate="Produce v0-2 are advertised for librdkafka (KAFKA-18659) but answered "
                 "UNSUPPORTED_VERSION, as Kafka 4.0 does; Kafka 3.8 still serves them")
def _(s: Side, v: int) -> Any:
    topic = unique("produce-old", v)
    from compat_tests.diff.conftest import create_topic
    create_topic(s, topic)
    try:
        return produce(s, topic, 0, RECORDS, v)
    except Exception as e:  # a closed connection is the answer
        return {"closed": type(e).__name__}


@case("produce-unknown-topic", 0, versions=lambda v: v >= 3)
def _(s: Side, v: int) -> Any:
    return produce(s, "diff-no-such-topic", 0, RECORDS, v)


@case("produce-unknown-partition", 0, versions=lambda v: v >= 3)
def _(s: Side, v: int) -> Any:
    return produce(s, DATA_TOPIC, 7, RECORDS, v)


# -- Fetch (1) -----------------------------------------------------------------------------

def fetch(s: Side, v: int, topic: str, partition: int, offset: int) -> Any:
    return s.call(1, v, {
        "replica_id": -1, "max_wait_ms": 0, "min_bytes": 1, "max_bytes": 1 << 20,
        "isolation_level": 0, "session_id": 0, "session_epoch": -1,
        "topics": [{"topic": topic, "topic_id": s.topic_ids.get(topic), "partitions": [
            {"partition": partition, "current_leader_epoch": -1, "fetch_offset": offset,
             "last_fetched_epoch": -1, "log_start_offset": -1,
             "partition_max_bytes": 1 << 20}]}],
        "forgotten_topics_data": [], "rack_id": ""})


@case("fetch-records", 1)
def _(s: Side, v: int) -> Any:
    return fetch(s, v, DATA_TOPIC, 0, 0)


@case("fetch-offset-out-of-range", 1)
def _(s: Side, v: int) -> Any:
    return fetch(s, v, DATA_TOPIC, 0, 100)


@case("fetch-unknown-partition", 1)
def _(s: Side, v: int) -> Any:
    return fetch(s, v, DATA_TOPIC, 9, 0)


@case("fetch-unknown-topic", 1, versions=lambda v: v < 13)
def _(s: Side, v: int) -> Any:
    return fetch(s, v, "diff-no-such-topic", 0, 0)


@case("fetch-empty", 1)
def _(s: Side, v: int) -> Any:
    return s.call(1, v, {"replica_id": -1, "max_wait_ms": 0, "min_bytes": 1,
                         "max_bytes": 1 << 20, "isolation_level": 0, "session_id": 0,
                         "session_epoch": -1, "topics": [], "forgotten_topics_data": [],
                         "rack_id": ""})


# -- ListOffsets (2) -----------------------------------------------------------------------

def list_offsets(s: Side, v: int, topic: str, partition: int, ts: int) -> Any:
    return s.call(2, v, {"replica_id": -1, "isolation_level": 0, "topics": [
        {"name": topic, "partitions": [{"partition_index": partition,
                                        "current_leader_epoch": -1, "timestamp": ts,
                                        "max_num_offsets": 1}]}]})


for _ts, _label in ((-1, "latest"), (-2, "earliest"), (-3, "max-timestamp"),
                    (FIXED_TS, "by-time"), (4_000_000_000_000, "future-time")):
    case(f"list-offsets-{_label}", 2,
         versions=(lambda v: v >= 7) if _ts == -3 else (lambda v: True))(
        lambda s, v, _ts=_ts: list_offsets(s, v, DATA_TOPIC, 0, _ts))


@case("list-offsets-unknown-partition", 2)
def _(s: Side, v: int) -> Any:
    return list_offsets(s, v, DATA_TOPIC, 5, -1)


@case("list-offsets-unknown-topic", 2)
def _(s: Side, v: int) -> Any:
    return list_offsets(s, v, "diff-no-such-topic", 0, -1)


# -- Metadata (3) --------------------------------------------------------------------------

def metadata(s: Side, v: int, topics: list[str] | None, auto: bool = False) -> Any:
    return s.call(3, v, {"topics": None if topics is None else [{"name": t} for t in topics],
                         "allow_auto_topic_creation": auto,
                         "include_cluster_authorized_operations": False,
                         "include_topic_authorized_operations": False})


@case("metadata-topics", 3)
def _(s: Side, v: int) -> Any:
    r = metadata(s, v, [TWO_TOPIC, DATA_TOPIC])
    for t in r.topics:
        sort_by(t.partitions, "partition_index")
    return r


@case("metadata-empty-list", 3, versions=lambda v: v >= 1)
def _(s: Side, v: int) -> Any:
    return metadata(s, v, [])


@case("metadata-unknown-topic", 3, versions=lambda v: v >= 4)
def _(s: Side, v: int) -> Any:
    return metadata(s, v, ["diff-no-such-topic"])


@case("metadata-invalid-name", 3, versions=lambda v: v >= 4)
def _(s: Side, v: int) -> Any:
    return metadata(s, v, ["bad name!"])


@case("metadata-duplicate-names", 3)
def _(s: Side, v: int) -> Any:
    return metadata(s, v, [DATA_TOPIC, DATA_TOPIC])


# -- ApiVersions (18) ----------------------------------------------------------------------

@case("api-versions", 18, deliberate="kafkalite advertises Kafka 4.0's ranges (KIP-896 "
      "removed the oldest versions; newer maxima such as Fetch 17) and only the keys it "
      "serves; Kafka 3.8 advertises 3.8's")
def _(s: Side, v: int) -> Any:
    return s.call(18, v, {"client_software_name": "diff", "client_software_version": "1"})


def raw_call(s: Side, data: bytes) -> dict:
    """Send a hand-made frame; the answer's body (after the correlation id), or how the
    connection ended."""
    from compat_tests.wire import ConnectionClosed
    with s.conn() as c:
        c.send_raw(data)
        try:
            return {"body": c.recv_frame()[4:]}
        except ConnectionClosed:
            return {"closed": True}


@case("api-versions-bad-version", 18, versions=lambda v: v == 0)
def _(s: Side, v: int) -> Any:
    # A v3 request (header v2, as clients send it) with the version rewritten to 99: Kafka
    # answers at v0 with UNSUPPORTED_VERSION and a list; here the error code and the keys
    # listed are compared (the ranges are the api-versions case).
    with s.conn() as c:
        data, _cid = c.encode(18, 3, {"client_software_name": "diff",
                                      "client_software_version": "1"})
    r = raw_call(s, data[:6] + (99).to_bytes(2, "big") + data[8:])
    body = r.get("body")
    if body is None:
        return r
    n = int.from_bytes(body[2:6], "big")
    return {"error_code": int.from_bytes(body[:2], "big"),
            "keys": [int.from_bytes(body[6 + 6 * i:8 + 6 * i], "big") for i in range(n)]}


@case("api-versions-bad-software-name", 18, versions=lambda v: v >= 3)
def _(s: Side, v: int) -> Any:
    with s.conn() as c:
        data, _cid = c.encode(18, v, {"client_software_name": "bad name!",
                                      "client_software_version": "1"})
    return raw_call(s, data)
