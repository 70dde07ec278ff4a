# Kafka features kafkalite does not serve yet, by API key, so that a client using one meets a
# broker log line naming the feature instead of a silent closed connection. Only consulted
# for keys with no registered handler (once a handler lands, its entry goes), and for
# ControlledShutdown (7) on a single node: it is served in a ZooKeeper cluster only.
from __future__ import annotations

import logging

log = logging.getLogger("kafkalite.broker")

_FEATURES = {
    "ZooKeeper mode (zookeeper.connect)": {7: "ControlledShutdown"},
    "delegation tokens": {38: "CreateDelegationToken", 39: "RenewDelegationToken",
                          40: "ExpireDelegationToken", 41: "DescribeDelegationToken"},
    "client telemetry (KIP-714)": {71: "GetTelemetrySubscriptions", 72: "PushTelemetry",
                                   74: "ListClientMetricsResources"},
    "replication and cluster membership (inter-broker and controller APIs)": {
        4: "LeaderAndIsr", 5: "StopReplica", 6: "UpdateMetadata",
        52: "Vote", 53: "BeginQuorumEpoch", 54: "EndQuorumEpoch", 56: "AlterPartition",
        57: "UpdateFeatures", 58: "Envelope", 59: "FetchSnapshot", 62: "BrokerRegistration",
        63: "BrokerHeartbeat", 64: "UnregisterBroker", 67: "AllocateProducerIds",
        70: "ControllerRegistration", 73: "AssignReplicasToDirs"},
}
_BY_KEY = {key: (name, feature) for feature, apis in _FEATURES.items()
           for key, name in apis.items()}
_logged: set[str] = set()


def refusal(api_key: int) -> str:
    """Why a request with no handler is refused, naming the Kafka feature when known."""
    known = _BY_KEY.get(api_key)
    if known is None:
        return f"unknown API key {api_key}"
    name, feature = known
    return f"{name} (API key {api_key}) is part of {feature}, which kafkalite does not serve"


def log_refused_feature(feature: str, detail: str) -> None:
    """One WARNING per feature per process: a client retrying forever must not flood it."""
    if feature not in _logged:
        _logged.add(feature)
        log.warning("Refusing %s: %s (not supported by kafkalite yet; see COMPATIBILITY.md)",
                    feature, detail)
