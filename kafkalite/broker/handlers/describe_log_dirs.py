# DescribeLogDirs (key 35), v1-4.
#
# One log directory, the data directory (kafkalite uses only the first of log.dirs), with
# every partition it holds (null topics) or those requested that exist here (others are left
# out silently, as Kafka does); partition_size is the bytes of its segments, offset_lag 0
# and is_future_key false (no replica movement). v4 adds the file system's total and usable
# bytes (os.statvfs). Entries are sorted by topic and partition; Kafka's order follows its
# hash maps, which no client relies on. In a cluster only the partitions this broker holds a
# replica of (their assignment names it) are listed, as Kafka lists its logs: the empty
# placeholders the log manager keeps for a topic's other partitions are left out.
# Gaps: v5's is_cordoned (KIP-1066, after Kafka 4.0) is not served.
from __future__ import annotations

import os

from ...wire.codec import response_class
from ...wire.errors import ErrorCode
from ..build import ZERO, make, response_module
from ..registry import api
from ...security.acl_check import cluster
from ...security.acls import Operation

DENIED = ErrorCode.cluster_authorization_failed  # no ACL for this on the cluster


def _disk(path: str) -> tuple[int, int]:
    try:
        st = os.statvfs(path)
    except OSError:
        return -1, -1
    return st.f_blocks * st.f_frsize, st.f_bavail * st.f_frsize


def hosts(broker, name: str, partition: int) -> bool:
    """Whether this broker holds a replica of the local partition, as Kafka's log manager
    would: in a cluster, one whose assignment names this broker; on a single node (or for a
    local topic the cluster view does not know), every one."""
    assignment = getattr(broker.view.topic(name), "assignment", None)
    if assignment is None:
        return broker.logs.partition(name, partition) is not None
    return broker.node_id in assignment.partitions.get(partition, ())


@api(35, "DescribeLogDirs", (1, 4))
async def handle(ctx, req):
    v = ctx.api_version
    mod = response_module(35, v)
    logs = ctx.broker.logs
    if not cluster(ctx, Operation.DESCRIBE):  # no directories, the code alone
        return make(response_class(35, v), throttle_time=ZERO, error_code=DENIED,
                    results=())
    b = ctx.broker
    if req.topics is None:
        wanted = {name: {p.partition for p in t.partitions if hosts(b, name, p.partition)}
                  for name, t in logs.topics.items()}
    else:
        wanted = {}
        for t in req.topics:
            if logs.get(t.topic) is not None:
                wanted.setdefault(t.topic, set()).update(
                    i for i in t.partitions if hosts(b, t.topic, i))
    topics = []
    for name in sorted(wanted):
        parts = tuple(mod.DescribeLogDirsPartition(
            partition_index=i, partition_size=logs.partition(name, i).size, offset_lag=0,
            is_future_key=False) for i in sorted(wanted[name]))
        if parts:
            topics.append(mod.DescribeLogDirsTopic(name=name, partitions=parts))
    total, usable = _disk(logs.data_dir)
    result = make(mod.DescribeLogDirsResult, error_code=ErrorCode.none, log_dir=logs.data_dir,
                  topics=tuple(topics), total_bytes=total, usable_bytes=usable)
    return make(response_class(35, v), throttle_time=ZERO, error_code=ErrorCode.none,
                results=(result,))
