# Controlled shutdown (ControlledShutdown, key 7), both sides, as Kafka 3.8 in ZooKeeper mode:
#
# The controller (KafkaController.processControlledShutdown / doControlledShutdown): a
# broker epoch older than the live registration's is STALE_BROKER_EPOCH; a broker that is not
# registered BROKER_NOT_AVAILABLE. Otherwise the broker joins the shutting-down set (not live
# for any election from then on, until its registration goes or is renewed), every
# replicated partition (RF > 1) it leads gets a leader elected off it
# (ControlledShutdownPartitionLeaderElectionStrategy: the first live in-sync replica not
# shutting down; it leaves the ISR in the same write), and it leaves the ISR of every
# replicated partition it follows (OfflineReplica). The answer lists the replicated
# partitions it still leads: those with no other in-sync replica.
#
# The broker (KafkaServer.controlledShutdown): with controlled.shutdown.enable, before it
# stops serving, it sends the request to the controller (as its cluster view knows it, over
# the inter-broker connection: the controller's endpoint of the inter-broker listener, with
# its TLS and SASL, inter_broker.py) until an answer with no error and no remaining partitions, at most controlled.shutdown.max.retries times,
# controlled.shutdown.retry.backoff.ms apart; then it shuts down either way.
from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING, Any

from ..wire import controlled_shutdown as wire
from ..wire.errors import ErrorCode, KafkaError
from .decisions import remove_replica, shutdown_transition
from .inter_broker import InterBroker

if TYPE_CHECKING:
    from .controller import Controller, PartitionKey

log = logging.getLogger("kafkalite.controller")

VERSION = 3
REQUEST_TIMEOUT_S = 30.0  # Kafka's controller socket timeout: one attempt's bound


async def shut_down_broker(ctrl: "Controller", broker_id: int,
                           broker_epoch: int) -> list["PartitionKey"]:
    """Move leadership and ISR membership off `broker_id`; the replicated partitions it still
    leads. KafkaError: STALE_BROKER_EPOCH, BROKER_NOT_AVAILABLE."""
    epochs = await ctrl.broker_epochs()
    if broker_id not in epochs:
        raise KafkaError(ErrorCode.broker_not_available,
                         f"Broker id {broker_id} does not exist.")
    if broker_epoch != wire.UNKNOWN_BROKER_EPOCH and broker_epoch < epochs[broker_id]:
        raise KafkaError(ErrorCode.stale_broker_epoch,
                         f"Received controlled shutdown request from an old broker epoch "
                         f"{broker_epoch} for broker {broker_id}. Current broker epoch is "
                         f"{epochs[broker_id]}.")
    ctrl.shutting_down[broker_id] = epochs[broker_id]
    log.info("controller: controlled shutdown of broker %d (epoch %d)", broker_id,
             epochs[broker_id])
    going = set(ctrl.shutting_down)
    live = set(ctrl.live) | going
    replicated = [k for k in sorted(ctrl.states) if k[0] in ctrl.topics
                  and broker_id in ctrl.topics[k[0]].partitions.get(k[1], ())
                  and len(ctrl.topics[k[0]].partitions[k[1]]) > 1]
    for key in replicated:
        await ctrl.read_state(key)  # the ISR as its leader last wrote it
    for key in [k for k in replicated if k in ctrl.states
                and ctrl.states[k][0].leader == broker_id]:
        replicas = ctrl.topics[key[0]].partitions[key[1]]
        await ctrl.update_state(key, lambda s, r=replicas: shutdown_transition(
            s, r, live, going, ctrl.epoch))
    for key in [k for k in replicated if k in ctrl.states
                and ctrl.states[k][0].leader != broker_id]:
        await ctrl.update_state(key, lambda s: None if s.leader == broker_id
                                else remove_replica(s, broker_id, ctrl.epoch))
    return [k for k in replicated if k in ctrl.states
            and ctrl.states[k][0].leader == broker_id]


# --- the broker's side ---------------------------------------------------------------------

async def send_request(host: str, port: int, broker_id: int, broker_epoch: int,
                       version: int = VERSION, inter_broker: InterBroker | None = None,
                       ) -> tuple[int, list[tuple[str, int]]]:
    """One ControlledShutdown round trip: (error code, remaining partitions)."""
    client_id = f"broker-{broker_id}-shutdown"
    channel = await (inter_broker or InterBroker()).connect(host, port, client_id,
                                                            REQUEST_TIMEOUT_S)
    try:
        frame = await channel.exchange(wire.encode_request(
            wire.ControlledShutdownRequest(broker_id, broker_epoch), version, 1, client_id),
            REQUEST_TIMEOUT_S)
        head = 5 if wire.flexible(version) else 4  # correlation id (+ tagged fields)
        return wire.decode_response(frame[head:], version)
    finally:
        channel.close()


async def controlled_shutdown(config: Any, membership: Any, view: Any,
                              inter_broker: InterBroker | None = None) -> bool:
    """The broker's controlled shutdown (before it stops serving); True when the controller
    moved everything off it. The controller and its endpoint come from the cluster view
    (Kafka's metadata cache), not from ZooKeeper; each attempt is bounded. Never raises."""
    if not config["controlled.shutdown.enable"]:
        return False
    retries = config["controlled.shutdown.max.retries"]
    backoff_s = config["controlled.shutdown.retry.backoff.ms"] / 1000
    for attempt in range(1, retries + 1):
        cid = view.controller_id
        try:
            if cid < 0:
                log.warning("Controlled shutdown attempt %d: no controller known", attempt)
            else:
                host, port = (inter_broker or InterBroker()).endpoint(view, cid)
                code, remaining = await asyncio.wait_for(send_request(
                    host, port, membership.broker_id, membership.broker_epoch,
                    inter_broker=inter_broker), REQUEST_TIMEOUT_S)
                if code == ErrorCode.none and not remaining:
                    log.info("Controlled shutdown request returned successfully after %d "
                             "attempt(s) (controller %d)", attempt, cid)
                    return True
                log.warning("Controlled shutdown attempt %d: %s, remaining partitions %s",
                            attempt, ErrorCode(code).name,
                            [f"{t}-{p}" for t, p in remaining])
        except Exception as e:  # noqa: BLE001 - a failed attempt is retried, then given up
            log.warning("Controlled shutdown attempt %d failed: %r", attempt, e)
        if attempt < retries:
            await asyncio.sleep(backoff_s)
    log.warning("Proceeding to do an unclean shutdown as all the controlled shutdown "
                "attempts failed")
    return False
