# The controller's decisions as pure functions, as Kafka's ZooKeeper-mode controller makes
# them: who leads a partition after a failure, a reassignment, a controlled shutdown or a
# preferred-leader election (PartitionLeaderElectionAlgorithms and the ISR each election
# leaves, PartitionStateMachine / KafkaController), and where a new topic's replicas go
# (AdminUtils.assignReplicasToBrokers, rack-unaware and rack-aware). No ZooKeeper, no I/O:
# the controller feeds them what it read from the znodes and writes back what they return.
from __future__ import annotations

import random
from dataclasses import dataclass, replace
from typing import Collection, Mapping, Sequence

from ..wire.errors import ErrorCode, KafkaError
from . import zkdata


@dataclass(frozen=True, slots=True)
class Election:
    leader: int
    isr: tuple[int, ...]


def elect_leader(assignment: Sequence[int], isr: Sequence[int], live: Collection[int],
                 unclean: bool) -> Election | None:
    """A leader for a partition whose leader went offline: the first live replica, in
    assignment order, that is in the ISR; with `unclean`, failing that, the first live
    replica at all (its ISR is then itself alone: the others may have data it lacks).
    None: the partition stays offline rather than lose acknowledged records."""
    leader = next((r for r in assignment if r in live and r in isr), None)
    if leader is not None:
        return Election(leader, tuple(r for r in isr if r in live))
    if unclean:
        leader = next((r for r in assignment if r in live), None)
        if leader is not None:
            return Election(leader, (leader,))
    return None


def elect_reassignment_leader(reassignment: Sequence[int], isr: Sequence[int],
                              live: Collection[int]) -> Election | None:
    """A leader among the replicas a reassignment keeps: the first live in-sync one."""
    leader = next((r for r in reassignment if r in live and r in isr), None)
    return None if leader is None else Election(leader, tuple(isr))


def elect_preferred_leader(assignment: Sequence[int], isr: Sequence[int],
                           live: Collection[int]) -> Election | None:
    """The preferred replica (the first assigned) when it is live and in sync, else None:
    a preferred election never falls back to another replica."""
    if assignment and assignment[0] in live and assignment[0] in isr:
        return Election(assignment[0], tuple(isr))
    return None


def elect_controlled_shutdown_leader(assignment: Sequence[int], isr: Sequence[int],
                                     live: Collection[int],
                                     shutting_down: Collection[int]) -> Election | None:
    """A leader off the brokers shutting down: the first live in-sync replica not among
    them. The brokers shutting down also leave the ISR, so acks=all stops waiting on them."""
    leader = next((r for r in assignment
                   if r in live and r in isr and r not in shutting_down), None)
    if leader is None:
        return None
    return Election(leader, tuple(r for r in isr if r not in shutting_down))


def assign_replicas(brokers: Sequence[int], racks: Mapping[int, str] | None, partitions: int,
                    replication_factor: int, start_index: int = -1, shift: int = -1,
                    start_partition: int = 0,
                    rng: random.Random | None = None) -> dict[int, list[int]]:
    """{partition: replicas} for `partitions` new partitions numbered from start_partition.

    The first replicas go round-robin from start_index (random when -1); the others follow
    at an increasing shift (random when -1), so the followers of one broker's partitions
    spread over all the others. With racks for every broker, the round-robin runs over a
    rack-alternated broker list and followers prefer racks (then brokers) holding no replica
    of the partition yet. Kafka takes one fixed start index for both; -1 draws both."""
    if partitions <= 0:
        raise KafkaError(ErrorCode.invalid_partitions,
                         "Number of partitions must be larger than 0.")
    if replication_factor <= 0:
        raise KafkaError(ErrorCode.invalid_replication_factor,
                         "Replication factor must be larger than 0.")
    if replication_factor > len(brokers):
        raise KafkaError(ErrorCode.invalid_replication_factor,
                         f"Replication factor: {replication_factor} larger than available "
                         f"brokers: {len(brokers)}.")
    racks = {b: racks[b] for b in brokers if racks and racks.get(b) is not None}
    if racks and len(racks) < len(brokers):
        raise KafkaError(ErrorCode.invalid_replica_assignment,
                         "Not all brokers have rack information for replica rack aware "
                         "assignment.")
    ordered = rack_alternated(racks) if racks else list(brokers)
    n = len(ordered)
    rng = rng or random.Random()
    start = start_index if start_index >= 0 else rng.randrange(n)
    next_shift = shift if shift >= 0 else rng.randrange(n)
    rack_count = len(set(racks.values())) if racks else 1
    out: dict[int, list[int]] = {}
    for pid in range(max(0, start_partition), max(0, start_partition) + partitions):
        if pid > 0 and pid % n == 0:
            next_shift += 1
        first = (pid + start) % n
        if not racks:
            out[pid] = [ordered[first]] + [ordered[_replica_index(first, next_shift, j, n)]
                                           for j in range(replication_factor - 1)]
            continue
        replicas = [ordered[first]]
        used_racks = {racks[ordered[first]]}
        k = 0
        while len(replicas) < replication_factor:
            b = ordered[_replica_index(first, next_shift * rack_count, k, n)]
            k += 1
            # Skip a broker whose rack already holds a replica while some rack holds none,
            # and a broker already holding one while some broker holds none.
            if (racks[b] not in used_racks or len(used_racks) == rack_count) and \
                    (b not in replicas or len(replicas) == n):
                replicas.append(b)
                used_racks.add(racks[b])
        out[pid] = replicas
    return out


def rack_alternated(racks: Mapping[int, str]) -> list[int]:
    """Brokers taken one per rack in turn (racks by name, brokers by id within a rack):
    rack1 {0,1}, rack2 {2} gives 0, 2, 1."""
    by_rack: dict[str, list[int]] = {}
    for b in sorted(racks):
        by_rack.setdefault(racks[b], []).append(b)
    queues = [by_rack[r] for r in sorted(by_rack)]
    out: list[int] = []
    depth = 0
    while len(out) < len(racks):
        out += [q[depth] for q in queues if depth < len(q)]
        depth += 1
    return out


def _replica_index(first: int, shift: int, j: int, n: int) -> int:
    return (first + 1 + (shift + j) % (n - 1)) % n


def preferred_imbalance(assignments: Mapping[tuple[str, int], Sequence[int]],
                        leaders: Mapping[tuple[str, int], int]) -> dict[int, float]:
    """{preferred broker: the share of the partitions it is preferred for (first assigned)
    that another broker leads}, as Kafka's checkAndTriggerAutoLeaderRebalance counts it:
    only partitions with a known leader count as led elsewhere."""
    total: dict[int, int] = {}
    elsewhere: dict[int, int] = {}
    for key, replicas in assignments.items():
        if not replicas:
            continue
        preferred = replicas[0]
        total[preferred] = total.get(preferred, 0) + 1
        if key in leaders and leaders[key] != preferred:
            elsewhere[preferred] = elsewhere.get(preferred, 0) + 1
    return {b: elsewhere.get(b, 0) / n for b, n in total.items()}


def rebalance_candidates(assignments: Mapping[tuple[str, int], Sequence[int]],
                         states: Mapping[tuple[str, int], tuple[int, Sequence[int]]],
                         live: Collection[int],
                         percentage: int) -> list[tuple[str, int]]:
    """The partitions an automatic preferred-leader election moves: for each broker whose
    imbalance exceeds `percentage`%, those it is preferred for but does not lead, where it
    can lead (live and in sync). `states`: {partition: (leader, isr)}."""
    leaders = {k: s[0] for k, s in states.items()}
    imbalance = preferred_imbalance(assignments, leaders)
    out = []
    for key in sorted(assignments):
        replicas = assignments[key]
        if not replicas or key not in states or imbalance.get(replicas[0], 0.0) <= \
                percentage / 100:
            continue
        leader, isr = states[key]
        if leader != replicas[0] and elect_preferred_leader(replicas, isr, live):
            out.append(key)
    return out


# --- the controller's state transitions (pure) ------------------------------------------------------------------

def initial_state(replicas: Sequence[int], live: Collection[int],
                  controller_epoch: int) -> zkdata.PartitionState | None:
    """A new partition's state (NewPartition -> OnlinePartition): the first live replica
    leads, every live replica is in sync, leader epoch 0. None while no replica is live."""
    online = tuple(r for r in replicas if r in live)
    if not online:
        return None
    return zkdata.PartitionState(online[0], 0, online, controller_epoch)


def offline_election(state: zkdata.PartitionState, replicas: Sequence[int],
                     live: Collection[int], controller_epoch: int,
                     unclean: bool) -> zkdata.PartitionState | None:
    """A new leader for a partition whose leader is not live, leader epoch + 1; None when
    none may lead (the state znode is then left as it is). An unclean leader starts
    RECOVERING (KIP-704)."""
    if state.leader in live:
        return None
    election = elect_leader(replicas, state.isr, live, unclean)
    if election is None:
        return None
    recovery = (state.leader_recovery_state if election.leader in state.isr
                else zkdata.RECOVERING)
    return zkdata.PartitionState(election.leader, state.leader_epoch + 1, election.isr,
                                 controller_epoch, recovery)


def remove_replica(state: zkdata.PartitionState, replica: int,
                   controller_epoch: int) -> zkdata.PartitionState | None:
    """`replica` went offline: it leaves the ISR, except as its last member (Kafka keeps it
    there, so it can lead again cleanly when it returns), and it no longer leads (-1). None
    when it is not in the ISR."""
    if replica not in state.isr:
        return None
    leader = zkdata.LEADER_NONE if state.leader == replica else state.leader
    isr = state.isr if len(state.isr) == 1 else tuple(r for r in state.isr if r != replica)
    return replace(state, leader=leader, leader_epoch=state.leader_epoch + 1, isr=isr,
                   controller_epoch=controller_epoch)


def preferred_transition(state: zkdata.PartitionState, replicas: Sequence[int],
                         live: Collection[int],
                         controller_epoch: int) -> zkdata.PartitionState | None:
    """The preferred replica takes the lead (PreferredReplicaPartitionLeaderElectionStrategy):
    the ISR stays, the leader epoch + 1. None when it cannot lead or leads already."""
    election = elect_preferred_leader(replicas, state.isr, live)
    if election is None or election.leader == state.leader:
        return None
    return replace(state, leader=election.leader, leader_epoch=state.leader_epoch + 1,
                   controller_epoch=controller_epoch)


def shutdown_transition(state: zkdata.PartitionState, replicas: Sequence[int],
                        live: Collection[int], shutting_down: Collection[int],
                        controller_epoch: int) -> zkdata.PartitionState | None:
    """A partition led by a broker shutting down moves to another live in-sync replica
    (ControlledShutdownPartitionLeaderElectionStrategy), the brokers shutting down leaving
    the ISR. None when its leader is not shutting down or nobody else can lead."""
    if state.leader not in shutting_down:
        return None
    election = elect_controlled_shutdown_leader(replicas, state.isr, live, shutting_down)
    if election is None:
        return None
    return replace(state, leader=election.leader, leader_epoch=state.leader_epoch + 1,
                   isr=election.isr, controller_epoch=controller_epoch)
