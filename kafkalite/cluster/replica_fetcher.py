# Followers copying their leaders' logs (issue 17, design step 6), as Kafka's
# ReplicaFetcherThread: one fetcher per source broker, one connection each, sending Fetch at
# this broker's highest version (v17: replica_id in replica_state, topics by id) with every
# partition it follows from that leader and each one's current_leader_epoch. Fetched batches
# are appended as they are (PartitionLog.append_replica: offsets and leader epochs kept),
# the producer state follows each appended batch header (so idempotence and transactions
# survive a failover), and the follower's HW is min(leader's HW, own LEO).
#
# A partition joins a fetcher "truncating" (Kafka's become-follower, KIP-101/279): before
# its first fetch, OffsetForLeaderEpoch asks the leader where this replica's latest epoch
# ends on the leader, and the log is truncated to min(that, own end of that epoch), so a
# former leader's unreplicated tail is dropped before anything new is appended.
# OFFSET_OUT_OF_RANGE with the leader's log start above our LEO starts the log over there
# (truncate_fully_and_start_at; at the first batch's base when that start is inside it);
# otherwise the partition truncates again. The leader's log start (DeleteRecords) moves the
# follower's along, up to its HW. Errors (fenced
# epochs, a leader that moved) back off for replica.fetch.backoff.ms: the cluster view's
# next state moves the partition.
#
# The connection is the inter-broker one (inter_broker.py: the leader's endpoint of the
# inter-broker listener, TLS and SASL as configured); a leader registered without that
# listener, or a failed login, is logged and retried after replica.fetch.backoff.ms, as
# Kafka's fetcher retries.
#
# Gaps: no fetch sessions (every fetch is a full one), no last_fetched_epoch divergence
# (truncation is by OffsetForLeaderEpoch, as Kafka before 2.7), no replication throttling.
from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass, field
from typing import Any, Callable

from ..broker.build import ms
from ..wire.errors import ErrorCode
from ..wire.records import HEADER_SIZE, parse_header
from .inter_broker import Channel, InterBroker

log = logging.getLogger("kafkalite.replication")

FETCH, LIST_OFFSETS, OFFSET_FOR_LEADER_EPOCH = 1, 2, 23
FETCH_VERSION, LIST_OFFSETS_VERSION, OFFSETS_VERSION = 17, 8, 4
EARLIEST = -2  # ListOffsets' timestamp for the log start offset
UNDEFINED = -1


def truncation_offset(leo: int, hw: int, requested_epoch: int, leader_epoch: int,
                      leader_end: int, own_end_of: Any) -> int:
    """Where a new follower truncates (KIP-101/279). `requested_epoch` is its latest epoch,
    (leader_epoch, leader_end) the leader's OffsetForLeaderEpoch answer, own_end_of(epoch)
    the follower's end offset of an epoch. The leader knowing no such epoch (UNDEFINED):
    the HW, as before KIP-101; the leader answering an older epoch (it never had ours): our
    end of that one, so a divergent tail of later epochs goes too."""
    if leader_end == UNDEFINED or leader_epoch == UNDEFINED:
        return min(hw, leo)
    if leader_epoch != requested_epoch:
        return min(leader_end, own_end_of(leader_epoch), leo)
    return min(leader_end, leo)


def _grouped(followed: list, key: Callable[[Any], Any], make: Callable[[Any], Any]
             ) -> dict[Any, list]:
    """make(f) of each partition, grouped by key(f) (a request's topics), in order."""
    out: dict[Any, list] = {}
    for f in followed:
        out.setdefault(key(f), []).append(make(f))
    return out


@dataclass(eq=False)
class Followed:
    """A partition followed from one leader at one leader epoch."""
    topic: str
    partition: int
    epoch: int
    truncating: bool = True
    topic_id: Any = None
    log: Any = field(default=None, repr=False)
    delayed_until: float = 0.0  # after an error, the loop time it is asked about again
    out_of_range: bool = False  # the leader's log start is asked before the next fetch


class SourceFetcher:
    """Every partition this broker follows from one leader, fetched over one connection."""

    def __init__(self, owner: "ReplicaFetchers", leader: int):
        self.owner = owner
        self.leader = leader
        self.partitions: dict[tuple[str, int], Followed] = {}
        self._task: asyncio.Task | None = None
        self._channel: Channel | None = None

    def ensure_running(self) -> None:
        if self._task is None or self._task.done():
            self._task = asyncio.ensure_future(self._run())

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
        self._close()

    def _close(self) -> None:
        if self._channel is not None:
            self._channel.close()
            self._channel = None

    async def _run(self) -> None:
        owner = self.owner
        loop = asyncio.get_running_loop()
        while self.partitions and not owner.closing:
            try:
                if self._channel is None:
                    self._channel = await self._connect()
                for f in [f for f in self.partitions.values() if f.out_of_range]:
                    f.out_of_range = False
                    await self._out_of_range(f)
                now = loop.time()
                todo = [f for f in self.partitions.values()
                        if f.truncating and f.delayed_until <= now]
                if todo:
                    await self._truncate(todo)
                ready = [f for f in self.partitions.values()
                         if not f.truncating and f.delayed_until <= now]
                if ready:  # a long poll: the leader answers when it has data, or max_wait
                    await self._fetch(ready)
                    continue
                if not todo:  # every partition backs off after an error (Kafka's delay)
                    await asyncio.sleep(max(0.0, min(
                        f.delayed_until for f in self.partitions.values()) - now))
            except asyncio.CancelledError:
                raise
            except Exception as e:  # noqa: BLE001 - a fetcher outlives any one failure
                log.info("Replica fetcher for leader %d: %r; retrying", self.leader, e)
                self._close()
                await asyncio.sleep(owner.backoff_s)
        self._close()

    async def _connect(self) -> Channel:
        owner = self.owner
        return await owner.inter_broker.open(owner.view, self.leader, owner.client_id,
                                             owner.timeout_s)

    # --- become-follower truncation -------------------------------------------------------

    def _delay(self, f: Followed) -> None:
        f.delayed_until = asyncio.get_running_loop().time() + self.owner.backoff_s

    async def _truncate(self, todo: list[Followed]) -> None:
        owner = self.owner
        mod = owner.offsets_module
        by_topic = _grouped(todo, lambda f: f.topic, lambda f: mod.OffsetForLeaderPartition(
            partition=f.partition, current_leader_epoch=f.epoch,
            leader_epoch=f.log.epochs.latest_epoch))
        req = mod.OffsetForLeaderEpochRequest(replica_id=owner.node_id, topics=tuple(
            mod.OffsetForLeaderTopic(topic=t, partitions=tuple(ps)) for t, ps in by_topic.items()))
        resp = await self._channel.call(OFFSET_FOR_LEADER_EPOCH, OFFSETS_VERSION, req,
                                        owner.timeout_s)
        answers = {(t.topic, r.partition): r for t in resp.topics for r in t.partitions}
        for f in todo:
            r = answers.get((f.topic, f.partition))
            if r is None or self.partitions.get((f.topic, f.partition)) is not f:
                continue
            if r.error_code != ErrorCode.none:
                log.info("OffsetForLeaderEpoch of %s-%d from %d: %s", f.topic, f.partition,
                         self.leader, ErrorCode(r.error_code).name)
                self._delay(f)
                continue
            p = f.log
            requested = p.epochs.latest_epoch
            offset = truncation_offset(
                p.log_end_offset, p.high_watermark, requested, r.leader_epoch, r.end_offset,
                lambda e, p=p: p.epochs.end_offset_for(e, p.log_end_offset)[1])
            if requested == UNDEFINED:  # nothing of any epoch here: nothing to truncate
                offset = p.log_end_offset
            if offset < p.log_end_offset:
                log.info("Truncating %s-%d from %d to %d (leader %d epoch %d)", f.topic,
                         f.partition, p.log_end_offset, offset, self.leader, f.epoch)
                p.truncate_to(offset)
            f.truncating = False

    # --- fetching -------------------------------------------------------------------------

    async def _fetch(self, asked: list[Followed]) -> None:
        """One Fetch of the partitions `asked`, its answers applied."""
        owner = self.owner
        mod = owner.fetch_module
        by_topic = _grouped(asked, lambda f: f.topic_id, lambda f: mod.FetchPartition(
            partition=f.partition, current_leader_epoch=f.epoch,
            fetch_offset=f.log.log_end_offset, log_start_offset=f.log.log_start_offset,
            partition_max_bytes=owner.partition_max_bytes))
        req = mod.FetchRequest(
            replica_state=mod.ReplicaState(replica_id=owner.node_id),
            max_wait=ms(owner.max_wait_ms), min_bytes=owner.min_bytes,
            max_bytes=owner.response_max_bytes, isolation_level=0, session_id=0,
            session_epoch=-1, topics=tuple(mod.FetchTopic(topic_id=t, partitions=tuple(ps))
                                           for t, ps in by_topic.items()),
            forgotten_topics_data=(), rack_id="")
        resp = await self._channel.call(FETCH, FETCH_VERSION, req,
                                        owner.timeout_s + owner.max_wait_ms / 1000)
        if resp.error_code != ErrorCode.none:
            raise ConnectionError(f"Fetch answered {ErrorCode(resp.error_code).name}")
        by_key = {(f.topic_id, f.partition): f for f in asked}
        for t in resp.responses:
            for r in t.partitions:
                f = by_key.get((t.topic_id, r.partition_index))
                if f is None or self.partitions.get((f.topic, f.partition)) is not f:
                    continue  # moved meanwhile
                try:
                    self._apply(f, r)
                except Exception as e:  # noqa: BLE001 - this partition only backs off
                    log.warning("Replicating %s-%d from %d failed: %r", f.topic, f.partition,
                                self.leader, e)
                    f.truncating = True  # where the log ends is asked again
                    self._delay(f)

    async def _out_of_range(self, f: Followed) -> None:
        """OFFSET_OUT_OF_RANGE (Kafka's fetchOffsetAndTruncate): the leader's log start
        (ListOffsets EARLIEST, as the answer carries none) above our end starts the log over
        there; else the leader may end below us: truncation by epoch again."""
        owner = self.owner
        mod = owner.list_offsets_module
        req = mod.ListOffsetsRequest(replica_id=owner.node_id, isolation_level=0, topics=(
            mod.ListOffsetsTopic(name=f.topic, partitions=(mod.ListOffsetsPartition(
                partition_index=f.partition, current_leader_epoch=f.epoch,
                timestamp=EARLIEST),)),))
        resp = await self._channel.call(LIST_OFFSETS, LIST_OFFSETS_VERSION, req,
                                        owner.timeout_s)
        (r,) = resp.topics[0].partitions
        if self.partitions.get((f.topic, f.partition)) is not f:
            return
        p = f.log
        if r.error_code != ErrorCode.none:
            self._delay(f)
        elif r.offset > p.log_end_offset:
            log.info("%s-%d: leader %d starts at %d, past our end %d: starting over",
                     f.topic, f.partition, self.leader, r.offset, p.log_end_offset)
            p.truncate_fully_and_start_at(r.offset)
        else:
            f.truncating = True

    def _apply(self, f: Followed, r: Any) -> None:
        p = f.log
        if r.error_code == ErrorCode.offset_out_of_range:
            f.out_of_range = True
            return
        if r.error_code != ErrorCode.none:
            log.info("Fetch of %s-%d from %d: %s", f.topic, f.partition, self.leader,
                     ErrorCode(r.error_code).name)
            self._delay(f)
            return
        data = r.records
        appended = False
        if data:
            if p.log_end_offset == p.log_start_offset and len(data) >= HEADER_SIZE:
                first = parse_header(data)
                if first.base_offset < p.log_end_offset <= first.last_offset:
                    # the leader's log start is inside this batch (DeleteRecords): the empty
                    # log starts at the batch instead (Kafka's appendRecordsToFollower)
                    p.truncate_fully_and_start_at(first.base_offset)
            # attached to the log, the producer state follows each batch in append_replica
            # (once: applying the headers here again filled its 5-batch memory twice)
            self.owner.broker.producer_state(p)
            appended = bool(p.append_replica(data))
        p.update_high_watermark(min(r.high_watermark, p.log_end_offset))
        if p.log_start_offset < r.log_start_offset <= p.high_watermark:
            p.delete_records(r.log_start_offset)  # the leader's log start, as Kafka's follower
        if appended:
            self.owner.broker.notifier.wake(f.topic, f.partition)


class ReplicaFetchers:
    """Kafka's ReplicaFetcherManager: which leader each followed partition is fetched from."""

    def __init__(self, broker: Any, view: Any, config: Any):
        from kio.schema.fetch.v17 import request as fetch_module
        from kio.schema.list_offsets.v8 import request as list_offsets_module
        from kio.schema.offset_for_leader_epoch.v4 import request as offsets_module
        self.broker = broker
        self.view = view
        self.node_id: int = broker.node_id
        self.client_id = f"broker-{self.node_id}-fetcher"
        self.fetch_module = fetch_module
        self.offsets_module = offsets_module
        self.list_offsets_module = list_offsets_module
        self.inter_broker: InterBroker = getattr(broker, "inter_broker", None) or InterBroker()
        self.max_wait_ms: int = config["replica.fetch.wait.max.ms"]
        self.min_bytes: int = config["replica.fetch.min.bytes"]
        self.partition_max_bytes: int = config["replica.fetch.max.bytes"]
        self.response_max_bytes: int = config["replica.fetch.response.max.bytes"]
        self.backoff_s: float = config["replica.fetch.backoff.ms"] / 1000
        self.timeout_s: float = config["replica.socket.timeout.ms"] / 1000
        self._fetchers: dict[int, SourceFetcher] = {}
        self._where: dict[tuple[str, int], int] = {}
        self.closing = False

    def follow(self, topic: str, partition: int, leader: int, epoch: int, p: Any) -> None:
        """Fetch the partition from `leader` at `epoch` (truncating first), unless it is
        followed so already."""
        key = (topic, partition)
        current = self._where.get(key)
        if current == leader:
            f = self._fetchers[leader].partitions.get(key)
            if f is not None and f.epoch == epoch:
                return
        self.unfollow(topic, partition)
        t = self.view.topic(topic)
        fetcher = self._fetchers.get(leader)
        if fetcher is None:
            fetcher = self._fetchers[leader] = SourceFetcher(self, leader)
        fetcher.partitions[key] = Followed(topic, partition, epoch, True,
                                           t.topic_id if t is not None else None, p)
        self._where[key] = leader
        fetcher.ensure_running()

    def unfollow(self, topic: str, partition: int) -> None:
        leader = self._where.pop((topic, partition), None)
        if leader is not None:
            self._fetchers[leader].partitions.pop((topic, partition), None)

    def following(self, topic: str, partition: int) -> int | None:
        return self._where.get((topic, partition))

    async def close(self) -> None:
        self.closing = True
        await asyncio.gather(*(f.stop() for f in self._fetchers.values()),
                             return_exceptions=True)
