"""kafkalite as a cluster member: ZooKeeper coordination, the cluster view, replication."""
