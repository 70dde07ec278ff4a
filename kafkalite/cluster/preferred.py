# Leader elections asked of the controller, as Kafka 3.8's ZooKeeper-mode KafkaController
# runs them (processReplicaLeaderElection, onReplicaElection, checkAndTriggerAutoLeaderRebalance):
#
#   ElectLeaders (admin)  PREFERRED: partitions whose leader is the preferred replica (the
#       first assigned) answer ELECTION_NOT_NEEDED, the others get it as leader when it is
#       live and in sync, else PREFERRED_LEADER_NOT_AVAILABLE. UNCLEAN: partitions with a
#       live leader answer ELECTION_NOT_NEEDED, the others an offline election that may pick
#       an out-of-sync replica (ELIGIBLE_LEADERS_NOT_AVAILABLE when no replica is live).
#       Unknown partitions UNKNOWN_TOPIC_OR_PARTITION, topics queued for deletion
#       INVALID_TOPIC_EXCEPTION. Every partition when none is named.
#   /admin/preferred_replica_election (the znode kafka-preferred-replica-election.sh wrote):
#       the listed partitions get a preferred election, then the znode is deleted (fenced).
#   auto.leader.rebalance.enable: every leader.imbalance.check.interval.seconds (the first
#       check 5 s after becoming controller), each broker whose share of the partitions it is
#       preferred for but does not lead exceeds leader.imbalance.per.broker.percentage gets
#       them back where it is live and in sync.
#
# All run in the controller's turn and write the state znodes through update_state
# (conditional, fenced). Brokers shutting down are not live for these elections.
from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Iterable

from ..wire.errors import ErrorCode
from . import zkdata
from .decisions import offline_election, preferred_transition, rebalance_candidates

if TYPE_CHECKING:
    from .controller import Controller, PartitionKey

log = logging.getLogger("kafkalite.controller")

PREFERRED, UNCLEAN = 0, 1
FIRST_CHECK_DELAY_MS = 5000  # KafkaController.onControllerFailover's first rebalance check
PREFERRED_STRATEGY = "PreferredReplicaPartitionLeaderElectionStrategy"
NOT_NEEDED = "Leader election not needed for topic partition."
Result = tuple[int, "str | None"]  # (error code, message)


def _failed(key: "PartitionKey", strategy: str) -> str:
    return (f"Failed to elect leader for partition {key[0]}-{key[1]} under strategy "
            f"{strategy}")


async def elect_leaders(ctrl: "Controller", keys: Iterable["PartitionKey"] | None,
                        election_type: int,
                        admin: bool = True) -> dict["PartitionKey", Result]:
    """Run the elections asked for; {partition: (error code, message)}, the message None on
    success (the leader is then in the state znode)."""
    deleting = set(await ctrl.zk.children(zkdata.DELETE_TOPICS))
    wanted = sorted(ctrl.states) if keys is None else list(dict.fromkeys(keys))
    out: dict[PartitionKey, Result] = {}
    live = ctrl.electable()
    for key in wanted:
        if key not in ctrl.states or key[0] not in ctrl.topics:
            out[key] = (ErrorCode.unknown_topic_or_partition, "The partition does not exist.")
            continue
        if key[0] in deleting:
            out[key] = (ErrorCode.invalid_topic_exception, "The topic is being deleted")
            continue
        # The ISR as its leader last wrote it (leaders change it without the controller)
        await ctrl.read_state(key)
        if key not in ctrl.states:
            out[key] = (ErrorCode.unknown_topic_or_partition, "The partition does not exist.")
            continue
        replicas = ctrl.topics[key[0]].partitions[key[1]]
        state = ctrl.states[key][0]
        if election_type == PREFERRED:
            if replicas and state.leader == replicas[0]:
                out[key] = (ErrorCode.election_not_needed, NOT_NEEDED)
                continue
            await ctrl.update_state(key, lambda s, r=replicas: preferred_transition(
                s, r, live, ctrl.epoch))
            code, strategy = ErrorCode.preferred_leader_not_available, PREFERRED_STRATEGY
        else:
            if state.leader != zkdata.LEADER_NONE and state.leader in live:
                out[key] = (ErrorCode.election_not_needed, NOT_NEEDED)
                continue
            # Kafka allows the unclean pick only for an admin's request
            await ctrl.update_state(key, lambda s, r=replicas: offline_election(
                s, r, live, ctrl.epoch, admin))
            code = ErrorCode.eligible_leaders_not_available
            strategy = f"OfflinePartitionLeaderElectionStrategy({str(admin).lower()})"
        now = ctrl.states.get(key)
        done = now is not None and now[0].leader in live and (
            election_type != PREFERRED or now[0].leader == replicas[0])
        out[key] = (ErrorCode.none, None) if done else (code, _failed(key, strategy))
    return out


async def znode_election(ctrl: "Controller") -> None:
    """/admin/preferred_replica_election: elect the partitions it lists, then delete it
    (re-arming the watch on its creation)."""
    keys = await ctrl.read_admin_znode(zkdata.PREFERRED_REPLICA_ELECTION,
                                       zkdata.decode_preferred_replica_election, set())
    if keys is None:
        return
    results = await elect_leaders(ctrl, sorted(keys), PREFERRED, admin=False)
    log.info("controller: preferred replica election (znode): %s",
             {f"{t}-{p}": ErrorCode(c).name for (t, p), (c, _) in results.items()})
    await ctrl.delete_fenced(zkdata.PREFERRED_REPLICA_ELECTION)
    await ctrl.zk.exists(zkdata.PREFERRED_REPLICA_ELECTION, watch=True)


async def auto_rebalance(ctrl: "Controller", percentage: int) -> list["PartitionKey"]:
    """One imbalance check; the partitions it moved back to their preferred leader."""
    deleting = set(await ctrl.zk.children(zkdata.DELETE_TOPICS))
    assignments = {(t, p): r for t, a in ctrl.topics.items() if t not in deleting
                   for p, r in a.partitions.items()}
    for key in assignments:  # the ISRs their leaders wrote since
        await ctrl.read_state(key)
    states = {k: (s.leader, s.isr) for k, (s, _) in ctrl.states.items() if k in assignments}
    candidates = rebalance_candidates(assignments, states, ctrl.electable(), percentage)
    if not candidates:
        return []
    results = await elect_leaders(ctrl, candidates, PREFERRED, admin=False)
    moved = [k for k, (code, _) in results.items() if code == ErrorCode.none]
    log.info("controller: auto leader rebalance moved %s", [f"{t}-{p}" for t, p in moved])
    return moved
