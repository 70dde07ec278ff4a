# What the share-group handlers (keys 76-79, 90-92) share: the broker's ShareCoordinator
# (made by Broker.open, which replays __share_group_state as it replays the other
# coordinators' topics), the check that a group id is not already a classic/consumer group,
# and the COORDINATOR_LOAD_IN_PROGRESS answer while the replay runs. Not an API handler.
from __future__ import annotations

from typing import Any, Awaitable, Callable, Collection, Iterable

from ...coordinator.group_configs import BROKER_DEFAULTS as _BROKER_DEFAULTS, PROPS
from ...coordinator.share_state import ShareCoordinator
from ...coordinator.share_state_log import ShareStateLog
from ...coordinator.share_store import ShareStore
from ...security.acl_check import check, denied
from ...security.acls import Operation, ResourceType
from ...wire.codec import response_class
from ...wire.errors import ErrorCode as E
from ..build import ZERO, make, response_module
from ._configs import group_store



def share_coordinator(broker) -> ShareCoordinator:
    sc = broker.share_groups
    if sc is None:  # a broker that was not open()ed (unit tests of single handlers)
        sc = broker.share_groups = make_share_coordinator(broker)
        sc.open()
    return sc


def make_share_coordinator(broker) -> ShareCoordinator:
    """The broker's share coordinator, not yet loaded (open() replays its topic)."""
    def group_config(group_id: str, name: str) -> Any:
        value = group_store(broker).get(group_id).get(name)
        if value is not None:
            return value
        setting = _BROKER_DEFAULTS.get(name)
        return broker.config[setting] if setting else PROPS[name].default

    def offsets(topic: str, partition: int) -> tuple[int, int] | None:
        p = broker.logs.partition(topic, partition)
        return None if p is None else (p.log_start_offset, p.high_watermark)

    def partitions_of(topic: str) -> int | None:
        t = broker.logs.topics.get(topic)
        return None if t is None else len(t.partitions)

    sc = ShareCoordinator(broker.clock, broker.config, group_config, offsets,
                          partitions_of, share_store(broker))
    broker.topic_deleted_listeners.append(sc.topic_deleted)
    return sc


def loading_error(sc: ShareCoordinator) -> tuple[E, str] | None:
    """For the group-coordinator share APIs while __share_group_state is replayed."""
    if sc.loading:
        return E.coordinator_load_in_progress, "The coordinator is loading."
    return None


def share_store(broker) -> ShareStore:
    """__share_group_state for the broker's share coordinator; a write is durable as an
    acks=all produce is (fsynced under kafkalite.fsync.before.ack)."""
    cfg = broker.config
    state_log = ShareStateLog(broker.logs, broker.create_topic,
                              cfg["share.coordinator.state.topic.num.partitions"],
                              cfg["share.coordinator.state.topic.segment.bytes"],
                              broker.notifier.notify)

    def topic_id_of(name: str):
        t = broker.logs.topics.get(name)
        return None if t is None else t.topic_id

    def topic_name_of(topic_id) -> str | None:
        t = broker.logs.by_id.get(topic_id)
        return None if t is None else t.name

    async def durable(partitions: set[int]) -> None:
        if cfg["kafkalite.fsync.before.ack"]:
            t = state_log.topic()
            await broker.sync([t.partitions[i] for i in partitions])

    return ShareStore(state_log, topic_id_of, topic_name_of, durable,
                      cfg["share.coordinator.snapshot.update.records.per.snapshot"])


def other_group_type(broker, group_id: str) -> str | None:
    """The type of a non-share group holding `group_id` ("classic"/"consumer"), else None.
    Uses groups_registry's group_type() when the coordinator has it (KIP-848 work), else
    the classic coordinator's group table."""
    groups = broker.groups
    if groups is None:
        return None
    typed = getattr(groups, "group_type", None)
    if typed is not None:
        kind = typed(group_id)
        return None if kind in (None, "share") else kind
    return "classic" if group_id in getattr(groups, "groups", {}) else None


def not_share_group_error(group_id: str) -> tuple[E, str]:
    return E.group_id_not_found, f"Group {group_id} is not a share group."


def offsets_refusal(broker, sc: ShareCoordinator, group_id: str, must_exist: bool
                    ) -> tuple[E, str] | None:
    """Why Alter/DeleteShareGroupOffsets must refuse the group (top-level error), if so:
    another group type's id, an unknown group (when `must_exist`), members present."""
    if other_group_type(broker, group_id) is not None:
        return not_share_group_error(group_id)
    if must_exist and not sc.has_group(group_id):
        return E.group_id_not_found, f"Group {group_id} not found."
    if not sc.is_empty(group_id):
        return E.non_empty_group, "The group is not empty."
    return None


TOPIC_REFUSED = "Topic authorization failed."  # Errors.TOPIC_AUTHORIZATION_FAILED.message


async def offsets_request(ctx, req, response: str, must_exist: bool,
                          answer: Callable[..., Awaitable[Any]],
                          refuse: Callable[..., Any] | None = None) -> Any:
    """Alter/DeleteShareGroupOffsets: the whole answer when the group is refused (loading,
    offsets_refusal), else one entry per requested topic from
    `await answer(module, coordinator, requested topic, the broker's Topic or None)`.
    `refuse(module, requested topic, Topic or None)` answers a topic the principal may not
    READ, or (returning None) lets `answer` have it; the refused come first, as Kafka 4.x
    KafkaApis answers them before merging its coordinator's answer."""
    mod = response_module(ctx.api_key, ctx.api_version)
    sc = share_coordinator(ctx.broker)
    topics = ctx.broker.logs.topics
    refused: list[Any] = []
    rest = []
    for t in req.topics:
        entry = None if refuse is None else refuse(mod, t, topics.get(t.topic_name))
        if entry is None:
            rest.append(t)
        else:
            refused.append(entry)
    refusal = loading_error(sc) or offsets_refusal(ctx.broker, sc, req.group_id, must_exist)
    if refusal is not None:
        return make(getattr(mod, response), throttle_time=ZERO, error_code=refusal[0],
                    error_message=refusal[1], responses=())
    out = [await answer(mod, sc, t, topics.get(t.topic_name)) for t in rest]
    return make(getattr(mod, response), throttle_time=ZERO, error_code=E.none,
                responses=tuple(refused + out))


def topic_readable(ctx, name: str) -> bool:
    return check(ctx, Operation.READ, ResourceType.TOPIC, name)


def refused_topics(ctx, names: Iterable[str]) -> set[str]:
    """The topics among `names` the member may not READ: ShareFetch and ShareAcknowledge
    check READ on each topic they touch (Kafka 4.x KafkaApis.handleShareFetchRequest /
    handleShareAcknowledgeRequest, filterByAuthorized on the request's and the session's
    partitions)."""
    return denied(ctx, Operation.READ, ResourceType.TOPIC, names)


def apply_acks(broker, sc: ShareCoordinator, group_id: str, member_id: str, topics,
               refused: Collection[str] = ()) -> dict[tuple[Any, int], tuple[E, str | None]]:
    """Apply the acknowledgement batches of ShareFetch/ShareAcknowledge topics; returns
    {(topic id, partition): (error code, message)} for each partition named. A topic in
    `refused` is TOPIC_AUTHORIZATION_FAILED and nothing of it is applied (Kafka's
    handleAcknowledgements)."""
    from ...coordinator.share_partition import InvalidRecordState
    out: dict[tuple[Any, int], tuple[E, str | None]] = {}
    for t in topics:
        topic = broker.logs.by_id.get(t.topic_id)
        for p in t.partitions:
            key = (t.topic_id, p.partition_index)
            batches = [(b.first_offset, b.last_offset, tuple(b.acknowledge_types))
                       for b in p.acknowledgement_batches]
            if not batches:
                continue
            if topic is None:
                out[key] = (E.unknown_topic_id, None)
                continue
            if topic.name in refused:
                out[key] = (E.topic_authorization_failed, None)
                continue
            sp = sc.partition(group_id, topic.name, p.partition_index)
            if sp is None:
                out[key] = (E.unknown_topic_or_partition, None)
                continue
            try:
                sp.acknowledge(member_id, batches)
                out[key] = (E.none, None)
            except InvalidRecordState as e:
                out[key] = (E.invalid_record_state, str(e))
    return out


def group_refusal(ctx, operation: Operation, group_id: str) -> Any:
    """The whole answer of an Alter/DeleteShareGroupOffsets request refused `operation` on
    its group (Kafka 4.x), else None."""
    if check(ctx, operation, ResourceType.GROUP, group_id):
        return None
    return make(response_class(ctx.api_key, ctx.api_version), throttle_time=ZERO,
                error_code=E.group_authorization_failed,
                error_message="Group authorization failed.", responses=())
