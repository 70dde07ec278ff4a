# A partition leader's view of its followers (issue 17, design step 6), as Kafka's
# Partition/Replica: each follower's log end offset (LEO), learnt from the fetch_offset of
# its Fetch requests, and when it was last caught up; the high watermark (HW) as the
# smallest LEO of the ISR, never moving backwards; which followers fell out of the ISR
# (not caught up for replica.lag.time.max.ms) and which may rejoin it (a LEO at the HW and
# at the start offset of the leader's epoch); the acks=all produce requests waiting for
# the HW (Kafka's DelayedProduce, checkEnoughReplicasReachOffset).
#
# No I/O and no timers here: the caller passes the monotonic time, writes ISR changes to
# ZooKeeper (replication.py) and calls back with the outcome. The log is anything with
# log_end_offset, high_watermark and update_high_watermark(offset) -> bool.
from __future__ import annotations

import asyncio
from typing import Any, Callable, Iterable

from ..wire.errors import ErrorCode

UNKNOWN_OFFSET = -1


class FollowerState:
    """Kafka's ReplicaState of a remote replica, on its leader."""
    __slots__ = ("leo", "last_caught_up_ms", "last_fetch_leader_leo", "last_fetch_ms")

    def __init__(self, caught_up_ms: int):
        self.leo = UNKNOWN_OFFSET  # unknown until its first fetch in this leader epoch
        self.last_caught_up_ms = caught_up_ms
        self.last_fetch_leader_leo = UNKNOWN_OFFSET
        self.last_fetch_ms = caught_up_ms

    def fetched(self, fetch_offset: int, leader_leo: int, now_ms: int) -> None:
        """Kafka's updateFetchState: caught up now when it asked for the leader's LEO, or
        at its previous fetch when it now asks for what the leader had then."""
        if fetch_offset >= leader_leo:
            self.last_caught_up_ms = max(self.last_caught_up_ms, now_ms)
        elif fetch_offset >= self.last_fetch_leader_leo:
            self.last_caught_up_ms = max(self.last_caught_up_ms, self.last_fetch_ms)
        self.leo = fetch_offset
        self.last_fetch_leader_leo = leader_leo
        self.last_fetch_ms = now_ms


class PartitionLeader:
    """This broker leads the partition at `epoch`. `isr` is the committed ISR (the state
    znode's); `pending` an ISR written but not yet confirmed, during which the HW counts
    both (Kafka's maximal ISR), so neither an expansion nor a shrink lets it run ahead."""

    def __init__(self, log: Any, node_id: int, epoch: int, replicas: Iterable[int],
                 isr: Iterable[int], now_ms: int, lag_ms: int,
                 min_isr: Callable[[], int] = lambda: 1,
                 eligible: Callable[[int], bool] = lambda replica: True):
        self.log = log
        self.node_id = node_id
        self.epoch = epoch
        self.epoch_start_offset = log.log_end_offset  # Kafka's leaderEpochStartOffsetOpt
        self.isr: tuple[int, ...] = tuple(isr)
        self.pending: tuple[int, ...] | None = None
        self.lag_ms = lag_ms
        self.min_isr = min_isr
        self.eligible = eligible  # may join the ISR (a live broker)
        self.followers: dict[int, FollowerState] = {}
        self.set_replicas(replicas, now_ms)
        self._waiters: list[tuple[int, asyncio.Future]] = []

    def set_replicas(self, replicas: Iterable[int], now_ms: int) -> None:
        """The assignment's replicas; a new one starts unknown and out of date (Kafka's
        resetReplicaState: ISR members count as caught up when the leadership starts)."""
        keep = {}
        for r in replicas:
            if r != self.node_id:
                keep[r] = self.followers.get(r) or FollowerState(
                    now_ms if r in self.isr else 0)
        self.followers = keep

    def new_epoch(self, epoch: int) -> None:
        """Still the leader at a newer epoch (the controller removed a replica from the
        ISR): follower states and waiters stay, the epoch starts at the log end (Kafka's
        makeLeader when it was the leader already)."""
        self.epoch = epoch
        self.epoch_start_offset = self.log.log_end_offset

    def set_isr(self, isr: Iterable[int]) -> None:
        """The committed ISR (read from, or written to, the state znode)."""
        self.isr = tuple(isr)
        self.pending = None

    # --- followers' fetches -----------------------------------------------------------------

    def follower_fetched(self, replica: int, fetch_offset: int, now_ms: int) -> bool:
        """A Fetch from `replica` at `fetch_offset`; False when it is not a replica."""
        f = self.followers.get(replica)
        if f is None:
            return False
        f.fetched(fetch_offset, self.log.log_end_offset, now_ms)
        return True

    def _hw_members(self) -> set[int]:
        members = set(self.isr)
        if self.pending is not None:
            members.update(self.pending)
        return members

    def maybe_increment_hw(self, now_ms: int | None = None) -> bool:
        """HW = min LEO over the (maximal) ISR, the leader's own included, and over the
        followers about to rejoin it (caught up within lag_ms and eligible, at `now_ms`); it
        only moves forward, and not while the ISR is below min.insync.replicas (Kafka 3.8's
        maybeIncrementLeaderHW, KIP-966). Returns whether it moved; waiters it satisfies
        are answered."""
        if len(self.isr) < self.min_isr():
            return False
        hw = self.log.log_end_offset
        members = self._hw_members()
        for r, f in self.followers.items():
            if f.leo < hw and (r in members or (
                    now_ms is not None and f.leo >= 0 and self.eligible(r) and
                    now_ms - f.last_caught_up_ms <= self.lag_ms)):
                hw = f.leo
        moved = hw > self.log.high_watermark and self.log.update_high_watermark(hw)
        if moved:
            self._complete_waiters()
        return moved

    def expansion(self, replica: int) -> tuple[int, ...] | None:
        """The ISR with `replica` added, when it is out of the ISR and caught up to both the
        HW and the start of this leader epoch (Kafka's maybeExpandIsr); else None."""
        f = self.followers.get(replica)
        if f is None or replica in self.isr or self.pending is not None:
            return None
        if f.leo >= self.log.high_watermark and f.leo >= self.epoch_start_offset:
            return (*self.isr, replica)
        return None

    def out_of_sync(self, now_ms: int) -> set[int]:
        """ISR followers not caught up for more than lag_ms (Kafka's getOutOfSyncReplicas:
        one at the leader's LEO is in sync however long ago it last fetched)."""
        leo = self.log.log_end_offset
        return {r for r in self.isr if (f := self.followers.get(r)) is not None
                and f.leo != leo and now_ms - f.last_caught_up_ms > self.lag_ms}

    def shrunk(self, now_ms: int) -> tuple[int, ...] | None:
        """The ISR without its out-of-sync followers, None when none is (or while another
        ISR write is in flight)."""
        if self.pending is not None:
            return None
        out = self.out_of_sync(now_ms)
        return tuple(r for r in self.isr if r not in out) if out else None

    # --- acks=all -----------------------------------------------------------------------

    def enough_replicas(self) -> bool:
        """min.insync.replicas against the committed ISR (checked before an acks=all
        append, as Partition.appendRecordsToLeader)."""
        return len(self.isr) >= self.min_isr()

    def wait_for(self, required_offset: int) -> asyncio.Future:
        """A future answered with the partition's error code once the HW reaches
        `required_offset` (the appended batch's last offset + 1): NONE, or
        NOT_ENOUGH_REPLICAS_AFTER_APPEND when the ISR shrank below min.insync.replicas."""
        fut = asyncio.get_running_loop().create_future()
        if self.log.high_watermark >= required_offset:
            fut.set_result(self._ack_code())
        else:
            self._waiters.append((required_offset, fut))
        return fut

    def _ack_code(self) -> int:
        return ErrorCode.none if self.enough_replicas() \
            else ErrorCode.not_enough_replicas_after_append

    def _complete_waiters(self) -> None:
        hw = self.log.high_watermark
        keep = []
        for required, fut in self._waiters:
            if fut.done():
                continue
            if hw >= required:
                fut.set_result(self._ack_code())
            else:
                keep.append((required, fut))
        self._waiters = keep

    def fail_waiters(self, code: int) -> None:
        """Leadership lost (NOT_LEADER_OR_FOLLOWER): nothing waiting is acknowledged."""
        waiters, self._waiters = self._waiters, []
        for _required, fut in waiters:
            if not fut.done():
                fut.set_result(code)
