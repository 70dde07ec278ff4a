# How this broker connects to the others (issue 17), as Kafka 3.8 in ZooKeeper mode: the
# replica fetchers, the transaction marker sender and controlled shutdown all connect through
# InterBroker.connect, on the inter-broker listener:
#   inter.broker.listener.name, or else the listener named as security.inter.broker.protocol
#     (default PLAINTEXT); both set is refused, as Kafka refuses it. The other broker's
#     endpoint is the one of that listener name in its /brokers/ids registration; a broker
#     registered without it cannot be reached (the caller logs and retries).
#   SSL / SASL_SSL: a TLS client with the listener's ssl.* settings (`listener.name.<l>.ssl.*`
#     first): the truststore verifies the other broker (hostname checked unless
#     ssl.endpoint.identification.algorithm is empty), the keystore is this broker's client
#     certificate (for ssl.client.auth=required).
#   SASL_PLAINTEXT / SASL_SSL: SaslHandshake v1 + SaslAuthenticate v2 with
#     sasl.mechanism.inter.broker.protocol (kafkalite: PLAIN, SCRAM-SHA-256, SCRAM-SHA-512)
#     and the username/password options of the listener's JAAS config for that mechanism
#     (`listener.name.<l>.<mechanism>.sasl.jaas.config`, else `sasl.jaas.config`), as
#     Kafka's broker logs in as a client.
# Start-up checks (check()) name Kafka's messages; the ones Kafka only hits later (no JAAS
# login, GSSAPI) are refused at start here with kafkalite's own line.
from __future__ import annotations

import asyncio
import logging
import ssl
import struct
from functools import cache
from typing import Any, Sequence

from kio.serial import entity_reader

from ..config_values import ConfigError
from ..security.listeners import Listener
from ..security.sasl import parse_jaas
from ..security.sasl_client import CLIENT_MECHANISMS, client_for
from ..security.sasl_errors import SaslAuthenticationFailed
from ..security.tls import TlsConfigError, _load_keystore, _load_truststore, setting
from ..wire.codec import encode, is_flexible, response_class
from ..wire.errors import ErrorCode
from ..wire.header import skip_tagged_fields

log = logging.getLogger("kafkalite.cluster")

SASL_HANDSHAKE, SASL_AUTHENTICATE = 17, 36
HANDSHAKE_VERSION, AUTHENTICATE_VERSION = 1, 2
_TLS_VERSIONS = {"TLSv1.2": ssl.TLSVersion.TLSv1_2, "TLSv1.3": ssl.TLSVersion.TLSv1_3}
_SIZE = struct.Struct(">i")
_HEADER = struct.Struct(">hhih")


@cache
def _reader(cls: type) -> Any:
    return entity_reader(cls)


class Channel:
    """One connection to a broker: request/response, one at a time."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                 client_id: str):
        self._reader, self._writer = reader, writer
        self._client_id = client_id.encode()
        self._corr = 0

    async def exchange(self, frame: bytes, timeout_s: float) -> bytes:
        """Send one size-prefixed request; the response frame (without its size)."""
        self._writer.write(frame)
        await self._writer.drain()
        (size,) = _SIZE.unpack(await asyncio.wait_for(self._reader.readexactly(4), timeout_s))
        return await asyncio.wait_for(self._reader.readexactly(size), timeout_s)

    async def call(self, api_key: int, version: int, body: Any, timeout_s: float) -> Any:
        self._corr += 1
        flexible = is_flexible(api_key, version)
        head = _HEADER.pack(api_key, version, self._corr, len(self._client_id)) + \
            self._client_id + (b"\x00" if flexible else b"")
        payload = encode(body)
        frame = await self.exchange(_SIZE.pack(len(head) + len(payload)) + head + payload,
                                    timeout_s)
        (corr,) = _SIZE.unpack_from(frame, 0)
        if corr != self._corr:
            raise ConnectionError(f"response {corr} to request {self._corr}")
        pos = skip_tagged_fields(frame, 4) if flexible else 4
        return _reader(response_class(api_key, version))(frame, pos)[0]

    def close(self) -> None:
        self._writer.close()


class Unreachable(ConnectionError):
    """The other broker is not live, or is registered without the inter-broker listener."""


class LoginFailed(ConnectionError):
    """The other broker refused this broker's SASL login (or could not prove itself)."""


def _mechanisms(cfg: Any, listener: Listener) -> list[str]:
    raw = cfg.explicit.get(listener.config_prefix + "sasl.enabled.mechanisms")
    if raw is None:
        raw = cfg["sasl.enabled.mechanisms"]
    text = raw if isinstance(raw, str) else ",".join(raw or [])
    return [m.strip() for m in text.split(",") if m.strip()]


def inter_broker_listener(cfg: Any, listeners: Sequence[Listener]) -> Listener:
    """The listener other brokers are reached on; ConfigError as Kafka's KafkaConfig words
    it. (listeners.parse_listeners already refused both names set, and an unknown name.)"""
    name = cfg["inter.broker.listener.name"]
    name = name.upper() if name else str(cfg["security.inter.broker.protocol"]).upper()
    for listener in listeners:
        if listener.name == name:
            return listener
    raise ConfigError("inter.broker.listener.name must be a listener name defined in "
                      "advertised.listeners. The valid options based on currently configured "
                      f"listeners are {','.join(ln.name for ln in listeners)}")


def _credentials(cfg: Any, listener: Listener, mechanism: str) -> tuple[str, str]:
    key = f"{listener.config_prefix}{mechanism.lower()}.sasl.jaas.config"
    jaas = cfg.explicit.get(key) or cfg.explicit.get("sasl.jaas.config")
    options = parse_jaas(str(jaas) if jaas else None)
    if "username" not in options or "password" not in options:
        raise ConfigError(f"The inter-broker SASL login of listener {listener.name} needs "
                          f"username and password options in {key} (or sasl.jaas.config)")
    return options["username"], options["password"]


def client_context(cfg: Any, listener: Listener) -> ssl.SSLContext:
    """A TLS client context from the listener's ssl.* settings; TlsConfigError."""
    def get(key: str) -> Any:
        return setting(cfg, listener, key)

    def fail(msg: str) -> TlsConfigError:
        return TlsConfigError(f"inter-broker listener {listener.name}: {msg}")

    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    if get("ssl.truststore.location") or get("ssl.truststore.certificates"):
        _load_truststore(ctx, get, fail)
    else:
        ctx.load_default_certs(ssl.Purpose.SERVER_AUTH)
    if get("ssl.keystore.location") or get("ssl.keystore.key"):
        _load_keystore(ctx, get, fail)  # the client certificate, for ssl.client.auth
    ctx.check_hostname = bool(get("ssl.endpoint.identification.algorithm"))
    versions = [_TLS_VERSIONS[v.strip()] for v in (get("ssl.enabled.protocols") or "")
                .split(",") if v.strip() in _TLS_VERSIONS]
    if versions:
        ctx.minimum_version, ctx.maximum_version = min(versions), max(versions)
    return ctx


class InterBroker:
    """This broker's way to the others: the listener name, TLS context and SASL login.
    Without a config (callers built outside a server, in tests): PLAINTEXT to each broker's
    first registered endpoint."""

    def __init__(self, cfg: Any = None, listeners: Sequence[Listener] = ()):
        self.listener: Listener | None = None
        self.mechanism: str | None = None
        self.username = self.password = ""
        self.ssl_context: ssl.SSLContext | None = None
        if cfg is not None:
            self._configure(cfg, listeners)

    def _configure(self, cfg: Any, listeners: Sequence[Listener]) -> None:
        self.listener = inter_broker_listener(cfg, listeners)
        if self.listener.uses_sasl:
            mechanism = str(cfg["sasl.mechanism.inter.broker.protocol"])
            if mechanism not in _mechanisms(cfg, self.listener):
                raise ConfigError("sasl.mechanism.inter.broker.protocol must be included in "
                                  "sasl.enabled.mechanisms when SASL is used for "
                                  "inter-broker communication")
            if mechanism not in CLIENT_MECHANISMS:
                raise ConfigError(f"sasl.mechanism.inter.broker.protocol={mechanism}: "
                                  "kafkalite brokers log in to each other with "
                                  f"{', '.join(CLIENT_MECHANISMS)} only")
            self.mechanism = mechanism
            self.username, self.password = _credentials(cfg, self.listener, mechanism)
        if self.listener.uses_tls:
            self.ssl_context = client_context(cfg, self.listener)
        log.info("Inter-broker connections: %s", self.describe())

    def describe(self) -> str:
        if self.listener is None:
            return "each broker's first endpoint (PLAINTEXT)"
        how = self.listener.protocol + (f"/{self.mechanism} as {self.username}"
                                        if self.mechanism else "")
        return f"listener {self.listener.name} ({how})"

    def endpoint(self, view: Any, node_id: int) -> tuple[str, int]:
        """The broker's registered endpoint of the inter-broker listener; Unreachable."""
        node = view.broker(node_id, self.listener)
        if node is not None:
            return node.host, node.port
        if view.broker(node_id, None) is None:
            raise Unreachable(f"broker {node_id} is not live")
        name = self.listener.name if self.listener is not None else "?"
        raise Unreachable(f"broker {node_id} has no endpoint for the inter-broker listener "
                          f"{name}")

    async def open(self, view: Any, node_id: int, client_id: str,
                   timeout_s: float) -> Channel:
        host, port = self.endpoint(view, node_id)
        return await self.connect(host, port, client_id, timeout_s)

    async def connect(self, host: str, port: int, client_id: str,
                      timeout_s: float) -> Channel:
        """A connection to host:port, TLS and SASL done; OSError (ConnectionError,
        LoginFailed, ssl.SSLError), TimeoutError."""
        reader, writer = await asyncio.wait_for(asyncio.open_connection(
            host, port, ssl=self.ssl_context,
            server_hostname=host if self.ssl_context is not None else None), timeout_s)
        channel = Channel(reader, writer, client_id)
        if self.mechanism is None:
            return channel
        try:
            await asyncio.wait_for(self._authenticate(channel, timeout_s), timeout_s)
        except SaslAuthenticationFailed as e:
            channel.close()
            raise LoginFailed(f"SASL {self.mechanism} login to {host}:{port} as "
                              f"{self.username} failed: {e}") from None
        except BaseException:
            channel.close()
            raise
        return channel

    async def _authenticate(self, channel: Channel, timeout_s: float) -> None:
        from kio.schema.sasl_authenticate.v2 import request as auth
        from kio.schema.sasl_handshake.v1 import request as handshake
        resp = await channel.call(SASL_HANDSHAKE, HANDSHAKE_VERSION,
                                  handshake.SaslHandshakeRequest(mechanism=self.mechanism),
                                  timeout_s)
        if resp.error_code != ErrorCode.none:
            raise SaslAuthenticationFailed(
                f"SaslHandshake {self.mechanism}: {ErrorCode(resp.error_code).name} "
                f"(enabled: {', '.join(resp.mechanisms)})")
        client = client_for(self.mechanism or "", self.username, self.password)
        token = client.respond(b"")
        while token is not None:
            resp = await channel.call(SASL_AUTHENTICATE, AUTHENTICATE_VERSION,
                                      auth.SaslAuthenticateRequest(auth_bytes=token), timeout_s)
            if resp.error_code != ErrorCode.none:
                raise SaslAuthenticationFailed(
                    f"{ErrorCode(resp.error_code).name}: {resp.error_message}")
            token = client.respond(resp.auth_bytes)
        if not client.complete:
            raise SaslAuthenticationFailed(f"{self.mechanism} exchange did not complete")

