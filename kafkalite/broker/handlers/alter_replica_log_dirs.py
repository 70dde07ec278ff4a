# AlterReplicaLogDirs (key 34), v1-2.
#
# kafkalite has one log directory, so a replica can only "move" where it already is: a path
# other than the data directory is LOG_DIR_NOT_FOUND for each of its partitions (Kafka's
# LogManager: "not found in the config"), and the data directory itself answers NONE for
# the partitions it holds (nothing to move) and UNKNOWN_TOPIC_OR_PARTITION for others, as
# Kafka 3.8 answers. Paths are compared after making them absolute. Results keep the
# request's order.
from __future__ import annotations

import os

from ...wire.codec import response_class
from ...wire.errors import ErrorCode
from ..build import ZERO, make, response_module
from ..registry import api
from ...security.acl_check import cluster
from ...security.acls import Operation

DENIED = ErrorCode.cluster_authorization_failed  # no ACL for this on the cluster


@api(34, "AlterReplicaLogDirs", (1, 2))
async def handle(ctx, req):
    v = ctx.api_version
    mod = response_module(34, v)
    logs = ctx.broker.logs
    results = []
    allowed = cluster(ctx, Operation.ALTER)
    for d in req.dirs:
        here = os.path.abspath(d.path) == logs.data_dir
        for t in d.topics:
            parts = []
            for i in t.partitions:
                if not allowed:
                    code = DENIED
                elif not here:
                    code = ErrorCode.log_dir_not_found
                elif logs.partition(t.name, i) is None:
                    code = ErrorCode.unknown_topic_or_partition
                else:
                    code = ErrorCode.none
                parts.append(mod.AlterReplicaLogDirPartitionResult(partition_index=i,
                                                                   error_code=code))
            results.append(mod.AlterReplicaLogDirTopicResult(topic_name=t.name,
                                                             partitions=tuple(parts)))
    return make(response_class(34, v), throttle_time=ZERO, results=tuple(results))
