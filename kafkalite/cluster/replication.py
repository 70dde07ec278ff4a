# Replication between cluster brokers (issue 17, design steps 6-7): each partition's role on
# this broker, from the cluster view's partition states (zk_view.add_listener, in
# ZooKeeper's order), as Kafka's ReplicaManager.makeLeaders/makeFollowers did from
# LeaderAndIsr:
#
#   leader    a PartitionLeader (replication_leader.py): followers' LEOs from their Fetch
#             requests (fetch.py calls follower_fetched), the HW, acks=all waiters. Every
#             replica.lag.time.max.ms / 2 the out-of-sync followers are dropped from the ISR;
#             a follower that catches up is added back. The leader writes these ISR changes
#             itself, conditionally on the state znode's version (zk_view.write_isr, Kafka's
#             ZooKeeper mode before KIP-497); a lost write waits for the state's next read.
#   follower  fetched from its leader (replica_fetcher.py), truncating first.
#
# The leader epoch is stamped on appends (produce.py asks the view), and assigned in the
# epoch cache at the log end when the leadership starts (Kafka's makeLeader). The HWs are
# checkpointed every replica.high.watermark.checkpoint.interval.ms. A single-node broker
# has none of this (broker.replication is None).
from __future__ import annotations

import asyncio
import logging
from typing import Any

from ..wire.errors import ErrorCode
from .replica_fetcher import ReplicaFetchers
from .replication_leader import PartitionLeader

log = logging.getLogger("kafkalite.replication")

Key = tuple[str, int]


class Replication:
    """Replication of the partitions this broker holds replicas of; counters read by the
    metrics (isr_shrinks, isr_expands)."""

    def __init__(self, broker: Any, view: Any, config: Any):
        self.broker = broker
        self.view = view
        self.clock = broker.clock
        self.node_id: int = broker.node_id
        self.lag_ms: int = config["replica.lag.time.max.ms"]
        self.checkpoint_ms: int = config["replica.high.watermark.checkpoint.interval.ms"]
        self.leaders: dict[Key, PartitionLeader] = {}
        self.fetchers = ReplicaFetchers(broker, view, config)
        self.isr_shrinks = 0
        self.isr_expands = 0
        self._timers: dict[str, Any] = {}
        self._writes: set[asyncio.Task] = set()

    def start(self) -> None:
        """Follow the view from its current states on (every later change by listener)."""
        self.view.add_listener(self.on_state)
        self.broker.notifier.append_listeners.append(self.on_append)
        for topic, partition, state in self.view.partition_states():
            self.on_state(topic, partition, None, state)
        self._timers["isr"] = self.clock.call_later(self.lag_ms / 2, self._check_isr)
        self._timers["hw"] = self.clock.call_later(self.checkpoint_ms, self._checkpoint)

    async def stop(self) -> None:
        for t in self._timers.values():
            t.cancel()
        for leader in self.leaders.values():
            leader.fail_waiters(ErrorCode.not_leader_or_follower)
        await self.fetchers.close()
        for task in list(self._writes):
            task.cancel()
        await asyncio.gather(*self._writes, return_exceptions=True)

    # --- roles ----------------------------------------------------------------------------

    def on_state(self, topic: str, partition: int, old: Any, new: Any) -> None:
        """A partition state znode changed (view listener)."""
        key = (topic, partition)
        p = self.broker.logs.partition(topic, partition)
        ps = self.view.partition(topic, partition)
        if new is None or p is None or ps is None or self.node_id not in ps.replicas:
            self._resign(key)
            self.fetchers.unfollow(topic, partition)
            return
        p.replicated = True
        p.on_truncate = self._truncated
        now = self.clock.monotonic_ms()
        if new.leader == self.node_id:
            self.fetchers.unfollow(topic, partition)
            leader = self.leaders.get(key)
            if leader is None or leader.epoch != new.leader_epoch:
                p.epochs.assign(new.leader_epoch, p.log_end_offset)
                log.info("Leading %s-%d at epoch %d from offset %d, isr %s", topic,
                         partition, new.leader_epoch, p.log_end_offset, list(new.isr))
            if leader is None:
                leader = PartitionLeader(p, self.node_id, new.leader_epoch, ps.replicas,
                                         new.isr, now, self.lag_ms,
                                         lambda: self._min_isr(topic), self._live)
                self.leaders[key] = leader
            else:
                if leader.epoch != new.leader_epoch:
                    leader.new_epoch(new.leader_epoch)
                leader.set_isr(new.isr)
                leader.set_replicas(ps.replicas, now)
            self._hw_maybe_moved(key, leader)
            return
        self._resign(key)
        if new.leader >= 0:
            self.fetchers.follow(topic, partition, new.leader, new.leader_epoch, p)
        else:
            self.fetchers.unfollow(topic, partition)

    def _truncated(self, p: Any, offset: int) -> None:
        """A follower's truncation: its producer state back to what the log now holds."""
        self.broker.producers.load(p)

    def _resign(self, key: Key) -> None:
        leader = self.leaders.pop(key, None)
        if leader is not None:
            leader.fail_waiters(ErrorCode.not_leader_or_follower)

    def _live(self, replica: int) -> bool:
        """May join the ISR: a registered broker (Kafka's isReplicaIsrEligible)."""
        return self.view.broker(replica, None) is not None

    def _min_isr(self, topic: str) -> int:
        t = self.broker.logs.get(topic)
        configs = t.configs if t is not None else {}
        return self.broker.logs.effective(configs, "min.insync.replicas")

    # --- the leader's side ----------------------------------------------------------------

    def on_append(self, topic: str, partition: int) -> None:
        """A local append (produce, markers, coordinators): with an ISR of one the HW moves."""
        leader = self.leaders.get((topic, partition))
        if leader is not None:
            leader.maybe_increment_hw(self.clock.monotonic_ms())

    def follower_fetched(self, topic: str, partition: int, replica: int,
                         fetch_offset: int) -> None:
        """A follower's Fetch (replica_id >= 0) asked for `fetch_offset`: its LEO."""
        key = (topic, partition)
        leader = self.leaders.get(key)
        if leader is None or fetch_offset > leader.log.log_end_offset or \
                not leader.follower_fetched(replica, fetch_offset, self.clock.monotonic_ms()):
            return
        self._hw_maybe_moved(key, leader)
        isr = leader.expansion(replica)
        if isr is not None and self._live(replica):
            self._propose(key, leader, isr, expand=True)

    def _hw_maybe_moved(self, key: Key, leader: PartitionLeader) -> None:
        if leader.maybe_increment_hw(self.clock.monotonic_ms()):
            self.broker.notifier.wake(*key)  # consumers read up to the HW

    def produce_error(self, topic: str, partition: int) -> int:
        """Before an acks=all append: NOT_ENOUGH_REPLICAS below min.insync.replicas."""
        leader = self.leaders.get((topic, partition))
        if leader is not None and not leader.enough_replicas():
            return ErrorCode.not_enough_replicas
        return ErrorCode.none

    def wait_acks(self, topic: str, partition: int, required_offset: int
                  ) -> asyncio.Future | None:
        """After an acks=all append: a future of the partition's error code once the HW
        passes `required_offset` (None when this broker does not lead it)."""
        leader = self.leaders.get((topic, partition))
        return leader.wait_for(required_offset) if leader is not None else None

    # --- ISR changes ----------------------------------------------------------------------

    def _check_isr(self) -> None:
        """Kafka's isr-expiration task, every replica.lag.time.max.ms / 2."""
        self._timers["isr"] = self.clock.call_later(self.lag_ms / 2, self._check_isr)
        now = self.clock.monotonic_ms()
        for key, leader in list(self.leaders.items()):
            isr = leader.shrunk(now)
            if isr is not None:
                self._propose(key, leader, isr, expand=False)

    def _propose(self, key: Key, leader: PartitionLeader, isr: tuple[int, ...],
                 expand: bool) -> None:
        leader.pending = isr
        task = asyncio.ensure_future(self._write(key, leader, isr, expand))
        self._writes.add(task)
        task.add_done_callback(self._writes.discard)

    async def _write(self, key: Key, leader: PartitionLeader, isr: tuple[int, ...],
                     expand: bool) -> None:
        old = leader.isr
        try:
            written = await self.view.write_isr(*key, isr)
        except Exception as e:  # noqa: BLE001 - the next check decides again
            log.warning("ISR write of %s-%d failed: %r", *key, e)
            written = False
        if self.leaders.get(key) is not leader:
            return
        if not written:
            if leader.pending == isr:
                leader.pending = None
            return
        leader.set_isr(isr)
        if expand:
            self.isr_expands += 1
        else:
            self.isr_shrinks += 1
        log.info("%s ISR of %s-%d from %s to %s", "Expanding" if expand else "Shrinking",
                 *key, list(old), list(isr))
        self._hw_maybe_moved(key, leader)

    def _checkpoint(self) -> None:
        self._timers["hw"] = self.clock.call_later(self.checkpoint_ms, self._checkpoint)
        try:
            written = self.broker.logs.checkpoint_high_watermarks()  # on the flusher thread
        except Exception:  # noqa: BLE001 - retried at the next interval
            log.exception("High watermark checkpoint failed")
            return
        if written is not None:
            written.add_done_callback(_checkpoint_done)


def _checkpoint_done(written: Any) -> None:
    if written.exception() is not None:  # retried at the next interval
        log.warning("High watermark checkpoint failed: %r", written.exception())
