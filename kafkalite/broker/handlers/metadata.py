# Metadata (key 3), v0-12.
#
# Topics, brokers, controller, leaders, leader epochs, replicas, ISR and offline replicas come
# from the broker's cluster view (one node leading every partition at epoch 0 without
# ZooKeeper; with zookeeper.connect the live brokers and the controller's znodes), each broker
# at its endpoint on the request's listener. A partition whose leader is not live (or has no
# endpoint on that listener) answers LEADER_NOT_AVAILABLE with leader -1, its epoch, replicas
# and ISR kept (Kafka 3.8's MetadataCache.getPartitionMetadata). In a cluster topics are
# created in ZooKeeper, never auto-created here (an unknown one: UNKNOWN_TOPIC_OR_PARTITION).
# A null topic list (empty at v0) means all topics, internal ones flagged. Unknown topics are auto-created with num.partitions when
# auto.create.topics.enable and the request allows it (v4+ flag; always before v4), and come
# back with their partitions once created, the loop free meanwhile (Kafka first answers
# UNKNOWN_TOPIC_OR_PARTITION or LEADER_NOT_AVAILABLE; clients accept both); a creation that
# fails on disk is LEADER_NOT_AVAILABLE, retried by clients. __consumer_offsets and
# __transaction_state are created with their coordinator's settings. Invalid names get
# INVALID_TOPIC_EXCEPTION. Lookup by topic id (v10+) answers UNKNOWN_TOPIC_ID for ids it
# does not know. Authorized operations (v8+) are Int.MIN unless requested; when requested,
# the operations the ACLs allow on a TOPIC (on every topic entry it may describe, errors
# included) and, v8-10, on the CLUSTER (0 without DESCRIBE on it); without an authorizer
# every operation Kafka supports (AuthHelper.authorizedOperations).
# Authorization (KafkaApis): a named topic (or id) the principal may not DESCRIBE answers
# TOPIC_AUTHORIZATION_FAILED, whether it exists or not, after the others; a request for all
# topics silently leaves it out; auto-creation needs CREATE on the cluster or the topic.
from __future__ import annotations

import logging
import uuid

from ...log.manager import Topic, validate_topic_name
from ...wire.codec import response_class
from ...wire.errors import ErrorCode, KafkaError
from ..build import ZERO, make, response_module
from ..registry import api
from ...security.acl_check import authorized_operations, cluster, cluster_operations, denied
from ...security.acls import Operation, ResourceType

log = logging.getLogger("kafkalite.broker")

NO_OPS = -2147483648
ZERO_UUID = uuid.UUID(int=0)
# AclOperation codes Kafka supports on TOPIC: READ 3, WRITE 4, CREATE 5, DELETE 6, ALTER 7,
# DESCRIBE 8, DESCRIBE_CONFIGS 10, ALTER_CONFIGS 11.
TOPIC_OPS = sum(1 << op for op in (3, 4, 5, 6, 7, 8, 10, 11))


def _topic_entry(mod, broker, topic: Topic, ops: int, listener=None):
    view = broker.view
    parts = []
    for i, st in enumerate(view.partitions(topic.name)):
        # A leader that is not live (or has no endpoint on this listener): Kafka answers
        # LEADER_NOT_AVAILABLE with leader -1, keeping epoch, replicas, ISR and offline ones.
        live = st.leader == view.node_id or view.broker(st.leader, listener) is not None
        parts.append(make(mod.MetadataResponsePartition, error_code=ErrorCode.none if live
                          else ErrorCode.leader_not_available, partition_index=i,
                          leader_id=st.leader if live else -1, leader_epoch=st.leader_epoch,
                          replica_nodes=st.replicas, isr_nodes=st.isr,
                          offline_replicas=st.offline_replicas))
    return make(mod.MetadataResponseTopic, error_code=ErrorCode.none, name=topic.name,
                topic_id=topic.topic_id, is_internal=topic.internal, partitions=tuple(parts),
                topic_authorized_operations=ops)


def _error_entry(mod, name, code: ErrorCode, ops: int, topic_id=ZERO_UUID):
    return make(mod.MetadataResponseTopic, error_code=code, name=name, topic_id=topic_id,
                is_internal=False, partitions=(), topic_authorized_operations=ops)


@api(3, "Metadata", (0, 12))
async def handle(ctx, req):
    b = ctx.broker
    v = ctx.api_version
    mod = response_module(3, v)
    view = b.view
    want_ops = getattr(req, "include_topic_authorized_operations", False)
    auth = b.authorizer is not None

    def ops(name: str) -> int:
        if not want_ops:
            return NO_OPS
        return authorized_operations(ctx, ResourceType.TOPIC, name) if auth else TOPIC_OPS
    entries = []
    refused_entries = []
    if req.topics is None or (v == 0 and not req.topics):
        topics = [t for n in view.topic_names() if (t := view.topic(n)) is not None]
        if auth:  # all topics: those it may not DESCRIBE are silently left out
            hidden = denied(ctx, Operation.DESCRIBE, ResourceType.TOPIC, (t.name for t in topics))
            topics = [t for t in topics if t.name not in hidden]
        entries = [_topic_entry(mod, b, t, ops(t.name), ctx.listener) for t in topics]
    else:
        allow = getattr(req, "allow_auto_topic_creation", True)
        seen: set = set()
        for t in req.topics:
            name = t.name
            if name is not None and name in seen:  # Kafka answers a topic named twice once
                continue
            seen.add(name)
            tid = getattr(t, "topic_id", None)
            if name is None and tid is not None and tid != ZERO_UUID:
                topic = view.topic_by_id(tid)
                if topic and auth and denied(ctx, Operation.DESCRIBE, ResourceType.TOPIC,
                                             (topic.name,)):
                    refused_entries.append(_error_entry(  # ids are not secret (KafkaApis)
                        mod, None, ErrorCode.topic_authorization_failed, NO_OPS, tid))
                    continue
                entries.append(_topic_entry(mod, b, topic, ops(topic.name), ctx.listener)
                               if topic else
                               _error_entry(mod, None, ErrorCode.unknown_topic_id, NO_OPS, tid))
                continue
            if auth and denied(ctx, Operation.DESCRIBE, ResourceType.TOPIC, (name,)):
                # whether it exists or not, and without its id
                refused_entries.append(_error_entry(
                    mod, name, ErrorCode.topic_authorization_failed, NO_OPS))
                continue
            topic = view.topic(name)
            if topic is None and (view.auto_create_locally or b.auto_creator is not None):
                if allow and auth and b.config["auto.create.topics.enable"] and not \
                        cluster(ctx, Operation.CREATE) and denied(
                            ctx, Operation.CREATE, ResourceType.TOPIC, (name,)):
                    refused_entries.append(_error_entry(
                        mod, name, ErrorCode.topic_authorization_failed, NO_OPS))
                    continue
                try:
                    validate_topic_name(name)
                    topic = await b.auto_create(name) if allow else None
                except KafkaError as e:
                    entries.append(_error_entry(mod, name, e.code, ops(name)))
                    continue
                except OSError as e:  # the creation failed on disk: the client retries
                    log.error("Auto-creating topic %s failed: %s", name, e)
                    entries.append(_error_entry(mod, name, ErrorCode.leader_not_available,
                                                ops(name)))
                    continue
            entries.append(_topic_entry(mod, b, topic, ops(name), ctx.listener) if topic else
                           _error_entry(mod, name, ErrorCode.unknown_topic_or_partition,
                                        ops(name)))
    brokers = tuple(make(mod.MetadataResponseBroker, node_id=n.node_id, host=n.host,
                         port=n.port, rack=n.rack) for n in view.brokers(ctx.listener))
    cluster_ops = cluster_operations(ctx) if getattr(
        req, "include_cluster_authorized_operations", False) else NO_OPS
    return make(response_class(3, v), throttle_time=ZERO, brokers=brokers,
                cluster_id=view.cluster_id, controller_id=view.controller_id,
                topics=tuple(entries + refused_entries),
                cluster_authorized_operations=cluster_ops)
