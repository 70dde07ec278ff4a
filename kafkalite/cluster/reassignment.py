# Partition reassignment run by the controller (KIP-455), as Kafka 3.8's ZooKeeper-mode
# KafkaController runs it (processApiPartitionReassignment, onPartitionReassignment), in the
# controller's turn, every write fenced by the controller epoch (decisions in
# reassignment_plan.py):
#
#   start     the topic znode gets RS = TRS + (ORS - TRS) with adding/removing (conditional on
#             its version), replicas an earlier reassignment added that the new one drops
#             leave the ISR; then the state znode's leader epoch + 1, so every broker of RS
#             re-reads the partition: a new replica creates its local log and fetches from the
#             leader (the brokers follow the znodes, zk_view.py; no LeaderAndIsr).
#   complete  once every TRS replica is in the ISR (checked when leaders announce ISR changes
#             under /isr_change_notification and at controller failover): a leader outside TRS
#             (or not live) is replaced by the first live in-sync TRS replica, else the epoch
#             + 1; the topic znode gets RS = TRS, adding/removing cleared; then each removed
#             replica leaves the ISR (epoch + 1, as OfflineReplica). Kafka shrinks the ISR
#             first, but its leaders learn RS = TRS from LeaderAndIsr before that; here they
#             learn it from the topic znode, so it is written first. A broker that finds
#             itself no longer among a partition's replicas stops following it and deletes its
#             local log (zk_view.py, Kafka's StopReplica delete=true).
#   cancel    a null target: back to ORS the same way (NO_REASSIGNMENT_IN_PROGRESS when none).
#
# A new controller resumes the reassignments it finds in the topic znodes. The pre-KIP-455
# /admin/reassign_partitions znode (kafka-reassign-partitions.sh --zookeeper of old) starts
# reassignments too, as Kafka's PartitionReassignmentHandler: read when it is created and at
# failover; its refused partitions leave it at once, the others as they complete, an API
# reassignment of a partition takes it out; the znode is deleted once empty.
from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Iterable, Sequence

from ..wire.errors import ErrorCode
from . import zkdata
from .decisions import remove_replica
from .fenced_writes import UPDATE_ATTEMPTS
from .reassignment_plan import (CODES, Assignment, dead_adding, invalid_target, is_complete,
                                leader_transition, of_topic, start_transition, with_partitions)
from .zk import BadVersion, Delete, NoNode, SetData

if TYPE_CHECKING:
    from .controller import Controller, PartitionKey

log = logging.getLogger("kafkalite.controller")
Result = tuple[int, "str | None"]


async def alter(ctrl: "Controller", wanted: dict["PartitionKey", Sequence[int] | None],
                from_znode: bool = False) -> dict["PartitionKey", Result]:
    """Start, change or cancel (None) the reassignments asked for; {partition: result}.
    Answers once the new assignments are written and announced, not when they complete."""
    deleting = set(await ctrl.zk.children(zkdata.DELETE_TOPICS))
    out: dict[PartitionKey, Result] = {}
    todo: dict[PartitionKey, Assignment] = {}
    for key, target in wanted.items():
        topic = ctrl.topics.get(key[0])
        known = topic is not None and key[1] in topic.partitions
        current = of_topic(topic, key[1]) if known else Assignment(())  # type: ignore[arg-type]
        if target is not None:
            why = invalid_target(target) or dead_adding(current.reassign_to(target),
                                                        ctrl.live)
            if why is not None:
                out[key] = (ErrorCode.invalid_replica_assignment, why)
                continue
        elif not current.in_progress:
            out[key] = CODES["none_in_progress"]
            continue
        if not known or key[0] in deleting:
            out[key] = CODES["unknown"]
            continue
        todo[key] = current.reassign_to(current.original if target is None else target)
        out[key] = (ErrorCode.none, None)
    if not from_znode:  # the latest reassignment wins (Kafka's maybeRemoveFromZkReassignment)
        await _drop_from_znode(ctrl, set(todo))
    for key, new in todo.items():
        await reassign(ctrl, key, new)
    return out


async def znode_reassignment(ctrl: "Controller", created: bool = True) -> None:
    """/admin/reassign_partitions: reassign the partitions it lists when it is created (or
    found at failover); any event re-arms the watch."""
    if not created:
        await ctrl.zk.exists(zkdata.REASSIGN_PARTITIONS, watch=True)
        return
    targets = await ctrl.read_admin_znode(zkdata.REASSIGN_PARTITIONS,
                                          zkdata.decode_reassign_partitions, {})
    if targets is None:
        return
    results = await alter(ctrl, dict(targets), from_znode=True)
    log.info("controller: reassignments from %s: %s", zkdata.REASSIGN_PARTITIONS,
             {f"{t}-{p}": ErrorCode(c).name for (t, p), (c, _) in results.items()})
    refused = {k for k, (code, _) in results.items() if code != ErrorCode.none}
    await _drop_from_znode(ctrl, refused, keep=set(targets) - refused)


def ongoing(ctrl: "Controller", keys: Iterable["PartitionKey"] | None
            ) -> dict["PartitionKey", Assignment]:
    """The reassignments in progress, among `keys` (None: all)."""
    if keys is None:
        keys = [(t, p) for t, a in ctrl.topics.items() for p in a.partitions]
    out = {}
    for t, p in keys:
        topic = ctrl.topics.get(t)
        if topic is not None and p in topic.partitions and of_topic(topic, p).in_progress:
            out[(t, p)] = of_topic(topic, p)
    return out


async def reassign(ctrl: "Controller", key: "PartitionKey", new: Assignment) -> None:
    """onPartitionReassignment: write `new`, then start it or, when its target is in sync
    already, complete it."""
    old = of_topic(ctrl.topics[key[0]], key[1])
    await _write_topic(ctrl, key[0], {key[1]: new})
    for r in [r for r in old.replicas if r not in new.replicas]:  # an earlier target's
        await ctrl.update_state(key, lambda s, r=r: remove_replica(s, r, ctrl.epoch))
    await ctrl.read_state(key)
    state = ctrl.states.get(key)
    if state is None:
        return
    if not is_complete(new.target, state[0].isr):
        log.info("controller: reassigning %s-%d: replicas %s, adding %s, removing %s", *key,
                 list(new.replicas), list(new.adding), list(new.removing))
        await ctrl.update_state(key, lambda s: start_transition(s, ctrl.epoch))
    else:
        await _complete(ctrl, key, new)


async def check_completions(ctrl: "Controller") -> None:
    """Complete every reassignment whose target replicas are all in sync now."""
    for key, a in ongoing(ctrl, None).items():
        state = ctrl.states.get(key)
        if state is not None and is_complete(a.target, state[0].isr):
            await _complete(ctrl, key, a)


async def resume(ctrl: "Controller") -> None:
    """At failover: every reassignment in the topic znodes goes on (announced again)."""
    for key, a in ongoing(ctrl, None).items():
        await reassign(ctrl, key, a)
    await znode_reassignment(ctrl)


async def _complete(ctrl: "Controller", key: "PartitionKey", a: Assignment) -> None:
    target = a.target
    live = ctrl.electable()
    await ctrl.update_state(key, lambda s: leader_transition(s, target, live, ctrl.epoch))
    state = ctrl.states.get(key)
    if state is None or state[0].leader not in target:
        log.warning("controller: %s-%d: no live in-sync replica of %s may lead yet", *key,
                    list(target))
        return
    # RS = TRS before the ISR shrinks: the brokers learn the replicas from the topic znode,
    # and a leader still counting a removed replica would add it back to the ISR
    await _write_topic(ctrl, key[0], {key[1]: Assignment(target)})
    for r in a.removing:  # OfflineReplica: out of the ISR (never its last member)
        await ctrl.update_state(key, lambda s, r=r: remove_replica(s, r, ctrl.epoch))
    await _drop_from_znode(ctrl, {key})
    log.info("controller: reassignment of %s-%d to %s completed", *key, list(target))
    if await ctrl.zk.exists(zkdata.delete_topic_path(key[0])) is not None:
        await ctrl.delete_marked_topics()  # the deletion that waited for it


async def _write_topic(ctrl: "Controller", topic: str, changes: dict[int, Assignment]) -> None:
    """The topic znode with `changes`, conditional on its version (re-read on BADVERSION,
    bounded) and fenced."""
    path = zkdata.topic_path(topic)
    for _ in range(UPDATE_ATTEMPTS):
        try:
            data, st = await ctrl.zk.get(path)
        except NoNode:
            ctrl.topics.pop(topic, None)
            return
        new = with_partitions(zkdata.TopicAssignment.decode(data), changes)
        try:
            await ctrl.zk.multi_fenced([SetData(path, new.encode(), st.version)],
                                       ctrl.epoch_zk_version)
        except BadVersion:
            continue
        ctrl.topics[topic] = new
        return
    log.warning("controller: topic znode %s kept changing under %d attempts", topic,
                UPDATE_ATTEMPTS)


async def _drop_from_znode(ctrl: "Controller", keys: set["PartitionKey"],
                           keep: set["PartitionKey"] | None = None) -> None:
    """Take `keys` out of /admin/reassign_partitions (fenced, conditional), deleting it once
    nothing is left; `keep` (just started from it): those still in progress stay."""
    for _ in range(UPDATE_ATTEMPTS):
        try:
            data, st = await ctrl.zk.get(zkdata.REASSIGN_PARTITIONS)
        except NoNode:
            return
        try:
            listed = zkdata.decode_reassign_partitions(data)
        except (ValueError, KeyError, TypeError, AttributeError):
            listed = {}
        moving = ongoing(ctrl, listed)
        left = {k: r for k, r in listed.items() if k not in keys and (
            k in moving or k not in (keep or set()))}
        if left == listed and listed:
            return
        op = SetData(zkdata.REASSIGN_PARTITIONS, zkdata.encode_reassign_partitions(left),
                     st.version) if left else Delete(zkdata.REASSIGN_PARTITIONS, st.version)
        try:
            await ctrl.zk.multi_fenced([op], ctrl.epoch_zk_version)
            return
        except (BadVersion, NoNode):
            continue
