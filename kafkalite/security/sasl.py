# SASL authentication of one connection, sans I/O, as Kafka's SaslServerAuthenticator: the
# per-listener settings (enabled mechanisms, PLAIN users from the listener's JAAS config,
# OAUTHBEARER validator options, KIP-368 session lifetime, the failed-authentication delay)
# and the state machine that decides, request by request, what a connection on a
# SASL_PLAINTEXT or SASL_SSL listener may send:
#   handshake_or_versions --ApiVersions--> handshake --SaslHandshake--> authenticate
#   authenticate --SaslAuthenticate (complete)--> complete
#   complete --SaslHandshake (client used SaslAuthenticate v1+)--> re-authentication
# The handshake lists the enabled mechanisms in Kafka's HashSet order. Before completion any
# other request closes the connection unanswered (Kafka: "Unexpected
# Kafka request of type X during SASL handshake"). A refused mechanism or failed login is
# answered after `connection.failed.authentication.delay.ms`, then closed. After a
# SaslHandshake v0 the client sends raw SASL tokens in plain size-prefixed frames (no Kafka
# header), answered the same way. Once the session lifetime has passed, the next request
# other than a re-authenticating SaslHandshake closes the connection, as Kafka's Processor
# does ("Disconnecting expired channel"). The handlers reach the session through CURRENT.
from __future__ import annotations

import logging
import re
import weakref
from contextvars import ContextVar
from typing import Any, Protocol

from ..javahash import hashmap_order, string_hash
from ..wire.errors import ErrorCode
from .sasl_errors import SaslAuthenticationFailed, SaslInvalid
from .sasl_oauthbearer import OAuthBearerServer
from .sasl_plain import PlainServer
from .sasl_scram import MECHANISM_IDS, ScramServer

log = logging.getLogger("kafkalite.security")

SASL_PROTOCOLS = ("SASL_PLAINTEXT", "SASL_SSL")
API_VERSIONS, SASL_HANDSHAKE, SASL_AUTHENTICATE = 18, 17, 36
SERVED = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER")
CURRENT: ContextVar["SaslSession | None"] = ContextVar("kafkalite_sasl", default=None)


class MechanismServer(Protocol):
    complete: bool
    principal_name: str | None
    credential_expiry_ms: int | None

    def evaluate(self, token: bytes) -> bytes: ...


_JAAS_OPTION = re.compile(r'([\w.\-]+)\s*=\s*("(?:[^"\\]|\\.)*"|[^\s;]+)')


def parse_jaas(text: str | None) -> dict[str, str]:
    """The options of a one-module JAAS config: `Module required k="v" k2=v2;`."""
    if not text:
        return {}
    body = text.strip().rstrip(";")
    parts = body.split(None, 2)
    opts = parts[2] if len(parts) == 3 else ""
    out = {}
    for key, raw in _JAAS_OPTION.findall(opts):
        if raw.startswith('"'):
            raw = re.sub(r"\\(.)", r"\1", raw[1:-1])
        out[key] = raw
    return out


def parse_users(spec: str | None) -> dict[str, str]:
    """kafkalite's bootstrap users, `name:password[,name:password...]`."""
    out = {}
    for item in (spec or "").split(","):
        name, sep, password = item.strip().partition(":")
        if sep and name:
            out[name] = password
    return out


def protocol_map(config: Any) -> dict[str, str]:
    out = {}
    for item in (config["listener.security.protocol.map"] or "").split(","):
        name, sep, proto = item.strip().partition(":")
        if sep:
            out[name.strip().upper()] = proto.strip().upper()
    return out


def configured_listener(config: Any) -> tuple[str, str]:
    """(name, security protocol) of the first entry of `listeners`."""
    first = config["listeners"].split(",")[0].strip()
    name = first.split("://", 1)[0].upper() if "://" in first else "PLAINTEXT"
    return name, protocol_map(config).get(name, name)


class SaslSettings:
    """One listener's SASL configuration, resolved as Kafka resolves it: the
    `listener.name.<listener>.` prefixed property first (with the mechanism for the JAAS
    config and connections.max.reauth.ms), then the broker-wide one."""

    def __init__(self, config: Any, listener: str, broker: Any):
        self.config = config
        self.prefix = f"listener.name.{listener.lower()}."
        self.listener = listener
        self.broker = broker
        raw = self._get("sasl.enabled.mechanisms")
        listed = [m.strip() for m in (raw if isinstance(raw, str) else
                                      ",".join(raw or [])).split(",") if m.strip()]
        # SaslServerAuthenticator lists `new ArrayList<>(new HashSet<>(enabled))`: a
        # HashSet's order, not the config's (PLAIN,SCRAM-SHA-256,SCRAM-SHA-512 comes back
        # PLAIN, SCRAM-SHA-512, SCRAM-SHA-256 from Kafka 3.8)
        unique = list(dict.fromkeys(listed))
        self.mechanisms = hashmap_order(unique, string_hash,
                                        max(int(len(unique) / 0.75) + 1, 16))
        self.plain_users = parse_users(config["kafkalite.sasl.plain.users"])
        self.plain_users.update({k[5:]: v for k, v in parse_jaas(
            self._get("plain.sasl.jaas.config")).items() if k.startswith("user_")})
        self.oauth_options = parse_jaas(self._get("oauthbearer.sasl.jaas.config"))
        self.failed_delay_ms = int(config["connection.failed.authentication.delay.ms"])

    def _get(self, key: str) -> Any:
        value = self.config.explicit.get(self.prefix + key)
        return value if value is not None else (
            self.config[key] if "sasl.jaas.config" not in key else None)

    def reauth_ms(self, mechanism: str) -> int:
        value = self.config.explicit.get(f"{self.prefix}{mechanism.lower()}."
                                         "connections.max.reauth.ms")
        return int(value) if value is not None else int(self.config["connections.max.reauth.ms"])

    def server(self, mechanism: str) -> MechanismServer | None:
        if mechanism == "PLAIN":
            return PlainServer(self.plain_users)
        if mechanism in MECHANISM_IDS:
            return ScramServer(mechanism, self.broker.scram.get)
        if mechanism == "OAUTHBEARER":
            return OAuthBearerServer(self.broker.clock.wall_ms, self.oauth_options)
        return None


_SETTINGS: "weakref.WeakKeyDictionary[Any, dict[str, SaslSettings]]" = \
    weakref.WeakKeyDictionary()


def session_for(broker: Any, listener: Any) -> "SaslSession | None":
    """A SASL session for a new connection on `listener` (an object with `name` and
    `security_protocol`; None: the configured first listener), or None if the listener
    does not authenticate with SASL."""
    if listener is None:
        name, proto = configured_listener(broker.config)
    else:
        name = getattr(listener, "name", "")
        proto = getattr(listener, "security_protocol", None) or getattr(listener, "protocol", "")
    if str(proto).upper() not in SASL_PROTOCOLS:
        return None
    per_broker = _SETTINGS.setdefault(broker, {})
    settings = per_broker.get(name)
    if settings is None:
        settings = per_broker[name] = SaslSettings(broker.config, name, broker)
    return SaslSession(settings, broker.clock)


class SaslSession:
    def __init__(self, settings: SaslSettings, clock: Any):
        self.settings = settings
        self.clock = clock
        self.state = "handshake_or_versions"
        self.mechanism: str | None = None
        self.server: MechanismServer | None = None
        self.raw_tokens = False  # SaslHandshake v0: tokens come without Kafka headers
        self.principal: str | None = None  # "User:<name>" once authenticated
        self.supports_reauth = False
        self.reauthenticating = False
        self.expires_ms: int | None = None  # monotonic end of the session (KIP-368)
        self.failed = False
        self.close_reason: str | None = None
        self._lifetime_ms = 0
        self._bad_mechanism = ""

    @property
    def mechanisms(self) -> list[str]:
        return self.settings.mechanisms

    def before_request(self, api_key: int) -> str | None:
        """Whether the request may go to its handler; else why the connection closes
        (unanswered). Called for every framed request of the connection."""
        if self.state == "complete":
            # KIP-368 only for a session that ends (Kafka's maybeBeginServerReauthentication);
            # else the handshake reaches the handler: ILLEGAL_SASL_STATE
            if api_key == SASL_HANDSHAKE and self.supports_reauth \
                    and self.expires_ms is not None:
                self.state, self.reauthenticating = "handshake", True
                return None
            if self.expires_ms is not None and self.clock.monotonic_ms() >= self.expires_ms:
                return self._fail("session expired (connections.max.reauth.ms): "
                                  "disconnecting expired channel", counted=False)
            return None
        allowed = {"handshake_or_versions": (API_VERSIONS, SASL_HANDSHAKE),
                   "handshake": (SASL_HANDSHAKE,),
                   "authenticate": (SASL_AUTHENTICATE,)}.get(self.state, ())
        if api_key in allowed:
            return None
        during = "authentication" if self.state == "authenticate" else "SASL handshake"
        return self._fail(f"Unexpected Kafka request of type {api_key} during {during}.")

    def after_api_versions(self) -> None:
        if self.state == "handshake_or_versions":
            self.state = "handshake"

    def handshake(self, mechanism: str, version: int) -> tuple[int, list[str]]:
        """(error code, enabled mechanisms) for a SaslHandshake on this connection."""
        enabled = self.mechanisms
        if mechanism not in enabled or mechanism not in SERVED:
            if mechanism in enabled:
                log.warning("SASL mechanism %s is enabled but not served by kafkalite",
                            mechanism)
            self._fail(f"Unsupported SASL mechanism {mechanism}")
            return ErrorCode.unsupported_sasl_mechanism, enabled
        if self.reauthenticating and mechanism != self.mechanism:
            # Kafka answers the handshake, then fails the next token with this message
            self.state = "reauth_bad_mechanism"
            self._bad_mechanism = (f"SASL mechanism '{mechanism}' requested by client is not "
                                   "supported for re-authentication of mechanism "
                                   f"'{self.mechanism}'")
            return ErrorCode.none, enabled
        self.mechanism = mechanism
        self.server = self.settings.server(mechanism)
        self.raw_tokens = version == 0
        self.state = "authenticate"
        return ErrorCode.none, enabled

    def authenticate(self, token: bytes, version: int) -> tuple[int, str | None, bytes, int]:
        """(error code, message, auth bytes, session lifetime ms) for a SaslAuthenticate."""
        if version > 0:
            self.supports_reauth = True
        what = "re-authentication" if self.reauthenticating else "authentication"
        try:
            if self.state == "reauth_bad_mechanism":
                raise SaslAuthenticationFailed(self._bad_mechanism)
            out = self._evaluate(token)
        except SaslAuthenticationFailed as e:
            self._fail(str(e))
            return ErrorCode.sasl_authentication_failed, str(e), b"", 0
        except SaslInvalid as e:
            log.debug("SASL %s failed: %s", what, e)
            msg = (f"Authentication failed during {what} due to invalid credentials with "
                   f"SASL mechanism {self.mechanism}")
            self._fail(msg)
            return ErrorCode.sasl_authentication_failed, msg, b"", 0
        # a success's message is empty, not null, as Kafka's default
        return ErrorCode.none, "", out, self._lifetime_ms if self.state == "complete" else 0

    def raw_token(self, token: bytes) -> bytes | None:
        """A SASL token after a SaslHandshake v0: the raw answer, or None (failed: close)."""
        try:
            return self._evaluate(token)
        except (SaslAuthenticationFailed, SaslInvalid) as e:
            self._fail(str(e))
            return None

    def _evaluate(self, token: bytes) -> bytes:
        server = self.server
        assert server is not None
        out = server.evaluate(token)
        if server.complete:
            principal = f"User:{server.principal_name}"
            if self.reauthenticating and principal != self.principal:
                raise SaslAuthenticationFailed(
                    "Cannot change principals during re-authentication from "
                    f"{self.principal.replace(':', '.', 1) if self.principal else None}: "
                    f"{principal.replace(':', '.', 1)}")
            self.principal = principal
            self._lifetime_ms = self._session_lifetime(server)
            now = self.clock.monotonic_ms()
            self.expires_ms = now + self._lifetime_ms if self._lifetime_ms or \
                server.credential_expiry_ms is not None else None
            self._count("successful-reauthentication" if self.reauthenticating
                        else "successful-authentication")
            self.state, self.reauthenticating, self.raw_tokens = "complete", False, False
        return out

    def _session_lifetime(self, server: MechanismServer) -> int:
        # Kafka's calcCompletionTimesAndReturnSessionLifetimeMs
        reauth = self.settings.reauth_ms(self.mechanism or "")
        expiry = server.credential_expiry_ms
        if expiry is None:
            return max(reauth, 0)
        left = max(expiry - self.clock.wall_ms(), 0)
        return min(left, reauth) if reauth > 0 else left

    def _fail(self, reason: str, counted: bool = True) -> str:
        # Kafka's Selector counts every AuthenticationException (a refused mechanism, bad
        # credentials, a request out of the SASL sequence), not an expired session's close
        if counted:
            self._count("failed-reauthentication" if self.reauthenticating
                        else "failed-authentication")
        self.failed = True
        self.state = "failed"
        self.close_reason = reason
        return reason

    def _count(self, metric: str) -> None:
        stats = getattr(self.settings.broker, "stats", None)
        if stats is not None:
            stats.authentications[self.settings.listener, metric] += 1
