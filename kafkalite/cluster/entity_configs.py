# SCRAM credentials and client quotas across a ZooKeeper-coordinated cluster (issue 17), kept
# where Kafka 3.8 in ZooKeeper mode keeps them, so that a user or a quota made at one broker
# holds at every broker (and Kafka's own tools work on a kafkalite cluster's ZooKeeper).
#
# Layout (checked against a real Kafka 3.8 in ZooKeeper mode, tests/cluster/
# test_entity_configs_zk_vs_kafka.py): /config/users/<user>, /config/users/<user>/clients/
# <client>, /config/clients/<client>, /config/ips/<ip>, "<default>" for a default entity,
# names sanitized as Kafka's Sanitizer (URL-encoding, "*" as %2A, " " as %20). Each holds
# {"version":1,"config":{...}}: a user's SCRAM credentials ("SCRAM-SHA-256": "salt=<b64>,
# stored_key=<b64>,server_key=<b64>,iterations=<n>", ScramCredentialUtils' form) beside its
# quotas (integral keys as Long.toString, the others as Double.toString), keys in the order
# a java.util.Properties walks them. Writing is AdminZkClient.changeConfigs: read the
# entity's config, change the keys this request names, write it whole (an empty quota
# entity's znode is deleted, with its parents made empty by that, as tryCleanQuotaNodes
# does), then announce /config/changes/config_change_<seq> {"version":2,"entity_path":
# "users/<u>"}. Following: config_changes.ConfigChanges hands the users / clients / ips
# notifications here, and at start every entity is read; each is applied whole to the
# broker's ScramStore and ClientQuotas, which then keep nothing in their local files.
from __future__ import annotations

import base64
import decimal
import logging
from typing import Any, Mapping

from ..broker.quotas import CLIENT_ID, CLIENT_KEYS, IP, IP_KEYS, USER, Entity, entity_order
from ..javahash import hashmap_order, string_hash
from ..security.scram_store import MECHANISMS, ScramCredential
from . import zkdata
from .zk import NodeExists, NoNode, NotEmpty, ZkClient

log = logging.getLogger("kafkalite.cluster")

USERS, CLIENTS, IPS = "users", "clients", "ips"  # the entity types followed here
DEFAULT = zkdata.DEFAULT_ENTITY
SCRAM_KEYS = {name: mech for mech, (name, _) in MECHANISMS.items()}  # "SCRAM-SHA-256" -> 1
_SAFE = frozenset(b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.-_")


def sanitize(name: str) -> str:
    """Kafka's Sanitizer.sanitize: URLEncoder's UTF-8 form, with " " and "*" escaped too."""
    return "".join(chr(b) if b in _SAFE else f"%{b:02X}" for b in name.encode())


def desanitize(name: str) -> str:
    from urllib.parse import unquote_plus
    return unquote_plus(name)


def encode_credential(cred: ScramCredential) -> str:
    b64 = lambda b: base64.b64encode(b).decode()  # noqa: E731
    return (f"salt={b64(cred.salt)},stored_key={b64(cred.stored_key)},"
            f"server_key={b64(cred.server_key)},iterations={cred.iterations}")


def decode_credential(text: str) -> ScramCredential:
    fields = dict(part.split("=", 1) for part in text.split(","))
    return ScramCredential(base64.b64decode(fields["salt"]),
                           base64.b64decode(fields["stored_key"]),
                           base64.b64decode(fields["server_key"]), int(fields["iterations"]))


def java_double(value: float) -> str:
    """Double.toString: plain between 10^-3 and 10^7, else computerized scientific form."""
    if value == 0 or 1e-3 <= abs(value) < 1e7:
        return repr(float(value))
    sign, digits, exp = decimal.Decimal(repr(float(value))).normalize().as_tuple()
    text = "".join(map(str, digits))
    mantissa = text[0] + "." + (text[1:] or "0")
    return f"{'-' if sign else ''}{mantissa}E{exp + len(digits) - 1}"


def quota_text(key: str, value: float) -> str:
    kind = CLIENT_KEYS.get(key) or IP_KEYS.get(key)
    return java_double(value) if kind == "DOUBLE" else str(int(value))


def encode_entity_config(config: Mapping[str, str]) -> bytes:
    """The config znode, keys in a java.util.Properties' (hash table) order."""
    return zkdata.encode_topic_config(
        {k: config[k] for k in hashmap_order(list(config), string_hash)})


def entity_path(entity: Entity) -> tuple[str, str]:
    """A quota entity's (root type, sanitized name), e.g. ("users", "bob/clients/c%3A1")."""
    names = dict(entity)
    part = lambda n: DEFAULT if n is None else sanitize(n)  # noqa: E731
    if IP in names:
        return IPS, DEFAULT if names[IP] is None else names[IP]
    if USER in names and CLIENT_ID in names:
        return USERS, f"{part(names[USER])}/{CLIENTS}/{part(names[CLIENT_ID])}"
    if USER in names:
        return USERS, part(names[USER])
    return CLIENTS, part(names[CLIENT_ID])


def entity_of(root: str, name: str) -> Entity:
    whole = lambda n: None if n == DEFAULT else desanitize(n)  # noqa: E731
    if root == IPS:
        return ((IP, None if name == DEFAULT else name),)
    if root == CLIENTS:
        return ((CLIENT_ID, whole(name)),)
    user, _, client = name.partition(f"/{CLIENTS}/")
    if client:
        return entity_order([(USER, whole(user)), (CLIENT_ID, whole(client))])
    return ((USER, whole(user)),)


async def read_config(zk: ZkClient, root: str, name: str) -> dict[str, str] | None:
    try:
        return zkdata.decode_topic_config((await zk.get(f"/config/{root}/{name}"))[0])
    except NoNode:
        return None


async def change_entity(zk: ZkClient, root: str, name: str, config: Mapping[str, str]) -> None:
    """AdminZkClient.changeEntityConfig: write (or clean away) the entity, then announce."""
    path = f"/config/{root}/{name}"
    if not config and await _try_clean(zk, path, root, name):
        pass
    else:
        data = encode_entity_config(config)
        try:
            await zk.set(path, data)
        except NoNode:
            await _create_with_parents(zk, path, data)
    await zk.create(f"{zkdata.CONFIG_CHANGES}/{zkdata.CONFIG_CHANGE_PREFIX}",
                    zkdata.encode_config_change(f"{root}/{name}"), sequence=True,
                    makepath=True)


async def _create_with_parents(zk: ZkClient, path: str, data: bytes) -> None:
    parts = path.strip("/").split("/")
    for i in range(2, len(parts)):  # parents get no data, as Kafka's createRecursive
        try:
            await zk.create("/" + "/".join(parts[:i]), None)  # type: ignore[arg-type]
        except NodeExists:
            pass
    try:
        await zk.create(path, data)
    except NodeExists:  # created meanwhile by another writer: ours is the later write
        await zk.set(path, data)


async def _try_clean(zk: ZkClient, path: str, root: str, name: str) -> bool:
    """tryCleanQuotaNodes: an entity with no config and no children goes, and for a
    user/client entity also its emptied clients node and user node."""
    try:
        if await zk.children(path):
            return False
        doomed = path
        user, sep, client = name.partition(f"/{CLIENTS}/")
        if root == USERS and sep:
            clients_path = f"/config/{USERS}/{user}/{CLIENTS}"
            if await zk.children(clients_path) == [client]:
                doomed = clients_path
                user_path = f"/config/{USERS}/{user}"
                if not await read_config(zk, USERS, user) and \
                        await zk.children(user_path) == [CLIENTS]:
                    doomed = user_path
        await _delete_tree(zk, doomed)
    except NoNode:
        return False
    return True


async def _delete_tree(zk: ZkClient, path: str) -> None:
    for child in await zk.children(path):
        await _delete_tree(zk, f"{path}/{child}")
    try:
        await zk.delete(path)
    except (NoNode, NotEmpty):  # raced with another writer: the next change cleans it
        pass


class EntityConfigs:
    """The broker's SCRAM credentials and client quotas as ZooKeeper holds them."""

    def __init__(self, broker: Any, zk: ZkClient):
        self.broker = broker
        self.zk = zk
        spec = broker.config["kafkalite.sasl.scram.users"] or ""
        self.static = {i.strip().partition(":")[0] for i in spec.split(",")} - {""}
        broker.scram.follow_zookeeper(self.static)
        broker.quotas.follow_zookeeper()

    # --- writing (the alter handlers, before they answer) -----------------------------

    async def write_scram(self, changes: Mapping[str, Mapping[int, Any]]) -> None:
        """{user: {mechanism: credential or None}} into each user's config znode."""
        for user, mechs in changes.items():
            name = sanitize(user)
            config = await read_config(self.zk, USERS, name) or {}
            for mech, cred in mechs.items():
                key = MECHANISMS[mech][0]
                if cred is None:
                    config.pop(key, None)
                else:
                    config[key] = encode_credential(cred)
            await change_entity(self.zk, USERS, name, config)
        self.broker.scram.apply(changes)

    async def write_quotas(self, changed: Mapping[Any, Any]) -> None:
        """{entity key: (entity, quotas) or None} into each entity's config znode, its
        other keys (a user's credentials) kept."""
        for key, value in changed.items():
            entity, quotas = value if value is not None else (tuple(key), {})
            root, name = entity_path(entity)
            config = await read_config(self.zk, root, name) or {}
            config = {k: v for k, v in config.items() if k not in CLIENT_KEYS | IP_KEYS.keys()}
            config.update((k, quota_text(k, v)) for k, v in quotas.items())
            await change_entity(self.zk, root, name, config)
        self.broker.quotas.apply(changed)

    # --- following ------------------------------------------------------------------

    async def sync(self) -> None:
        """Every entity ZooKeeper holds (a broker's start: changes made while it was down
        may be older than the notifications kept); what it no longer holds goes."""
        seen_users: set[str] = set()
        seen_quotas: set[frozenset] = set()
        for root in (USERS, CLIENTS, IPS):
            for name in await self._children(f"/config/{root}"):
                names = [name]
                if root == USERS:
                    names += [f"{name}/{CLIENTS}/{c}" for c in
                              await self._children(f"/config/{USERS}/{name}/{CLIENTS}")]
                for n in names:
                    entity = await self.apply(root, n)
                    seen_quotas.add(frozenset(entity))
                    if root == USERS and "/" not in n and n != DEFAULT:
                        seen_users.add(desanitize(n))
        scram, quotas = self.broker.scram, self.broker.quotas
        scram.apply({u: {m: None for m in mechs} for u, mechs in list(scram.creds.items())
                     if u not in seen_users and u not in self.static})
        for key, (entity, _) in list(quotas.configs.items()):
            if key not in seen_quotas:
                quotas.set_entity(entity, {})

    async def _children(self, path: str) -> list[str]:
        try:
            return await self.zk.children(path)
        except NoNode:
            return []

    async def apply(self, root: str, name: str) -> Entity:
        """Bring this broker's view of one entity to what ZooKeeper holds."""
        config = await read_config(self.zk, root, name) or {}
        entity = entity_of(root, name)
        keys = IP_KEYS if root == IPS else CLIENT_KEYS
        quotas = {}
        for k in keys:
            if k in config:
                try:
                    quotas[k] = float(config[k])
                except ValueError:
                    log.error("Ignoring quota %s=%r of %s/%s", k, config[k], root, name)
        self.broker.quotas.set_entity(entity, quotas)
        if root == USERS and f"/{CLIENTS}/" not in name and name != DEFAULT:
            self._apply_scram(desanitize(name), config)
        return entity

    def _apply_scram(self, user: str, config: Mapping[str, str]) -> None:
        want: dict[int, Any] = {}
        for key, mech in SCRAM_KEYS.items():
            try:
                want[mech] = decode_credential(config[key]) if key in config else None
            except (KeyError, ValueError) as e:
                log.error("Ignoring the %s credential of %s: %s", key, user, e)
                want[mech] = None
        have = self.broker.scram.creds.get(user, {})
        if all(have.get(m) == c for m, c in want.items()) or (
                user in self.static and not any(want.values())):
            return  # a static user keeps its credentials until ZooKeeper holds some
        self.broker.scram.apply({user: want})
