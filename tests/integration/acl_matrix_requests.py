# The requests of the ACL matrix (test_acl_matrix.py): one builder per entry, from the names
# of the entry's own topic, group and transactional id. kafka-python's classes where it has
# them; (key, version, fields) for kio where it has none (KIP-848 and share groups).
from __future__ import annotations

import uuid
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any, Callable

from kafka.protocol import admin, consumer, metadata, producer, sasl

from tests.helpers.kbatch import simple_batch

# kafka-python's request classes, by name, wherever its package keeps them
K = SimpleNamespace(**{n: getattr(m, n) for m in (admin, consumer, metadata, producer, sasl)
                       for n in dir(m) if n.endswith("Request")})


@dataclass
class Names:
    """The resources of one entry (the same names on both brokers)."""
    topic: str
    group: str
    txn: str


def topic_parts(Topic, Part, names, **part):
    return [Topic(name=names.topic, partitions=[Part(partition_index=0, **part)])]


def produce(n: Names):
    R = K.ProduceRequest[9]
    T = R.TopicProduceData
    return R(acks=1, timeout_ms=15000, topic_data=[T(name=n.topic, partition_data=[
        T.PartitionProduceData(index=0, records=simple_batch(1))])])


def fetch(n: Names):
    R = K.FetchRequest[12]
    T = R.FetchTopic
    return R(max_wait_ms=0, min_bytes=1, topics=[T(topic=n.topic, partitions=[
        T.FetchPartition(partition=0, fetch_offset=0, partition_max_bytes=1 << 20,
                         current_leader_epoch=-1, log_start_offset=-1)])])


def list_offsets(n: Names):
    R = K.ListOffsetsRequest[7]
    T = R.ListOffsetsTopic
    return R(topics=[T(name=n.topic, partitions=[T.ListOffsetsPartition(
        partition_index=0, timestamp=-1, current_leader_epoch=-1)])])


def metadata_one(n: Names):
    R = K.MetadataRequest[12]
    return R(topics=[R.MetadataRequestTopic(name=n.topic)], allow_auto_topic_creation=False)


def metadata_all(n: Names):
    return K.MetadataRequest[12](topics=None, allow_auto_topic_creation=False)


def offset_commit(n: Names):
    R = K.OffsetCommitRequest[8]
    T = R.OffsetCommitRequestTopic
    return R(group_id=n.group, topics=topic_parts(
        T, T.OffsetCommitRequestPartition, n, committed_offset=0, committed_metadata=""))


def offset_fetch(n: Names):
    R = K.OffsetFetchRequest[8]
    G = R.OffsetFetchRequestGroup
    return R(groups=[G(group_id=n.group, topics=[G.OffsetFetchRequestTopics(
        name=n.topic, partition_indexes=[0])])])


def find_coordinator(key_type: int):
    def build(n: Names):
        return K.FindCoordinatorRequest[4](key_type=key_type,
                                           coordinator_keys=[n.group if key_type == 0
                                                             else n.txn])
    return build


def join(n: Names):
    R = K.JoinGroupRequest[5]
    return R(group_id=n.group, session_timeout_ms=10000, rebalance_timeout_ms=10000,
             protocol_type="consumer", protocols=[R.JoinGroupRequestProtocol(
                 name="range", metadata=b"")])


def leave(n: Names):
    R = K.LeaveGroupRequest[4]
    return R(group_id=n.group, members=[R.MemberIdentity(member_id="nobody")])


def sync(n: Names):
    return K.SyncGroupRequest[4](group_id=n.group, generation_id=1, member_id="nobody")


def create_topics(n: Names):
    R = K.CreateTopicsRequest[7]
    return R(topics=[R.CreatableTopic(name=n.topic, num_partitions=1, replication_factor=1)],
             timeout_ms=15000, validate_only=True)


def delete_records(n: Names):
    R = K.DeleteRecordsRequest[2]
    T = R.DeleteRecordsTopic
    return R(topics=[T(name=n.topic, partitions=[T.DeleteRecordsPartition(
        partition_index=0, offset=0)])], timeout_ms=15000)


def epochs(n: Names):
    R = K.OffsetForLeaderEpochRequest[4]
    T = R.OffsetForLeaderTopic
    return R(replica_id=-1, topics=[T(topic=n.topic, partitions=[T.OffsetForLeaderPartition(
        partition=0, current_leader_epoch=-1, leader_epoch=0)])])


def add_partitions(n: Names):
    R = K.AddPartitionsToTxnRequest[3]
    return R(v3_and_below_transactional_id=n.txn, v3_and_below_producer_id=0,
             v3_and_below_producer_epoch=0, v3_and_below_topics=[
                 R.AddPartitionsToTxnTopic(name=n.topic, partitions=[0])])


def markers(n: Names):
    R = K.WriteTxnMarkersRequest[1]
    M = R.WritableTxnMarker
    return R(markers=[M(producer_id=0, producer_epoch=0, transaction_result=False, topics=[
        M.WritableTxnMarkerTopic(name=n.topic, partition_indexes=[0])], coordinator_epoch=0)])


def txn_offset_commit(n: Names):
    R = K.TxnOffsetCommitRequest[3]
    T = R.TxnOffsetCommitRequestTopic
    return R(transactional_id=n.txn, group_id=n.group, topics=[T(name=n.topic, partitions=[
        T.TxnOffsetCommitRequestPartition(partition_index=0, committed_offset=0,
                                          committed_leader_epoch=-1, committed_metadata="")])])


def acl_filter(R):
    """A DescribeAcls / DeleteAcls filter that matches nothing any other entry made."""
    return R(resource_type_filter=2, resource_name_filter="mx-nothing", pattern_type_filter=3,
             principal_filter="User:nobody", host_filter="*", operation=2, permission_type=3)


def create_acls(n: Names):
    R = K.CreateAclsRequest[3]
    return R(creations=[R.AclCreation(resource_type=2, resource_name="mx-nothing",
                                      resource_pattern_type=3, principal="User:nobody",
                                      host="*", operation=3, permission_type=3)])


def config_resource(R, n: Names, **kw):
    return R(resource_type=2, resource_name=n.topic, **kw)


def describe_configs(n: Names):
    R = K.DescribeConfigsRequest[4]
    return R(resources=[config_resource(R.DescribeConfigsResource, n,
                                         configuration_keys=["retention.ms"])])


def alter_configs(n: Names):
    R = K.AlterConfigsRequest[2]
    Res = R.AlterConfigsResource
    return R(resources=[config_resource(Res, n, configs=[Res.AlterableConfig(
        name="retention.ms", value="3600000")])], validate_only=True)


def incremental(n: Names):
    R = K.IncrementalAlterConfigsRequest[1]
    Res = R.AlterConfigsResource
    return R(resources=[config_resource(Res, n, configs=[Res.AlterableConfig(
        name="retention.ms", config_operation=0, value="3600000")])], validate_only=True)


def replica_log_dirs(n: Names):
    R = K.AlterReplicaLogDirsRequest[2]
    D = R.AlterReplicaLogDir
    return R(dirs=[D(path="/nonexistent", topics=[D.AlterReplicaLogDirTopic(
        name=n.topic, partitions=[0])])])


def create_partitions(n: Names):
    R = K.CreatePartitionsRequest[3]
    return R(topics=[R.CreatePartitionsTopic(name=n.topic, count=2, assignments=None)],
             timeout_ms=15000, validate_only=True)


def elect(n: Names):
    R = K.ElectLeadersRequest[2]
    return R(election_type=0, topic_partitions=[R.TopicPartitions(topic=n.topic,
                                                                  partitions=[0])])


def reassign(n: Names):
    R = K.AlterPartitionReassignmentsRequest[0]
    T = R.ReassignableTopic
    return R(timeout_ms=15000, topics=[T(name=n.topic, partitions=[T.ReassignablePartition(
        partition_index=0, replicas=None)])])


def list_reassign(n: Names):
    R = K.ListPartitionReassignmentsRequest[0]
    return R(timeout_ms=15000, topics=[R.ListPartitionReassignmentsTopics(
        name=n.topic, partition_indexes=[0])])


def offset_delete(n: Names):
    R = K.OffsetDeleteRequest[0]
    T = R.OffsetDeleteRequestTopic
    return R(group_id=n.group, topics=[T(name=n.topic, partitions=[
        T.OffsetDeleteRequestPartition(partition_index=0)])])


def alter_quotas(n: Names):
    R = K.AlterClientQuotasRequest[1]
    E = R.EntryData
    return R(entries=[E(entity=[E.EntityData(entity_type="client-id", entity_name="mx")],
                        ops=[E.OpData(key="request_percentage", value=50.0, remove=False)])],
             validate_only=True)


def alter_scram(n: Names):
    R = K.AlterUserScramCredentialsRequest[0]
    return R(deletions=[R.ScramCredentialDeletion(name="mx-nobody", mechanism=1)],
             upsertions=[])


def describe_quorum(n: Names):
    R = K.DescribeQuorumRequest[1]
    return R(topics=[R.TopicData(topic_name="__cluster_metadata",
                                 partitions=[R.TopicData.PartitionData(partition_index=0)])])


def describe_producers(n: Names):
    R = K.DescribeProducersRequest[0]
    return R(topics=[R.TopicRequest(name=n.topic, partition_indexes=[0])])


def describe_topic_partitions(n: Names):
    R = K.DescribeTopicPartitionsRequest[0]
    return R(topics=[R.TopicRequest(name=n.topic)], response_partition_limit=2000, cursor=None)


def listed(collection: str, attr: str, which: str) -> Callable[[Any, Names], bool]:
    """Whether the entry's own topic / group / transactional id is in the answer's list."""
    return lambda resp, n: getattr(n, which) in {getattr(item, attr)
                                                 for item in getattr(resp, collection)}


def kio(key: int, version: int, fields: Callable[[Names], dict]) -> Callable[[Names], tuple]:
    return lambda n: (key, version, fields(n))


def share_fetch(n: Names) -> dict:
    from datetime import timedelta
    return dict(group_id=n.group, member_id=uuid.uuid4().hex, share_session_epoch=0,
                max_wait=timedelta(0), min_bytes=1, max_bytes=1 << 20, max_records=10,
                batch_size=10, topics=(), forgotten_topics_data=())


def schema(key: int, version: int) -> Any:
    from tests.integration.test_groups_helpers import RawClient
    return RawClient.schema(key, version)


def heartbeat_848(n: Names) -> dict:
    from datetime import timedelta
    return dict(group_id=n.group, member_id=uuid.uuid4().hex, member_epoch=0,
                instance_id=None, rack_id=None, rebalance_timeout=timedelta(seconds=30),
                subscribed_topic_names=(n.topic,), subscribed_topic_regex=None,
                server_assignor=None, topic_partitions=())
