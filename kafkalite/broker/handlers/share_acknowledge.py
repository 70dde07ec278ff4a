# ShareAcknowledge (key 79), v1-2.
#
# Acknowledges records a share-group member acquired, outside a ShareFetch: ACCEPT
# (ACKNOWLEDGED), RELEASE (AVAILABLE again, or ARCHIVED at group.share.delivery.count.limit),
# REJECT and GAP (ARCHIVED). It continues the member's share session: epoch 0 cannot open
# one (INVALID_SHARE_SESSION_EPOCH), an unknown session is SHARE_SESSION_NOT_FOUND, a wrong
# epoch INVALID_SHARE_SESSION_EPOCH, epoch -1 closes the session after the acknowledgements
# and releases what the member still holds. Per partition: INVALID_RECORD_STATE for offsets
# the member does not hold (nothing of that partition's batches is applied then),
# UNKNOWN_TOPIC_ID. ACLs (Kafka 4.x KafkaApis.handleShareAcknowledgeRequest): READ on the
# group, then READ on each topic: a refused topic's partitions answer
# TOPIC_AUTHORIZATION_FAILED and nothing of them is applied.
# Gap: v2's RENEW acknowledge type is refused (INVALID_REQUEST).
from __future__ import annotations

from ...coordinator.share_sessions import FINAL_EPOCH, INITIAL_EPOCH
from ...wire.errors import ErrorCode as E
from ..build import ZERO, make, response_module
from ..registry import api
from ...security.acl_check import check
from ...security.acls import Operation, ResourceType
from ._share import apply_acks, refused_topics, share_coordinator


@api(79, "ShareAcknowledge", (1, 2))
async def handle(ctx, req):
    mod = response_module(79, ctx.api_version)
    broker = ctx.broker
    sc = share_coordinator(broker)

    def top_error(code: E, message: str | None = None):
        return make(mod.ShareAcknowledgeResponse, throttle_time=ZERO, error_code=code,
                    error_message=message, responses=(), node_endpoints=())

    if not req.group_id or not req.member_id:
        return top_error(E.invalid_request, "group id and member id must be set")
    if not check(ctx, Operation.READ, ResourceType.GROUP, req.group_id):
        return top_error(E.group_authorization_failed, "Group authorization failed.")
    if sc.loading:  # the records' state comes from the replay (see share_fetch.py)
        await sc.loaded.wait()
    if req.share_session_epoch == INITIAL_EPOCH:
        return top_error(E.invalid_share_session_epoch)
    session = sc.sessions.check(req.group_id, req.member_id, req.share_session_epoch)
    if isinstance(session, E):
        return top_error(session)
    if any(t not in (0, 1, 2, 3) for tp in req.topics for p in tp.partitions
           for b in p.acknowledgement_batches for t in b.acknowledge_types):
        return top_error(E.invalid_request, "unsupported acknowledge type")
    logs = broker.logs
    refused = refused_topics(ctx, (logs.by_id[t.topic_id].name for t in req.topics
                                   if t.topic_id in logs.by_id))
    acks = apply_acks(broker, sc, req.group_id, req.member_id, req.topics, refused)
    await sc.persist()  # acknowledged means durable (share_state.py)
    if req.share_session_epoch == FINAL_EPOCH:
        sc.close_session(req.group_id, req.member_id)
    leader = mod.LeaderIdAndEpoch(leader_id=broker.node_id, leader_epoch=0)
    by_topic: dict = {}
    for (tid, idx), (code, msg) in acks.items():
        by_topic.setdefault(tid, []).append(make(
            mod.PartitionData, partition_index=idx, error_code=code, error_message=msg,
            current_leader=leader))
    return make(mod.ShareAcknowledgeResponse, throttle_time=ZERO, error_code=E.none,
                responses=tuple(mod.ShareAcknowledgeTopicResponse(topic_id=tid,
                                                                  partitions=tuple(ps))
                                for tid, ps in by_topic.items()),
                node_endpoints=())
