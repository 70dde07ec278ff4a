# ControlledShutdown (key 7), v0-3.
#
# Sent by a broker of a ZooKeeper cluster to the controller as it stops (Kafka 3.8's
# ZooKeeper-mode KafkaApis.handleControlledShutdownRequest): CLUSTER_ACTION on the cluster,
# else CLUSTER_AUTHORIZATION_FAILED; a broker that is not the controller answers
# NOT_CONTROLLER; the controller moves leadership and ISR membership off the broker
# (cluster/controlled_shutdown.py) and answers the replicated partitions it still leads.
# Errors (STALE_BROKER_EPOCH, BROKER_NOT_AVAILABLE) come with no partitions.
#
# Served and advertised only with zookeeper.connect, as Kafka lists key 7 in ZooKeeper mode
# only (a KRaft broker does not); a single node closes the connection as for any unknown key.
# kio has no schema for it: the body is decoded and encoded by wire/controlled_shutdown.py.
# v0 requests have no client_id in their header (request header v0); v1 adds nothing to the
# body, v2 the broker epoch, v3 is flexible.
from __future__ import annotations

from ...cluster import zk_admin
from ...cluster.controlled_shutdown import shut_down_broker
from ...security.acl_check import cluster
from ...security.acls import Operation
from ...wire import controlled_shutdown as wire
from ...wire.errors import ErrorCode, KafkaError
from ..registry import api


@api(7, "ControlledShutdown", (wire.MIN_VERSION, wire.MAX_VERSION), raw=True, zk_only=True)
async def handle(ctx, raw):
    frame, pos = raw
    v = ctx.api_version
    req = wire.decode_request(frame, wire.body_start(frame, pos, v), v)
    tags = b"\x00" if wire.flexible(v) else b""  # the response header's tagged fields (v1)
    if not cluster(ctx, Operation.CLUSTER_ACTION):
        return tags + wire.encode_response(ErrorCode.cluster_authorization_failed, (), v)
    controller = getattr(ctx.broker, "controller", None)
    if controller is None or not controller.active:
        return tags + wire.encode_response(ErrorCode.not_controller, (), v)
    try:
        remaining = await zk_admin.on_controller(ctx.broker, lambda: shut_down_broker(
            controller, req.broker_id, req.broker_epoch))
    except KafkaError as e:
        return tags + wire.encode_response(e.code, (), v)
    return tags + wire.encode_response(ErrorCode.none, remaining, v)
