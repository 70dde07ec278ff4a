# A partition reassignment's decisions as pure functions (KIP-455 as Kafka 3.8's ZooKeeper-mode
# controller makes them: ReplicaAssignment in ControllerContext, validateReplicas and the
# phases of KafkaController.onPartitionReassignment). No ZooKeeper, no I/O.
#
# With ORS the original replicas and TRS the target, the topic znode holds RS = TRS followed by
# the ORS members not in TRS, adding = RS - ORS, removing = RS - TRS. ORS is always RS minus
# adding, so a reassignment given while another is in progress starts from the same ORS, and a
# cancel is a reassignment back to ORS. It completes once every TRS member is in the ISR.
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Collection, Sequence

from ..wire.errors import ErrorCode
from . import zkdata
from .decisions import elect_reassignment_leader


@dataclass(frozen=True, slots=True)
class Assignment:
    """One partition's replicas as the topic znode holds them (Kafka's ReplicaAssignment)."""
    replicas: tuple[int, ...]
    adding: tuple[int, ...] = ()
    removing: tuple[int, ...] = ()

    @property
    def original(self) -> tuple[int, ...]:
        return tuple(r for r in self.replicas if r not in self.adding)

    @property
    def target(self) -> tuple[int, ...]:
        return tuple(r for r in self.replicas if r not in self.removing)

    @property
    def in_progress(self) -> bool:
        return bool(self.adding or self.removing)

    def reassign_to(self, target: Sequence[int]) -> "Assignment":
        """The assignment while moving to `target` (ReplicaAssignment.reassignTo)."""
        ors = self.original
        full = tuple(dict.fromkeys((*target, *ors)))
        return Assignment(full, tuple(r for r in full if r not in ors),
                          tuple(r for r in full if r not in target))


def of_topic(topic: zkdata.TopicAssignment, partition: int) -> Assignment:
    return Assignment(tuple(topic.partitions[partition]),
                      tuple(topic.adding.get(partition, ())),
                      tuple(topic.removing.get(partition, ())))


def with_partitions(topic: zkdata.TopicAssignment,
                    changes: dict[int, Assignment]) -> zkdata.TopicAssignment:
    """The topic znode with these partitions' assignments (their adding/removing cleared
    when they are not in progress)."""
    parts, adding, removing = dict(topic.partitions), dict(topic.adding), dict(topic.removing)
    for p, a in changes.items():
        parts[p] = a.replicas
        adding.pop(p, None)
        removing.pop(p, None)
        if a.adding:
            adding[p] = a.adding
        if a.removing:
            removing[p] = a.removing
    return replace(topic, partitions=parts, adding=adding, removing=removing)


def invalid_target(replicas: Sequence[int]) -> str | None:
    """Why a target replica list is refused before the cluster is consulted, else None
    (KafkaController.validateReplicas; INVALID_REPLICA_ASSIGNMENT)."""
    if not replicas:
        return "Empty replica list specified in partition reassignment."
    if len(set(replicas)) != len(replicas):
        return ("Duplicate replica ids in partition reassignment replica list: "
                f"{_scala_seq(replicas)}")
    if any(r < 0 for r in replicas):
        return f"Invalid broker id in replica list: {_scala_seq(replicas)}"
    return None


def dead_adding(new: Assignment, live: Collection[int]) -> str | None:
    """Refusal of a reassignment that would start replicas on brokers not alive."""
    if set(new.adding) <= set(live):
        return None
    return ("Replica assignment has brokers that are not alive. Replica list: "
            f"{_scala_seq(new.adding)}, live broker list: {_scala_seq(sorted(live), 'Set')}")


def _scala_seq(xs: Sequence[int], kind: str = "ArrayBuffer") -> str:
    return f"{kind}({', '.join(str(x) for x in xs)})"


def is_complete(target: Sequence[int], isr: Sequence[int]) -> bool:
    """Every target replica is in sync (isReassignmentComplete)."""
    return set(target) <= set(isr)


def start_transition(state: zkdata.PartitionState,
                     controller_epoch: int) -> zkdata.PartitionState:
    """Phase A: the same leader and ISR at the next leader epoch, so every replica of the
    new replica set (the new ones start) follows it (updateLeaderEpochAndSendRequest)."""
    return replace(state, leader_epoch=state.leader_epoch + 1, controller_epoch=controller_epoch)


def leader_transition(state: zkdata.PartitionState, target: Sequence[int],
                      live: Collection[int],
                      controller_epoch: int) -> zkdata.PartitionState | None:
    """Phase B's first write (moveReassignedPartitionLeaderIfRequired): a leader outside
    the target or not live is replaced by the first live in-sync target replica (the ISR
    kept); a live leader in the target gets the next epoch. None: nobody may lead."""
    if state.leader in target and state.leader in live:
        return start_transition(state, controller_epoch)
    election = elect_reassignment_leader(target, state.isr, live)
    if election is None:
        return None
    return replace(state, leader=election.leader, leader_epoch=state.leader_epoch + 1,
                   isr=election.isr, controller_epoch=controller_epoch)


CODES = {"unknown": (ErrorCode.unknown_topic_or_partition, "The partition does not exist."),
         "none_in_progress": (ErrorCode.no_reassignment_in_progress,
                              "No partition reassignment is in progress.")}
