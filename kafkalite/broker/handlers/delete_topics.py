# DeleteTopics (key 20), v1-6 (Kafka 4.0 dropped v0).
#
# Topics are named (v1-5 topic_names; v6 topics by name) or, from v6, given by topic id.
# The answer waits for the deletion: the metadata file's durable unlink first (the commit
# point), then the partition directories renamed aside (their files are removed in the
# background), all off the event loop; then Broker.delete_topic's listeners (committed
# offsets) run and the topic leaves every fetch session. Errors follow Kafka's ControllerApis.deleteTopics: an
# unknown name is UNKNOWN_TOPIC_OR_PARTITION, an unknown id UNKNOWN_TOPIC_ID; a name or id
# listed twice, both or neither given, or a name whose id was also given, INVALID_REQUEST.
# With delete.topic.enable=false every topic answers TOPIC_DELETION_DISABLED (INVALID_REQUEST
# before v3). Successes carry the topic's id (v6) and, for deletions by id, its name.
# Like KRaft Kafka, internal topics may be deleted too.
# In a ZooKeeper cluster only the controller deletes (cluster/zk_admin.py), others answer
# NOT_CONTROLLER: /admin/delete_topics/<t>, answered once the controller removed the
# topic's znodes (REQUEST_TIMED_OUT after timeout_ms); each broker then drops its local log.
from __future__ import annotations

import uuid
from collections import Counter

from ...cluster import zk_admin
from ...wire.codec import response_class
from ...wire.errors import ErrorCode, KafkaError
from ..build import ZERO, make, response_module
from ..registry import api
from ...security.acl_check import cluster, denied
from ...security.acls import Operation, ResourceType

ZERO_UUID = uuid.UUID(int=0)
NO_TOPIC = "This server does not host this topic-partition."
# Errors.TOPIC_AUTHORIZATION_FAILED.message(), which ApiError(error) carries.
TOPIC_AUTHORIZATION_FAILED = "Topic authorization failed."
NO_TOPIC_ID = "This server does not host this topic ID."


def _requested(req, version: int) -> list[tuple[str | None, uuid.UUID | None]]:
    if version < 6:
        return [(name, None) for name in req.topic_names]
    return [(t.name, None if t.topic_id in (None, ZERO_UUID) else t.topic_id)
            for t in req.topics]


async def _delete(broker, topic) -> None:
    await broker.delete_topic(topic.name)
    broker.fetch_sessions.forget_topic(topic.name)
    broker.fetch_sessions.forget_topic(topic.topic_id)


def _resolve(logs, items) -> tuple[list, list]:
    """(topics to delete, error rows); rows are (name, id, code, message)."""
    names = Counter(n for n, i in items if n is not None and i is None)
    ids = Counter(i for n, i in items if n is None and i is not None)
    errors, targets, seen = [], [], set()
    for name, tid in sorted(items, key=lambda it: it[1] is None):  # ids first, as Kafka
        if name is None and tid is None:
            errors.append((None, ZERO_UUID, ErrorCode.invalid_request,
                           "Neither topic name nor id were specified."))
        elif name is not None and tid is not None:
            errors.append((name, tid, ErrorCode.invalid_request,
                           "You may not specify both topic name and topic id."))
        elif names.get(name, 0) > 1 or ids.get(tid, 0) > 1:
            key = name if tid is None else tid
            if key not in seen:
                seen.add(key)
                errors.append((name, tid or ZERO_UUID, ErrorCode.invalid_request,
                               "Duplicate topic name." if tid is None
                               else "Duplicate topic id."))
        elif tid is not None:
            topic = logs.by_id.get(tid)
            if topic is None:
                errors.append((None, tid, ErrorCode.unknown_topic_id, NO_TOPIC_ID))
            else:
                targets.append(topic)
        else:
            topic = logs.get(name)
            if topic is None:
                errors.append((name, ZERO_UUID, ErrorCode.unknown_topic_or_partition, NO_TOPIC))
            elif any(t is topic for t in targets) or ids.get(topic.topic_id):
                errors.append((name, topic.topic_id, ErrorCode.invalid_request,
                               "The provided topic name maps to an ID that was already "
                               "supplied."))
                targets = [t for t in targets if t is not topic]
            else:
                targets.append(topic)
    return targets, errors


def _authorized(ctx, items, targets: list, rows: list) -> tuple[list, list]:
    """As ControllerApis.deleteTopics: DELETE on the cluster allows every topic; else a name
    without DESCRIBE is TOPIC_AUTHORIZATION_FAILED whether it exists or not, an unknown
    describable one UNKNOWN_TOPIC_OR_PARTITION, and one without DELETE refused; a topic given
    by id without DESCRIBE on it keeps its name secret. Named refusals carry the zero id."""
    if cluster(ctx, Operation.DELETE):
        return targets, rows
    by_id = {i for n, i in items if i is not None}
    names = {t.name for t in targets} | {r[0] for r in rows if r[0] is not None}
    no_delete = denied(ctx, Operation.DELETE, ResourceType.TOPIC, names)
    no_describe = denied(ctx, Operation.DESCRIBE, ResourceType.TOPIC, names)
    failed = (ErrorCode.topic_authorization_failed, TOPIC_AUTHORIZATION_FAILED)
    rows = [(n, ZERO_UUID, *failed) if c == ErrorCode.unknown_topic_or_partition
            and n in no_describe else (n, i, c, m) for n, i, c, m in rows]
    for t in targets:
        if t.topic_id not in by_id:
            if t.name in no_delete or t.name in no_describe:
                rows.append((t.name, ZERO_UUID, *failed))
        elif t.name in no_describe:
            rows.append((None, t.topic_id, *failed))
        elif t.name in no_delete:
            rows.append((t.name, t.topic_id, *failed))
    return [t for t in targets if t.name not in no_delete | no_describe], rows


async def _delete_in_cluster(ctx, items, timeout_ms: int) -> list:
    """Through the controller (zk_admin): /admin/delete_topics/<t>, answered once the
    controller has deleted the topic's znodes. With an authorizer, DELETE on the cluster or
    on the topic is needed (TOPIC_AUTHORIZATION_FAILED otherwise)."""
    b = ctx.broker
    try:
        targets, rows = await zk_admin.resolve_deletions(b, items)
    except KafkaError as e:  # the controller moved, or ZooKeeper failed
        return [(n, i or ZERO_UUID, e.code, e.message) for n, i in items]
    if b.authorizer is not None and not cluster(ctx, Operation.DELETE):
        refused = denied(ctx, Operation.DELETE, ResourceType.TOPIC, [n for n, _ in targets])
        rows += [(n, i, ErrorCode.topic_authorization_failed, TOPIC_AUTHORIZATION_FAILED)
                 for n, i in targets if n in refused]
        targets = [(n, i) for n, i in targets if n not in refused]
    return rows + await zk_admin.delete_topics(b, targets, timeout_ms)


@api(20, "DeleteTopics", (1, 6))
async def handle(ctx, req):
    b = ctx.broker
    v = ctx.api_version
    mod = response_module(20, v)
    items = _requested(req, v)
    controller = zk_admin.controller_of(b)
    if controller is not None and not controller.active:  # Kafka's ZooKeeper-mode KafkaApis
        rows = [(n, i or ZERO_UUID, ErrorCode.not_controller, None) for n, i in items]
    elif not b.config["delete.topic.enable"]:
        code = ErrorCode.invalid_request if v < 3 else ErrorCode.topic_deletion_disabled
        rows = [(n, i or ZERO_UUID, code, "Topic deletion is disabled.") for n, i in items]
    elif controller is not None:
        rows = await _delete_in_cluster(ctx, items, zk_admin.timeout_ms(req))
    else:
        targets, rows = _resolve(b.logs, items)
        if b.authorizer is not None:
            targets, rows = _authorized(ctx, items, targets, rows)
        for topic in targets:
            try:
                await _delete(b, topic)
            except KafkaError as e:
                rows.append((topic.name, topic.topic_id, e.code, e.message))
            except OSError as e:
                rows.append((topic.name, topic.topic_id, ErrorCode.kafka_storage_error,
                             str(e)))
            else:
                rows.append((topic.name, topic.topic_id, ErrorCode.none, None))
    return make(response_class(20, v), throttle_time=ZERO, responses=tuple(
        make(mod.DeletableTopicResult, name=n, topic_id=i, error_code=c, error_message=m)
        for n, i, c, m in rows))
