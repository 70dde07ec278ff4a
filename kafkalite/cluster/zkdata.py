# The znodes of Kafka's ZooKeeper layout (Kafka 3.x ZooKeeper mode, kafka.zk.ZkData): paths and
# pure encode/decode, no I/O. Encodings are byte-for-byte what Kafka 3.8 writes, so a kafkalite
# cluster and Kafka's own tools (zookeeper-shell, a Kafka broker on the same chroot) read each
# other's znodes. Kafka builds most payloads from Scala hash maps and serialises them with
# Jackson, so its key order is the maps' iteration order: _scala_mutable_order and
# _scala_immutable_order reproduce it (readers must not depend on it; byte equality makes
# golden tests and diffs against a real Kafka's znodes exact).
#
# The znode's stat.version is part of the state: a partition state's version is its partition
# epoch, /controller_epoch's version is the controller fence; they are not in the payloads.
from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping

MATCH_ANY_VERSION = -1  # ZooKeeper's "any version" in a conditional write
UNKNOWN_VERSION = -2  # Kafka's "no such znode" version
INITIAL_CONTROLLER_EPOCH = 0
INITIAL_CONTROLLER_EPOCH_ZK_VERSION = 0

CLUSTER_ID = "/cluster/id"
CONTROLLER = "/controller"
CONTROLLER_EPOCH = "/controller_epoch"
BROKER_IDS = "/brokers/ids"
TOPICS = "/brokers/topics"
BROKER_SEQID = "/brokers/seqid"
CONFIG_CHANGES = "/config/changes"
CONFIG_CHANGE_PREFIX = "config_change_"
DELETE_TOPICS = "/admin/delete_topics"
PREFERRED_REPLICA_ELECTION = "/admin/preferred_replica_election"
REASSIGN_PARTITIONS = "/admin/reassign_partitions"  # the pre-KIP-455 way to reassign
ISR_CHANGE_NOTIFICATION = "/isr_change_notification"
ISR_CHANGE_PREFIX = "isr_change_"
LOG_DIR_EVENT_NOTIFICATION = "/log_dir_event_notification"
PRODUCER_ID_BLOCK = "/latest_producer_id_block"
FEATURE = "/feature"
CONFIG_TYPES = ("topics", "clients", "users", "brokers", "ips")

# The persistent paths a Kafka broker creates at startup (ZkData.PersistentZkPaths)
PERSISTENT_PATHS: tuple[str, ...] = (
    "/consumers", BROKER_IDS, TOPICS, CONFIG_CHANGES, DELETE_TOPICS, BROKER_SEQID,
    ISR_CHANGE_NOTIFICATION, PRODUCER_ID_BLOCK, LOG_DIR_EVENT_NOTIFICATION,
    *(f"/config/{t}" for t in CONFIG_TYPES))

LEADER_NONE = -1  # a partition state's leader when the partition is offline
RECOVERED, RECOVERING = 0, 1  # LeaderRecoveryState (KIP-704)


def broker_path(broker_id: int) -> str:
    return f"{BROKER_IDS}/{broker_id}"


def topic_path(topic: str) -> str:
    return f"{TOPICS}/{topic}"


def partition_state_path(topic: str, partition: int) -> str:
    return f"{TOPICS}/{topic}/partitions/{partition}/state"


def topic_config_path(topic: str) -> str:
    return f"/config/topics/{topic}"


DEFAULT_ENTITY = "<default>"  # ConfigEntityName.Default: the cluster-wide broker defaults


def entity_config_path(entity_type: str, name: str) -> str:
    """/config/<type>/<name>: an entity's dynamic configs, e.g. ("brokers", "<default>")."""
    return f"/config/{entity_type}/{name}"


def delete_topic_path(topic: str) -> str:
    return f"{DELETE_TOPICS}/{topic}"


# --- Kafka's key orders -------------------------------------------------------------------

def _java_hash(s: str) -> int:
    """java.lang.String.hashCode as a signed 32-bit int (UTF-16 code units)."""
    units = s.encode("utf-16-be")
    h = 0
    for i in range(0, len(units), 2):
        h = (31 * h + (units[i] << 8 | units[i + 1])) & 0xFFFFFFFF
    return _i32(h)


def _i32(x: int) -> int:
    x &= 0xFFFFFFFF
    return x - (1 << 32) if x & 0x80000000 else x


def _scala_mutable_order(keys: list[str], known_size: int) -> list[str]:
    """Iteration order of a Scala 2.13 mutable.HashMap built from `known_size` entries and then
    given the rest of `keys` (in order): buckets ascending, within one by (signed) hash."""
    def table_size_for(capacity: int) -> int:  # Integer.highestOneBit(max(c - 1, 4) * 2)
        return min(1 << ((max(capacity - 1, 4) * 2).bit_length() - 1), 1 << 30)
    size = table_size_for(int((known_size + 1) / 0.75) if known_size > 0 else 16)
    threshold = int(size * 0.75)
    for count in range(len(keys)):
        if count + 1 >= threshold:  # put0 grows before it inserts
            size *= 2
            threshold = int(size * 0.75)
    improved = {k: _i32(_java_hash(k) ^ ((_java_hash(k) & 0xFFFFFFFF) >> 16)) for k in keys}
    return sorted(keys, key=lambda k: (improved[k] & (size - 1), improved[k]))


def _scala_immutable_order(keys: list[str]) -> list[str]:
    """Iteration order of a Scala 2.13 immutable Map of `keys` (inserted in order): up to 4
    keep insertion order (Map1..Map4); more make a CHAMP HashMap, whose nodes list their own
    entries (by 5-bit hash fragment) before their sub-nodes."""
    if len(keys) <= 4:
        return list(keys)

    def improve(h: int) -> int:  # scala.util.hashing.Hashing.improve
        h = _i32(h + ~_i32(h << 9))
        h = _i32(h ^ ((h & 0xFFFFFFFF) >> 14))
        h = _i32(h + _i32(h << 4))
        return (h ^ ((h & 0xFFFFFFFF) >> 10)) & 0xFFFFFFFF

    def walk(group: list[tuple[str, int]], shift: int) -> list[str]:
        by_frag: dict[int, list[tuple[str, int]]] = {}
        for k, h in group:
            by_frag.setdefault((h >> shift) & 31, []).append((k, h))
        alone = [g[0][0] for f, g in sorted(by_frag.items()) if len(g) == 1]
        nested = [walk(g, shift + 5) for f, g in sorted(by_frag.items()) if len(g) > 1]
        return alone + [k for sub in nested for k in sub]
    return walk([(k, improve(_java_hash(k))) for k in keys], 0)


def _ordered(d: Mapping[str, Any], order: list[str]) -> dict[str, Any]:
    return {k: d[k] for k in order}


_LOWER_ESCAPE = re.compile(r"\\u([0-9a-f]{4})")


def _json(obj: Any) -> bytes:
    """Jackson's compact form: no spaces, raw UTF-8, upper-case hex in \\u escapes."""
    text = json.dumps(obj, separators=(",", ":"), ensure_ascii=False)
    return _LOWER_ESCAPE.sub(lambda m: "\\u" + m.group(1).upper(), text).encode()


def _parse(data: bytes) -> dict[str, Any]:
    obj = json.loads(data.decode())
    if not isinstance(obj, dict):
        raise ValueError(f"a znode's JSON must be an object: {data[:200]!r}")
    return obj


# --- znodes -------------------------------------------------------------------------------

def encode_cluster_id(cluster_id: str) -> bytes:
    return _json({"version": "1", "id": cluster_id})  # "1" a string, as Kafka writes it


def decode_cluster_id(data: bytes) -> str:
    return str(_parse(data)["id"])


def encode_controller_epoch(epoch: int) -> bytes:
    return str(epoch).encode()


def decode_controller_epoch(data: bytes) -> int:
    return int(data.decode())


@dataclass(frozen=True)
class ControllerRegistration:
    """/controller (ephemeral): who the controller is."""
    broker_id: int
    timestamp_ms: int
    kraft_controller_epoch: int = -1

    def encode(self) -> bytes:
        return _json({"version": 2, "brokerid": self.broker_id,
                      "timestamp": str(self.timestamp_ms),
                      "kraftControllerEpoch": self.kraft_controller_epoch})

    @classmethod
    def decode(cls, data: bytes) -> "ControllerRegistration":
        d = _parse(data)
        return cls(int(d["brokerid"]), int(d.get("timestamp", -1)),
                   int(d.get("kraftControllerEpoch", -1)))


@dataclass(frozen=True)
class Endpoint:
    listener: str
    host: str
    port: int

    def connection_string(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{self.listener}://{host}:{self.port}"

    @classmethod
    def parse(cls, text: str) -> "Endpoint":
        m = re.fullmatch(r"([^:]+)://\[?([^\]]*?)\]?:(-?\d+)", text)
        if m is None:
            raise ValueError(f"not an endpoint: {text!r}")
        return cls(m.group(1), m.group(2), int(m.group(3)))


@dataclass(frozen=True)
class BrokerRegistration:
    """/brokers/ids/<id> (ephemeral), JSON version 5; the broker epoch is the znode's czxid."""
    broker_id: int
    endpoints: tuple[Endpoint, ...]
    security_protocols: Mapping[str, str]  # listener name -> security protocol
    timestamp_ms: int
    rack: str | None = None
    jmx_port: int = -1
    features: Mapping[str, Mapping[str, int]] = field(default_factory=dict)
    version: int = 5

    def plaintext(self) -> Endpoint | None:
        """The first PLAINTEXT endpoint: Kafka's top-level host and port, for old clients."""
        return next((e for e in self.endpoints
                     if self.security_protocols.get(e.listener) == "PLAINTEXT"), None)

    def encode(self) -> bytes:
        plain = self.plaintext()
        d: dict[str, Any] = {
            "version": self.version, "host": plain.host if plain else None,
            "port": plain.port if plain else -1,
            "endpoints": [e.connection_string() for e in self.endpoints],
            "jmx_port": self.jmx_port, "timestamp": str(self.timestamp_ms)}
        if self.rack is not None:
            d["rack"] = self.rack
        protocols = {e.listener: self.security_protocols[e.listener] for e in self.endpoints}
        d["listener_security_protocol_map"] = _ordered(
            protocols, _scala_immutable_order(list(protocols)))
        d["features"] = {name: dict(v) for name, v in self.features.items()}
        return _json(_ordered(d, _scala_mutable_order(list(d), 6)))

    @classmethod
    def decode(cls, broker_id: int, data: bytes) -> "BrokerRegistration":
        d = _parse(data)
        protocols = dict(d.get("listener_security_protocol_map")
                         or {"PLAINTEXT": "PLAINTEXT", "SSL": "SSL", "SASL_PLAINTEXT":
                             "SASL_PLAINTEXT", "SASL_SSL": "SASL_SSL"})
        if int(d["version"]) == 1:
            endpoints: tuple[Endpoint, ...] = (Endpoint("PLAINTEXT", d["host"], int(d["port"])),)
        else:
            endpoints = tuple(Endpoint.parse(e) for e in d["endpoints"])
        return cls(broker_id, endpoints, protocols, int(d.get("timestamp", -1)), d.get("rack"),
                   int(d.get("jmx_port", -1)), dict(d.get("features") or {}), int(d["version"]))


@dataclass(frozen=True)
class TopicAssignment:
    """/brokers/topics/<topic>: replicas per partition (JSON version 3), with a KIP-455
    reassignment in progress in adding/removing."""
    partitions: Mapping[int, tuple[int, ...]]
    topic_id: str | None = None  # Kafka's base64 Uuid string
    adding: Mapping[int, tuple[int, ...]] = field(default_factory=dict)
    removing: Mapping[int, tuple[int, ...]] = field(default_factory=dict)

    def encode(self) -> bytes:
        def replicas(m: Mapping[int, Iterable[int]], keep_empty: bool) -> dict[str, list[int]]:
            out = {str(p): list(r) for p, r in sorted(m.items()) if keep_empty or list(r)}
            return _ordered(out, _scala_mutable_order(list(out), 0))
        d: dict[str, Any] = {"version": 3, "partitions": replicas(self.partitions, True),
                             "adding_replicas": replicas(self.adding, False),
                             "removing_replicas": replicas(self.removing, False)}
        if self.topic_id is not None:
            d["topic_id"] = self.topic_id
        return _json(_ordered(d, _scala_mutable_order(list(d), 4)))

    @classmethod
    def decode(cls, data: bytes) -> "TopicAssignment":
        d = _parse(data)

        def replicas(key: str) -> dict[int, tuple[int, ...]]:
            return {int(p): tuple(int(b) for b in r) for p, r in (d.get(key) or {}).items()}
        return cls(replicas("partitions"), d.get("topic_id"), replicas("adding_replicas"),
                   replicas("removing_replicas"))


@dataclass(frozen=True)
class PartitionState:
    """/brokers/topics/<t>/partitions/<p>/state: LeaderAndIsr plus the controller epoch that
    wrote it. Its znode version is the partition epoch, the basis of the conditional write."""
    leader: int
    leader_epoch: int
    isr: tuple[int, ...]
    controller_epoch: int
    leader_recovery_state: int = RECOVERED

    def encode(self) -> bytes:
        d: dict[str, Any] = {"version": 1, "leader": self.leader,
                             "leader_epoch": self.leader_epoch,
                             "controller_epoch": self.controller_epoch, "isr": list(self.isr)}
        if self.leader_recovery_state != RECOVERED:
            d["leader_recovery_state"] = self.leader_recovery_state
        return _json(_ordered(d, _scala_immutable_order(list(d))))

    @classmethod
    def decode(cls, data: bytes) -> "PartitionState":
        d = _parse(data)
        return cls(int(d["leader"]), int(d["leader_epoch"]), tuple(int(b) for b in d["isr"]),
                   int(d["controller_epoch"]), int(d.get("leader_recovery_state", RECOVERED)))


def encode_topic_config(config: Mapping[str, str]) -> bytes:
    """/config/topics/<t> (and any /config/<type>/<name>, the same form). Kafka's key order here is a java.util.Properties' (a hash table):
    readers treat it as a map, so keys are written in the order given."""
    return _json({"version": 1, "config": dict(config)})


def decode_topic_config(data: bytes | None) -> dict[str, str]:
    if not data:
        return {}
    return {k: str(v) for k, v in (_parse(data).get("config") or {}).items()}


def encode_config_change(entity_path: str) -> bytes:
    """/config/changes/config_change_<seq> (persistent sequential), e.g. "topics/<t>"."""
    return _json({"version": 2, "entity_path": entity_path})


def decode_config_change(data: bytes) -> str:
    return str(_parse(data)["entity_path"])


def _encode_partitions(version: int, partitions: Iterable[tuple[str, int]]) -> bytes:
    # Kafka writes a set: the order carries nothing
    return _json({"version": version, "partitions": [{"topic": t, "partition": p}
                                                     for t, p in partitions]})


def _decode_partitions(data: bytes) -> set[tuple[str, int]]:
    return {(str(e["topic"]), int(e["partition"])) for e in _parse(data).get("partitions", [])}


def encode_isr_change(partitions: Iterable[tuple[str, int]]) -> bytes:
    """/isr_change_notification/isr_change_<seq>: partitions whose ISR a leader changed."""
    return _encode_partitions(1, partitions)


def decode_isr_change(data: bytes) -> set[tuple[str, int]]:
    return _decode_partitions(data)


def encode_preferred_replica_election(partitions: Iterable[tuple[str, int]]) -> bytes:
    return _encode_partitions(1, partitions)


def decode_preferred_replica_election(data: bytes) -> set[tuple[str, int]]:
    return _decode_partitions(data)


def encode_reassign_partitions(targets: Mapping[tuple[str, int], Iterable[int]]) -> bytes:
    """/admin/reassign_partitions (ReassignPartitionsZNode): target replicas by partition."""
    return _json({"version": 1, "partitions": [
        {"topic": t, "partition": p, "replicas": list(r)} for (t, p), r in targets.items()]})


def decode_reassign_partitions(data: bytes) -> dict[tuple[str, int], tuple[int, ...]]:
    return {(str(e["topic"]), int(e["partition"])): tuple(int(b) for b in e["replicas"])
            for e in _parse(data).get("partitions") or ()}


@dataclass(frozen=True)
class ProducerIdBlock:
    """/latest_producer_id_block: the last block of producer ids handed out (inclusive)."""
    broker: int
    block_start: int
    block_end: int

    @property
    def size(self) -> int:
        return self.block_end - self.block_start + 1

    def encode(self) -> bytes:
        return _json({"version": 1, "broker": self.broker,
                      "block_start": str(self.block_start), "block_end": str(self.block_end)})

    @classmethod
    def decode(cls, data: bytes) -> "ProducerIdBlock":
        d = _parse(data)
        return cls(int(d["broker"]), int(d["block_start"]), int(d["block_end"]))


@dataclass(frozen=True)
class FeatureNode:
    """/feature (KIP-584), JSON version 2: finalized feature -> max version level."""
    features: Mapping[str, int]
    status: int = 1  # 1 enabled, 0 disabled
    version: int = 2

    def encode(self) -> bytes:
        feats = {name: {"max_version_level": v} for name, v in self.features.items()}
        d = {"version": self.version, "status": self.status, "features": feats}
        return _json(_ordered(d, _scala_mutable_order(list(d), 3)))

    @classmethod
    def decode(cls, data: bytes) -> "FeatureNode":
        d = _parse(data)
        feats = {k: int(v["max_version_level"]) for k, v in (d.get("features") or {}).items()}
        return cls(feats, int(d["status"]), int(d["version"]))

