# Named listeners, as Kafka configures them: `listeners=NAME://host:port,...`, each name
# mapped to a security protocol by `listener.security.protocol.map` (Kafka's default map
# gives PLAINTEXT, SSL, SASL_PLAINTEXT and SASL_SSL their own names), advertised at
# `advertised.listeners` (the same names, a subset; unset: the listeners themselves).
#
# Each accepted connection carries its Listener (KafkaConnection.listener, RequestContext.
# listener): the SASL layer reads `protocol`, Metadata / DescribeCluster / FindCoordinator
# answer the endpoint of the listener the request came through (`endpoint`), as Kafka
# answers each client with the brokers' endpoints for the request's listener name.
#
# Kafka refuses a listener that names no protocol, a name or a port used twice, and
# advertised names that are not listeners; so does this module (ConfigError). A bare
# `host:port` (no name) is read as PLAINTEXT, as kafkalite accepted before named listeners.
# Deliberate gap: a listener left out of an explicit advertised.listeners is advertised
# at its bound address (Kafka answers no broker at all for it).
from __future__ import annotations

import ssl
from dataclasses import dataclass
from typing import Any

from ..config_values import ConfigError

PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
DEFAULT_MAP = "PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT,SASL_SSL:SASL_SSL"


@dataclass(slots=True, eq=False)
class Listener:
    name: str  # upper case, as Kafka normalises listener names
    protocol: str  # one of PROTOCOLS
    host: str  # bind address ("" = every interface)
    port: int  # bound port once the server is listening (0 in the config: any free port)
    advertised_host: str
    advertised_port: int  # 0: the bound port
    ssl_context: ssl.SSLContext | None = None

    @property
    def uses_tls(self) -> bool:
        return self.protocol in ("SSL", "SASL_SSL")

    @property
    def uses_sasl(self) -> bool:
        return self.protocol in ("SASL_PLAINTEXT", "SASL_SSL")

    @property
    def config_prefix(self) -> str:
        """Kafka's per-listener override prefix: `listener.name.<lower-case name>.`."""
        return f"listener.name.{self.name.lower()}."


def split_endpoints(spec: str, what: str) -> list[tuple[str, str, int]]:
    """'NAME://host:port,...' -> [(NAME, host, port)]; '[::1]' hosts lose their brackets."""
    out = []
    for item in (s.strip() for s in spec.split(",")):
        if not item:
            continue
        name, sep, rest = item.partition("://")
        if not sep:
            name, rest = "PLAINTEXT", item
        host, colon, port = rest.rpartition(":")
        if not colon:
            raise ConfigError(f"Invalid {what} {item!r}: expected NAME://host:port")
        try:
            number = int(port)
        except ValueError:
            raise ConfigError(f"Invalid {what} {item!r}: bad port") from None
        if not 0 <= number <= 65535:
            raise ConfigError(f"Invalid {what} {item!r}: port out of range")
        out.append((name.strip().upper(), host.strip("[]"), number))
    if not out:
        raise ConfigError(f"{what} is empty")
    return out


def protocol_map(spec: str) -> dict[str, str]:
    """listener.security.protocol.map 'NAME:PROTOCOL,...' -> {NAME: PROTOCOL}."""
    out: dict[str, str] = {}
    for item in (s.strip() for s in spec.split(",")):
        if not item:
            continue
        name, sep, proto = item.partition(":")
        proto = proto.strip().upper()
        if not sep or proto not in PROTOCOLS:
            raise ConfigError(f"Invalid value {spec} for configuration "
                              f"listener.security.protocol.map: {item!r} is not "
                              f"NAME:{'|'.join(PROTOCOLS)}")
        out[name.strip().upper()] = proto
    return out


def parse_listeners(cfg: Any) -> list[Listener]:
    """The configured listeners, in config order, with their advertised endpoints."""
    mapping = protocol_map(cfg["listener.security.protocol.map"] or DEFAULT_MAP)
    bound = split_endpoints(cfg["listeners"], "listener")
    adv_spec = cfg["advertised.listeners"]
    advertised = {n: (h, p) for n, h, p in split_endpoints(adv_spec, "advertised listener")} \
        if adv_spec else {}
    names = [n for n, _, _ in bound]
    for name in names:
        if names.count(name) > 1:
            raise ConfigError(f"Each listener must have a different name, listeners: "
                              f"{cfg['listeners']}")
        if name not in mapping:
            raise ConfigError(f"No security protocol defined for listener {name} "
                              "(listener.security.protocol.map)")
    ports = [p for _, _, p in bound if p]
    if len(set(ports)) != len(ports):
        raise ConfigError(f"Each listener must have a different port, listeners: "
                          f"{cfg['listeners']}")
    unknown = [n for n in advertised if n not in names]
    if unknown:
        raise ConfigError("advertised.listeners listener names must be equal to or a subset "
                          f"of the ones defined in listeners (unknown: {', '.join(unknown)})")
    inter = cfg["inter.broker.listener.name"]
    if inter and cfg.is_explicit("security.inter.broker.protocol"):
        raise ConfigError("Only one of inter.broker.listener.name and "
                          "security.inter.broker.protocol should be set.")
    if inter and inter.upper() not in mapping:
        raise ConfigError(f"Listener with name {inter.upper()} defined in "
                          "inter.broker.listener.name not found in "
                          "listener.security.protocol.map.")
    if inter and inter.upper() not in names:
        raise ConfigError(f"inter.broker.listener.name must be a listener name defined in "
                          f"advertised.listeners. The valid options based on currently "
                          f"configured listeners are {','.join(names)}")
    out = []
    for name, host, port in bound:
        ahost, aport = advertised.get(name, (host, port))
        if ahost in ("", "0.0.0.0", "::"):
            ahost = "localhost"
        out.append(Listener(name, mapping[name], host, port, ahost, aport))
    return out


def endpoint(ctx: Any) -> tuple[str, int]:
    """The (host, port) to advertise to the client of this request: its listener's."""
    listener = getattr(ctx, "listener", None)
    if listener is None:
        return ctx.broker.host, ctx.broker.port
    return listener.advertised_host, listener.advertised_port or listener.port
