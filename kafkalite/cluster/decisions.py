# The controller's decisions as pure functions, as Kafka's ZooKeeper-mode controller makes
# them: who leads a partition after a failure, a reassignment, a controlled shutdown or a
# preferred-leader election (PartitionLeaderElectionAlgorithms and the ISR each election
# leaves, PartitionStateMachine / KafkaController), and where a new topic's replicas go
# (AdminUtils.assignReplicasToBrokers, rack-unaware and rack-aware). No ZooKeeper, no I/O:
# the controller feeds them what it read from the znodes and writes back what they return.
from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Collection, Mapping, Sequence

from ..wire.errors import ErrorCode, KafkaError


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
