# DescribeQuorum (key 55), v0-2.
#
# kafkalite is a combined broker and controller with no metadata log: it answers as the
# leader and single voter of the `__cluster_metadata` partition 0, leader epoch 1, with
# high watermark and log end offset 0 (there is no metadata log to count), its own fetch and
# caught-up times "now" (Kafka's leader reports its own that way), no observers. A request
# that does not name exactly that one partition is answered, as Kafka's
# KafkaRaftClient.handleDescribeQuorumRequest, with UNKNOWN_TOPIC_OR_PARTITION for each
# partition it names. v2 (Kafka 3.9/4.0, KIP-853): replica_directory_id is the zero uuid
# (as for a static voter set) and `nodes` lists this node with the listener the request
# came in on (its name and advertised endpoint, as Metadata answers), there being no
# separate controller listener.
from __future__ import annotations

from ...security.listeners import endpoint
from ...wire.codec import response_class
from ...wire.errors import ErrorCode
from ..build import make, response_module
from ..registry import api
from ...security.acl_check import cluster
from ...security.acls import Operation

DENIED = ErrorCode.cluster_authorization_failed  # no ACL for this on the cluster

METADATA_TOPIC = "__cluster_metadata"
LEADER_EPOCH = 1


def _valid(req) -> bool:
    return (len(req.topics) == 1 and req.topics[0].topic_name == METADATA_TOPIC
            and len(req.topics[0].partitions) == 1
            and req.topics[0].partitions[0].partition_index == 0)


@api(55, "DescribeQuorum", (0, 2))
async def handle(ctx, req):
    v = ctx.api_version
    mod = response_module(55, v)
    cls = response_class(55, v)
    b = ctx.broker
    if not cluster(ctx, Operation.DESCRIBE):  # the code alone (a top-level error response)
        return make(cls, error_code=DENIED, error_message=None, topics=(),
                    nodes=())
    if not _valid(req):
        topics = tuple(mod.TopicData(topic_name=t.topic_name, partitions=tuple(
            make(mod.PartitionData, partition_index=p.partition_index,
                 error_code=ErrorCode.unknown_topic_or_partition, error_message=None,
                 leader_id=0, leader_epoch=0, high_watermark=0, current_voters=(),
                 observers=()) for p in t.partitions)) for t in req.topics)
        return make(cls, error_code=ErrorCode.none, error_message=None, topics=topics,
                    nodes=())
    now = b.clock.wall_ms()
    voter = make(mod.ReplicaState, replica_id=b.node_id, replica_directory_id=None,
                 log_end_offset=0, last_fetch_timestamp=now, last_caught_up_timestamp=now)
    part = make(mod.PartitionData, partition_index=0, error_code=ErrorCode.none,
                error_message=None, leader_id=b.node_id, leader_epoch=LEADER_EPOCH,
                high_watermark=0, current_voters=(voter,), observers=())
    nodes = ()
    if v >= 2:
        host, port = endpoint(ctx)
        listener = getattr(ctx, "listener", None)
        name = listener.name if listener is not None else "PLAINTEXT"
        nodes = (mod.Node(node_id=b.node_id, listeners=(
            mod.Listener(name=name, host=host, port=port),)),)
    return make(cls, error_code=ErrorCode.none, error_message=None,
                topics=(mod.TopicData(topic_name=METADATA_TOPIC, partitions=(part,)),),
                nodes=nodes)
