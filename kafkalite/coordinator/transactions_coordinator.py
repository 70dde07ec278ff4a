# The transaction coordinator, as Kafka 3.8's TransactionCoordinator answers InitProducerId,
# AddPartitionsToTxn (and its verify-only form), AddOffsetsToTxn, EndTxn, DescribeTransactions
# and ListTransactions, with its state in __transaction_state (transactions_log.py).
#
# Every transition is written (and, with kafkalite.fsync.before.ack, synced: `durable`) before
# it is applied or answered. EndTxn writes PrepareCommit/PrepareAbort, then the markers into
# every partition of the transaction (`write_markers`, the log side's), then
# CompleteCommit/CompleteAbort. Kafka answers EndTxn once the Prepare record is written and
# sends markers afterwards; here the answer waits for the markers too (MARKERS_WAIT_S at most:
# on one node they are local appends), so a client's next transaction does not meet
# CONCURRENT_TRANSACTIONS. In a cluster a marker counts once its partition's ISR has it
# (broker/txn_markers.py). Markers that fail are retried by tick(), as Kafka's marker channel
# retries them; a transaction found prepared at load is completed the same way.
#
# Timers run on the injected clock: an Ongoing transaction older than its timeout is aborted
# with a bumped epoch (the zombie producer is fenced); an id idle in a complete state for
# transactional.id.expiration.ms is forgotten (a tombstone). Wall times are what Kafka stores
# and shows; deadlines are kept on the monotonic reading.
from __future__ import annotations

import asyncio
import logging
from typing import Any, Awaitable, Callable, Iterable

from ..clock import Clock
from ..wire.errors import ErrorCode as E
from .transactions import (COMPLETE, EXPIRABLE, PREPARED, IllegalState, Partition,
                           TransactionMetadata, Transit, TxnState as S, epoch_exhausted)
from .transactions_queries import TransactionQueries
from .transactions_leadership import TxnLeadership
from .transactions_log import TransactionLog, decode_key, decode_value

log = logging.getLogger("kafkalite.transactions")

# EndTxn's wait for the markers: in a cluster one may wait for its ISR longer than a client
# waits for EndTxn; the completion then goes on in the background, as Kafka's always does.
MARKERS_WAIT_S = 5.0
MarkerWriter = Callable[[int, int, int, bool, list[Partition]], Awaitable[dict]]


class TransactionCoordinator(TxnLeadership, TransactionQueries):
    def __init__(self, config: Any, logs: Any, create_topic: Callable[..., Any], *,
                 clock: Clock, allocate_pid: Callable[[], Awaitable[int]],
                 write_markers: MarkerWriter,
                 durable: Callable[[int], Awaitable[None]] | None = None,
                 notify: Callable[[str, int], None] | None = None):
        self.clock = clock
        self.log = TransactionLog(logs, create_topic,
                                  config["transaction.state.log.num.partitions"], notify,
                                  config["transaction.state.log.segment.bytes"],
                                  config["transaction.state.log.min.isr"])
        self.max_timeout_ms = config["transaction.max.timeout.ms"]
        self.expiration_ms = config["transactional.id.expiration.ms"]
        self.abort_interval_ms = config["transaction.abort.timed.out.transaction.cleanup.interval.ms"]
        self.expiry_interval_ms = config[
            "transaction.remove.expired.transaction.cleanup.interval.ms"]
        self.allocate_pid = allocate_pid
        self.write_markers = write_markers
        self.durable = durable
        self.txns: dict[str, TransactionMetadata] = {}
        self.by_pid: dict[int, TransactionMetadata] = {}
        self.loading = False
        self.committed = 0
        self.aborted = 0
        self._unmarked: dict[str, set[Partition]] = {}  # prepared, markers still to write
        self._tasks: set[asyncio.Task] = set()
        now = clock.monotonic_ms()
        self._next_abort_check = now + self.abort_interval_ms
        self._next_expiry_check = now + self.expiry_interval_ms
        self.init_leadership(bool(config["zookeeper.connect"]))

    # --- lifecycle ------------------------------------------------------------------------

    def open(self) -> None:
        """Replay __transaction_state: in the background when an event loop runs (requests
        meanwhile get COORDINATOR_LOAD_IN_PROGRESS), else at once."""
        if self.log.topic() is None or self.leadership is not None:
            return
        self.loading = True
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            for _ in self._replay():
                pass
            self._loaded()
            return
        self._spawn(self._load_async())

    def close(self) -> None:
        for t in list(self._tasks):
            t.cancel()
        if self.leadership is not None:
            self.leadership.close()

    def _replay(self, partitions: Iterable[int] | None = None) -> Iterable[None]:
        last: dict[str, Transit | None] = {}
        for p in range(self.log.num_partitions) if partitions is None else partitions:
            for rec in self.log.replay(p):
                if rec is None:
                    yield None
                    continue
                try:
                    txn_id = decode_key(rec[0])
                    if txn_id is not None:
                        last[txn_id] = None if rec[1] is None else decode_value(txn_id, rec[1])
                except (ValueError, IndexError, UnicodeDecodeError) as e:
                    log.warning("Skipping an unreadable record of __transaction_state: %s", e)
        for txn_id, t in last.items():
            if t is not None and t.state != S.DEAD:
                meta = TransactionMetadata(txn_id, t.producer_id)
                meta.apply(t)
                self.txns[txn_id] = meta
                self.by_pid[t.producer_id] = meta
                self._set_deadlines(meta, loaded=True)

    async def _load_async(self) -> None:
        try:
            for _ in self._replay():
                await asyncio.sleep(0)
        except Exception:
            log.exception("Loading __transaction_state failed; serving what was read")
        self._loaded()

    def _loaded(self, partitions: Iterable[int] | None = None) -> None:
        self.loading = False
        mine = None if partitions is None else set(partitions)
        prepared = [m for m in self.txns.values() if m.state in PREPARED and (
            mine is None or self.log.partition_for(m.transactional_id) in mine)]
        log.info("Loaded %d transactional ids from __transaction_state (%d to complete)",
                 len(self.txns), len(prepared))
        for meta in prepared:
            # As Kafka after a load: a transaction caught between Prepare and Complete gets
            # its markers (again) and is completed.
            self._unmarked[meta.transactional_id] = set(meta.partitions)
        if prepared:
            self._retry_completions()

    # --- timers ---------------------------------------------------------------------------

    def _set_deadlines(self, meta: TransactionMetadata, loaded: bool = False) -> None:
        mono = self.clock.monotonic_ms()
        # Since a load, the wall time elapsed before it counts against the deadlines.
        elapsed = lambda wall: max(0, self.clock.wall_ms() - wall) if loaded else 0  # noqa: E731
        if meta.state == S.ONGOING:
            if meta.timeout_deadline is None or loaded:
                meta.timeout_deadline = mono + meta.timeout_ms - elapsed(meta.start_ms)
        else:
            meta.timeout_deadline = None
        meta.expiry_deadline = (mono + self.expiration_ms - elapsed(meta.update_ms)
                                if meta.state in EXPIRABLE else None)

    def tick(self, now_ms: int) -> None:
        """Housekeeping on the monotonic reading `now_ms`: abort timed-out transactions
        (every transaction.abort.timed.out.transaction.cleanup.interval.ms), forget expired
        ids (every transaction.remove.expired.transaction.cleanup.interval.ms), retry
        markers that failed."""
        if self.loading:
            return
        if now_ms >= self._next_abort_check:
            self._next_abort_check = now_ms + self.abort_interval_ms
            self.abort_timed_out(now_ms)
            self._retry_completions()
        if now_ms >= self._next_expiry_check:
            self._next_expiry_check = now_ms + self.expiry_interval_ms
            if self._expired(now_ms):
                self._spawn(self.expire(now_ms))

    def abort_timed_out(self, now_ms: int) -> int:
        doomed = [m for m in self.txns.values() if m.state == S.ONGOING and m.pending is None
                  and m.timeout_deadline is not None and m.timeout_deadline < now_ms]
        for meta in doomed:
            log.info("Aborting transaction of %r (producer %d): open longer than %d ms",
                     meta.transactional_id, meta.producer_id, meta.timeout_ms)
            self._spawn(self._abort(meta))
        return len(doomed)

    async def _abort(self, meta: TransactionMetadata) -> None:
        # Fence and abort in one step of the loop: no request may see the fence pending.
        if meta.state == S.ONGOING and meta.pending is None:
            fence = meta.prepare_fence()
            await self.end_txn(meta.transactional_id, fence.producer_id, fence.producer_epoch,
                               False, from_client=False)

    def _expired(self, now_ms: int) -> list[TransactionMetadata]:
        return [m for m in self.txns.values() if m.state in EXPIRABLE and m.pending is None
                and m.expiry_deadline is not None and m.expiry_deadline <= now_ms]

    async def expire(self, now_ms: int) -> int:
        doomed = self._expired(now_ms)
        for meta in doomed:
            if meta.pending is not None:
                continue  # a request got to it while an earlier one was written
            t = meta.prepare_dead()
            if await self._persist(meta, t) == E.none:
                self.txns.pop(meta.transactional_id, None)
                if self.by_pid.get(meta.producer_id) is meta:
                    del self.by_pid[meta.producer_id]
                log.info("Expired transactional id %r", meta.transactional_id)
        return len(doomed)

    def _spawn(self, coro: Awaitable[Any]) -> asyncio.Task:
        task = asyncio.get_running_loop().create_task(coro)  # type: ignore[arg-type]
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    # --- persistence ----------------------------------------------------------------------

    async def _persist(self, meta: TransactionMetadata, t: Transit) -> E:
        """Write a prepared transition, then apply it; on failure forget it. Not once the
        id's partition has moved away (a completion resumed after a resignation): the new
        leader owns its log now, as Kafka's coordinator-epoch check on the append."""
        if self.leadership is not None and self.status(meta.transactional_id) is not None:
            meta.abort_pending()
            return E.not_coordinator
        try:
            partition = self.log.write(meta.transactional_id, None if t.state == S.DEAD else t,
                                       self.clock.wall_ms())
            if self.durable is not None:
                await self.durable(partition)
        except Exception as e:  # StorageError, OSError, ValueError (too large)
            log.error("Writing %s of %r to __transaction_state failed: %s",
                      t.state.kafka_name, meta.transactional_id, e)
            meta.abort_pending()
            return E.coordinator_not_available
        old_pid = meta.producer_id
        meta.complete(t)
        if old_pid != meta.producer_id and self.by_pid.get(old_pid) is meta:
            del self.by_pid[old_pid]
        self.by_pid[meta.producer_id] = meta
        self._set_deadlines(meta)
        return E.none

    # --- the APIs -------------------------------------------------------------------------

    async def init_producer_id(self, txn_id: str, timeout_ms: int,
                               expected: tuple[int, int] | None) -> tuple[E, int, int]:
        """(error, producer id, epoch) for a transactional InitProducerId; `expected` is the
        (producer id, epoch) a v3+ request names (KIP-360), None when it names none."""
        fail = (-1, -1)
        if txn_id == "":
            return (E.invalid_request, *fail)
        if not 0 < timeout_ms <= self.max_timeout_ms:
            return (E.invalid_transaction_timeout, *fail)
        status = self.status(txn_id)
        if status is not None:
            return (status, *fail)
        self.log.ensure_topic()
        meta = self.txns.get(txn_id)
        if meta is None:
            pid = await self.allocate_pid()
            meta = self.txns.setdefault(txn_id, TransactionMetadata(
                txn_id, pid, timeout_ms=timeout_ms, update_ms=self.clock.wall_ms()))
        if meta.pending is not None:
            return (E.concurrent_transactions, *fail)
        if expected is not None and not (
                meta.producer_epoch == -1 or expected[0] == meta.producer_id
                or (expected[0] == meta.last_producer_id and epoch_exhausted(expected[1]))):
            return (E.producer_fenced, *fail)
        if meta.state in PREPARED:
            return (E.concurrent_transactions, *fail)
        if meta.state == S.ONGOING:
            # Abort the open transaction with a bumped epoch (fencing its producer) and let
            # the new one retry: its next attempt bumps the epoch once more.
            fence = meta.prepare_fence()
            err = await self.end_txn(txn_id, fence.producer_id, fence.producer_epoch, False,
                                     from_client=False)
            return (err if err != E.none else E.concurrent_transactions, *fail)
        now = self.clock.wall_ms()
        if epoch_exhausted(meta.producer_epoch) and (
                expected is None or expected[1] == meta.producer_epoch):
            pid = await self.allocate_pid()
            if meta.pending is not None or meta.state not in COMPLETE:
                return (E.concurrent_transactions, *fail)
            t = meta.prepare_rotation(pid, timeout_ms, now, expected is not None)
        else:
            t = meta.prepare_increment_epoch(timeout_ms, None if expected is None
                                             else expected[1], now)
            if t is None:
                return (E.producer_fenced, *fail)
        err = await self._persist(meta, t)
        if err != E.none:
            return (err, *fail)
        log.info("Initialized transactional id %r with producer id %d and epoch %d",
                 txn_id, t.producer_id, t.producer_epoch)
        return E.none, t.producer_id, t.producer_epoch

    def _check_producer(self, txn_id: str, pid: int, epoch: int
                        ) -> tuple[E, TransactionMetadata | None]:
        if not txn_id:
            return E.invalid_request, None
        status = self.status(txn_id)
        if status is not None:
            return status, None
        meta = self.txns.get(txn_id)
        if meta is None or meta.producer_id != pid:
            return E.invalid_producer_id_mapping, None
        if meta.producer_epoch != epoch:
            return E.producer_fenced, None
        return E.none, meta

    async def add_partitions(self, txn_id: str, pid: int, epoch: int,
                             partitions: Iterable[Partition]) -> E:
        """AddPartitionsToTxn (and AddOffsetsToTxn with the group's offsets partition)."""
        err, meta = self._check_producer(txn_id, pid, epoch)
        if meta is None:
            return err
        if meta.pending is not None or meta.state in PREPARED:
            return E.concurrent_transactions
        added = set(partitions)
        if meta.state == S.ONGOING and added <= meta.partitions:
            return E.none
        return await self._persist(meta, meta.prepare_add_partitions(added,
                                                                     self.clock.wall_ms()))

    async def end_txn(self, txn_id: str, pid: int, epoch: int, commit: bool,
                      from_client: bool = True) -> E:
        if not txn_id:
            return E.invalid_request
        status = self.status(txn_id)
        if status is not None:
            return status
        meta = self.txns.get(txn_id)
        if meta is None or meta.producer_id != pid:
            return E.invalid_producer_id_mapping
        fencing = meta.pending is not None and meta.pending.state == S.PREPARE_EPOCH_FENCE
        err = self._end_check(meta, epoch, commit, from_client)
        if err is not None:
            if fencing and not from_client:
                meta.abort_pending()
            return err
        t = meta.prepare_end(commit, self.clock.wall_ms())
        err = await self._persist(meta, t)
        if err != E.none:
            if fencing:
                meta.failed_epoch_fence = True  # never returned to a client: reuse it
            return err
        self._unmarked[txn_id] = set(meta.partitions)
        task = self._spawn(self._complete(meta))
        await asyncio.wait([task], timeout=MARKERS_WAIT_S)
        return E.none

    @staticmethod
    def _end_check(meta: TransactionMetadata, epoch: int, commit: bool, from_client: bool
                   ) -> E | None:
        """Kafka's checks before an EndTxn's Prepare record; None to go ahead."""
        if (from_client and epoch != meta.producer_epoch) or epoch < meta.producer_epoch:
            return E.producer_fenced
        if meta.pending is not None and meta.pending.state != S.PREPARE_EPOCH_FENCE:
            return E.concurrent_transactions
        st = meta.state
        if st == S.ONGOING:
            return None
        if st in (S.COMPLETE_COMMIT, S.PREPARE_COMMIT) and commit or \
                st in (S.COMPLETE_ABORT, S.PREPARE_ABORT) and not commit:
            return E.none if st in COMPLETE else E.concurrent_transactions
        if st in (S.DEAD, S.PREPARE_EPOCH_FENCE):
            raise IllegalState(f"{meta.transactional_id} found in {st.kafka_name}")
        return E.invalid_txn_state

    async def _complete(self, meta: TransactionMetadata) -> None:
        """Write the markers still due for a prepared transaction, then its Complete record.
        Left for tick() to retry when anything fails."""
        txn_id = meta.transactional_id
        todo = self._unmarked.get(txn_id)
        if todo is None or meta.pending is not None or meta.state not in PREPARED:
            return
        commit = meta.state == S.PREPARE_COMMIT
        if todo:
            try:
                errors = await self.write_markers(meta.producer_id, meta.producer_epoch,
                                                  self.coordinator_epoch(txn_id), commit,
                                                  sorted(todo))
            except Exception:
                log.exception("Writing the markers of %r failed; will retry", txn_id)
                return
            for tp, err in errors.items():
                # A deleted partition needs no marker, as Kafka skips it. A newer producer
                # or coordinator epoch there can only come from an admin's WriteTxnMarkers
                # (one broker, one coordinator epoch): retrying would never succeed. Kafka
                # stops sending this transaction's markers then and leaves it prepared until
                # the coordinator reloads; here it is completed (no client waits forever).
                if err in (E.invalid_producer_epoch, E.transaction_coordinator_fenced):
                    log.warning("Marker of %r in %s refused (%s): a newer epoch written by "
                                "an administrative marker; not retried", txn_id, tp, err.name)
                    todo.discard(tp)
                elif err in (E.none, E.unknown_topic_or_partition):
                    todo.discard(tp)
            if todo:
                log.warning("Markers of %r not written to %s; will retry", txn_id, sorted(todo))
                return
        if meta.pending is not None or self._unmarked.get(txn_id) is not todo:
            return  # another completion (tick's retry of the same one) got there first
        if await self._persist(meta, meta.prepare_complete(self.clock.wall_ms())) == E.none:
            self._unmarked.pop(txn_id, None)
            if commit:
                self.committed += 1
            else:
                self.aborted += 1

    def _retry_completions(self) -> None:
        for txn_id in list(self._unmarked):
            meta = self.txns.get(txn_id)
            if meta is None:
                self._unmarked.pop(txn_id, None)
            elif meta.pending is None:
                self._spawn(self._complete(meta))
