# Client quotas, as Kafka's ClientQuotaControlManager (storage and validation),
# ClientQuotasImage.describe (filters) and ClientQuotaManager (enforcement). Sans-I/O apart
# from persisting the configs (atomic_write under the data dir's .kafkalite/; in a ZooKeeper
# cluster they live in ZooKeeper instead, cluster/entity_configs.py); time comes from the
# injected clock.
#
# Entities are user / client-id (alone or together) or ip, each named or the default (None).
# A producer or consumer is held to the first of Kafka's eight user/client-id entities that
# sets the quota (user+client, user+default client, user, default user+client, default user+
# default client, default user, client, default client). The rate is shared by everything
# that entity's tags cover: a default entity gives each user / client-id its own rate.
# Without SASL every connection's user is ANONYMOUS, as in Kafka on a PLAINTEXT listener.
from __future__ import annotations

import ipaddress
import json
import os
from typing import Any, Iterable

from ..clock import Clock
from ..fileio import atomic_write
from ..wire.errors import ErrorCode, KafkaError
from ..javahash import hashmap_order, map_hash, string_hash
from .quota_rate import WINDOW_MS, WINDOWS, Rate, record_and_throttle, unrecord

USER, CLIENT_ID, IP = "user", "client-id", "ip"
PRODUCE, FETCH, REQUEST = "producer_byte_rate", "consumer_byte_rate", "request_percentage"
# QuotaConfigs: each key and its ConfigDef type (integral types refuse fractions).
CLIENT_KEYS = {PRODUCE: "LONG", FETCH: "LONG", REQUEST: "DOUBLE",
               "controller_mutation_rate": "DOUBLE"}
IP_KEYS = {"connection_creation_rate": "INT"}
_LIMITS = {"INT": 2**31 - 1, "LONG": 2**63 - 1}
ANONYMOUS = "ANONYMOUS"
EXACT, DEFAULT, SPECIFIED = 0, 1, 2
NANOS_TO_PERCENT_SECONDS = 100.0 / 1e9

Entity = tuple[tuple[str, str | None], ...]  # (type, name) pairs; None is the default


def entity_key(entity: Iterable[tuple[str, str | None]]) -> frozenset:
    return frozenset(entity)


def entity_order(entity: Iterable[tuple[str, str | None]],
                 initial: int | None = None) -> Entity:
    """The pairs in the order Kafka's HashMap<String, String> of an entity walks them."""
    return tuple(hashmap_order(list(entity), lambda kv: string_hash(kv[0]), initial))


def entity_hash(key: frozenset) -> int:
    """ClientQuotaEntity.hashCode: Objects.hash(entries), i.e. 31 + the map's hash."""
    return (31 + map_hash(key)) & 0xFFFFFFFF


def rebuilt(old: dict, changes: dict, key_hash) -> dict:
    """The map Kafka's image deltas (ClientQuotasDelta / ClientQuotaDelta.apply) build: a
    HashMap sized by the old map, fed the old entries in their order (changed or dropped as
    `changes` says; None drops) and then the new keys as the changes HashMap walks them."""
    new = {}
    for k, val in old.items():
        val = changes.get(k, val)
        if val is not None:
            new[k] = val
    for k in hashmap_order(list(changes), key_hash):
        if k not in new and changes[k] is not None:
            new[k] = changes[k]
    return {k: new[k] for k in hashmap_order(list(new), key_hash, len(old))}


def entity_text(entity: Entity) -> str:
    """ClientQuotaEntity.toString."""
    inner = ", ".join(f"{k}={'null' if v is None else v}" for k, v in entity)
    return f"ClientQuotaEntity(entries={{{inner}}})"


def _check_entity(entity: Entity) -> str | None:
    """Why Kafka's controller refuses this entity (INVALID_REQUEST), or None."""
    if not entity:
        return "Invalid empty client quota entity"
    for etype, name in entity:
        if etype not in (USER, CLIENT_ID, IP):
            return f"Unhandled client quota entity type: {etype}"
        if name == "":
            return f"Empty {etype} not supported"
    return None


def _keys_for(entity: Entity) -> tuple[dict[str, str] | None, str | None]:
    types = dict(entity)
    if IP in types:
        if len(types) > 1:
            # Kafka's message, missing space included.
            return None, ("Invalid quota entity combination, IP entity should"
                          "not be combined with User or ClientId")
        ip = types[IP]
        if ip is not None and not _is_ip(ip):
            return None, f"{ip} is not a valid IP or resolvable host."
        return IP_KEYS, None
    return CLIENT_KEYS, None


def _is_ip(text: str) -> bool:
    # Kafka also accepts a resolvable host name (InetAddress.getByName); kafkalite does no
    # DNS look-up on the event loop.
    try:
        ipaddress.ip_address(text)
    except ValueError:
        return False
    return True


def _check_value(key: str, kind: str, value: float) -> str | None:
    if value <= 0:
        return f"Quota {key} must be greater than 0"
    if kind in _LIMITS:
        if value > _LIMITS[kind]:
            return f"Proposed value for {key} is too large for a {kind}."
        if value != int(value):
            return f"{key} cannot be a fractional value."
    return None


class ClientQuotas:
    def __init__(self, state_dir: str | None, clock: Clock,
                 samples: int = WINDOWS, window_ms: int = WINDOW_MS):
        self.path = os.path.join(state_dir, "client-quotas.json") if state_dir else None
        self.clock = clock
        self.samples = samples
        self.window_ms = window_ms
        # entity key -> (entity in Kafka's order, {quota key: value})
        self.configs: dict[frozenset, tuple[Entity, dict[str, float]]] = {}
        self.rates: dict[tuple[str, str, str], Rate] = {}
        self._mutes: dict[str, int] = {}  # peer -> ms to mute after its response is sent

    # --- storage --------------------------------------------------------------------------

    def load(self) -> None:
        if self.path is None or not os.path.exists(self.path):
            return
        with open(self.path, "rb") as f:
            for item in json.loads(f.read()):
                entity = tuple((t, n) for t, n in item["entity"])
                self.configs[entity_key(entity)] = (entity, dict(item["quotas"]))

    def _save(self) -> None:
        if self.path is None:
            return
        data = [{"entity": [list(p) for p in e], "quotas": q} for e, q in self.configs.values()]
        os.makedirs(os.path.dirname(self.path), exist_ok=True)
        atomic_write(self.path, json.dumps(data, indent=1).encode())

    def alter(self, entries: list[tuple[Entity, list[tuple[str, float, bool]]]],
              validate_only: bool) -> list[tuple[Entity, int, str | None]]:
        """AlterClientQuotas: (entity as answered, error code, message) per distinct entity,
        in Kafka's result order. Entities arrive as the request's (type, name) pairs."""
        results, changed = self.plan(entries, validate_only)
        self.apply(changed)
        return results

    def plan(self, entries: list[tuple[Entity, list[tuple[str, float, bool]]]],
             validate_only: bool) -> tuple[list[tuple[Entity, int, str | None]], dict]:
        """alter's answer and its changes ({entity key: (entity, quotas) or None}) without
        applying them: in a cluster they go to ZooKeeper first."""
        results: dict[frozenset, tuple[Entity, int, str | None]] = {}
        order: list[frozenset] = []
        changed: dict[frozenset, tuple[Entity, dict[str, float]] | None] = {}
        for pairs, ops in entries:
            named = dict(pairs)  # a repeated type keeps its last name, as Kafka's map does
            entity = entity_order(named.items(), len(pairs))
            key = entity_key(entity)
            if key not in results:
                order.append(key)
            dup = len({k for k, _, _ in ops}) != len(ops)
            if dup or key in results:
                results[key] = (entity, ErrorCode.invalid_request,
                                f"Ignoring duplicate entity {entity_text(entity)}")
                continue
            error = self._alter_one(entity, ops, validate_only, changed)
            results[key] = (entity, ErrorCode.invalid_request if error else ErrorCode.none,
                            error)
        return [results[k] for k in hashmap_order(order, entity_hash)], changed

    def apply(self, changed: dict) -> None:
        if changed:
            self.configs = rebuilt(self.configs, changed, entity_hash)
            self._save()

    def set_entity(self, entity: Entity, quotas: dict[str, float]) -> None:
        """The entity's complete quota set, as ZooKeeper holds it ({} removes it)."""
        key = entity_key(entity)
        old = self.configs.get(key)
        if (old[1] if old else {}) != quotas:
            self.apply({key: (entity, quotas) if quotas else None})

    def follow_zookeeper(self) -> None:
        """In a ZooKeeper cluster the quota configs live in ZooKeeper (/config/users,
        /config/clients, /config/ips), which the broker follows: no local file."""
        self.path = None
        self.configs = {}

    def _alter_one(self, entity: Entity, ops: list[tuple[str, float, bool]],
                   validate_only: bool, changed: dict) -> str | None:
        error = _check_entity(entity)
        if error:
            return error
        keys, error = _keys_for(entity)
        if error or keys is None:
            return error
        for key, value, remove in ops:
            if key not in keys:
                return f"Invalid configuration key {key}"
            if not remove:
                error = _check_value(key, keys[key], value)
                if error:
                    return error
        if validate_only:
            return None
        ekey = entity_key(entity)
        _, quotas = self.configs.get(ekey, (entity, {}))
        # Kafka emits one record per key, walking a HashMap sized by the op count; the
        # image's delta keeps them in a HashMap and rebuilds the entity's map from it.
        records = hashmap_order(ops, lambda op: string_hash(op[0]), len(ops))
        quotas = rebuilt(quotas, {k: None if rm else float(x) for k, x, rm in records},
                         string_hash)
        changed[ekey] = (entity, quotas) if quotas else None
        return None

    def describe(self, components: list[tuple[str, int, str | None]],
                 strict: bool) -> list[tuple[Entity, list[tuple[str, float]]]]:
        """DescribeClientQuotas: matching entities and their values; KafkaError for a
        filter Kafka refuses."""
        exact: dict[str, str | None] = {}
        typed: set[str] = set()
        for etype, match_type, match in components:
            if not etype:
                raise KafkaError(ErrorCode.invalid_request, "Invalid empty entity type.")
            if etype in exact or etype in typed:
                raise KafkaError(ErrorCode.invalid_request, f"Entity type {etype} cannot "
                                       "appear more than once in the filter.")
            if etype not in (USER, CLIENT_ID, IP):
                raise KafkaError(ErrorCode.unsupported_version,
                                       f"Unsupported entity type {etype}")
            if match_type == EXACT:
                if match is None:
                    raise KafkaError(ErrorCode.invalid_request, "Request specified "
                                           "MATCH_TYPE_EXACT, but set match string to null.")
                exact[etype] = match
            elif match_type in (DEFAULT, SPECIFIED):
                if match is not None:
                    name = "MATCH_TYPE_DEFAULT" if match_type == DEFAULT \
                        else "MATCH_TYPE_SPECIFIED"
                    raise KafkaError(ErrorCode.invalid_request, f"Request specified "
                                           f"{name}, but also specified a match string.")
                if match_type == DEFAULT:
                    exact[etype] = None
                else:
                    typed.add(etype)
            else:
                raise KafkaError(ErrorCode.invalid_request,
                                       f"Unknown match type {match_type}")
        wanted = set(exact) | typed
        if IP in wanted and wanted & {USER, CLIENT_ID}:
            raise KafkaError(ErrorCode.invalid_request, "Invalid entity filter component "
                                   "combination. IP filter component should not be used with "
                                   "user or clientId filter component.")
        out = []
        for entity, quotas in self.configs.values():  # kept in Kafka's image order
            names = dict(entity)
            if strict and len(names) != len(wanted):
                continue
            if all(t in names and names[t] == n for t, n in exact.items()) \
                    and all(t in names for t in typed):
                out.append((entity_order(entity), list(quotas.items())))
        return out

    # --- enforcement ----------------------------------------------------------------------

    def lookup(self, quota: str, user: str, client_id: str) -> tuple[float, str, str] | None:
        """(bound, user tag, client-id tag) of the entity that sets `quota` for this
        client, by Kafka's precedence; None when no entity sets it."""
        u, c = (USER, user), (CLIENT_ID, client_id)
        du, dc = (USER, None), (CLIENT_ID, None)
        for entity, tags in (((u, c), (user, client_id)), ((u, dc), (user, client_id)),
                             ((u,), (user, "")), ((du, c), (user, client_id)),
                             ((du, dc), (user, client_id)), ((du,), (user, "")),
                             ((c,), ("", client_id)), ((dc,), ("", client_id))):
            found = self.configs.get(entity_key(entity))
            if found is not None and quota in found[1]:
                return found[1][quota], tags[0], tags[1]
        return None

    def _rate(self, quota: str, user_tag: str, client_tag: str) -> Rate:
        key = (quota, user_tag, client_tag)
        rate = self.rates.get(key)
        if rate is None:
            rate = self.rates[key] = Rate(self.samples, self.window_ms)
        return rate

    def record(self, quota: str, client_id: str | None, value: float,
               user: str = ANONYMOUS) -> int:
        """Record `value` against the client's `quota` and return the throttle time (ms)
        Kafka would answer with, 0 when it is within its quota or has none."""
        found = self.lookup(quota, user, client_id or "")
        if found is None:
            return 0
        bound, utag, ctag = found
        now = self.clock.monotonic_ms()
        ms = record_and_throttle(self._rate(quota, utag, ctag), value, bound, now)
        if quota == REQUEST:
            # ClientRequestQuotaManager bounds its throttle by one quota window.
            ms = min(ms, self.window_ms)
        return ms

    def unrecord(self, quota: str, client_id: str | None, value: float,
                 user: str = ANONYMOUS) -> None:
        found = self.lookup(quota, user, client_id or "")
        if found is not None:
            unrecord(self._rate(quota, found[1], found[2]), value, self.clock.monotonic_ms())

    def request_time(self, client_id: str | None, nanos: int, user: str = ANONYMOUS) -> int:
        """The request quota: handler time as a percentage of one thread."""
        return self.record(REQUEST, client_id, nanos * NANOS_TO_PERCENT_SECONDS, user)

    def fetch_max_bytes(self, client_id: str | None, user: str = ANONYMOUS) -> int:
        """getMaxValueInQuotaWindow: a consumer never gets more in one fetch than its quota
        allows over the measured windows."""
        found = self.lookup(FETCH, user, client_id or "")
        if found is None:
            return 0x7FFFFFFF
        return int(min(found[0] * (self.samples - 1) * self.window_ms / 1000, 0x7FFFFFFF))


    def mute(self, peer: str, throttle_ms: int) -> None:
        self._mutes[peer] = max(self._mutes.get(peer, 0), throttle_ms)

    def take_mute(self, peer: str) -> int:
        """For the server, once a response is written: how long to mute that connection."""
        return self._mutes.pop(peer, 0)


def describe_entries(entries: Any) -> list[tuple[str, int, str | None]]:
    return [(c.entity_type, c.match_type, c.match) for c in entries]


async def commit_plan(broker: Any, kind: str, changes: Any) -> KafkaError | None:
    """Make an alter's planned changes (`kind` "quotas" or "scram", the broker's store): in
    a ZooKeeper cluster written there before the answer (config_changes' write_<kind>, which
    applies them here too), else applied locally. The ZooKeeper failure, or None."""
    zk = getattr(broker, "config_changes", None)
    try:
        if zk is None:
            getattr(broker, kind).apply(changes)
        else:
            await getattr(zk, f"write_{kind}")(changes)
    except KafkaError as e:
        return e
    return None
