# SASL/OAUTHBEARER (RFC 7628) server side with unsecured JWTs, as Kafka's default
# OAuthBearerSaslServer with OAuthBearerUnsecuredValidatorCallbackHandler: the token's header
# says alg "none" and its signature is empty; the principal is the `sub` claim (or the JAAS
# option unsecuredValidatorPrincipalClaimName); `exp` (seconds) is required and checked on
# the injected clock's wall reading with unsecuredValidatorAllowableClockSkewMs; `iat`, when
# present, must not lie in the future; unsecuredValidatorRequiredScope names scopes the
# `scope` claim must hold. An invalid token is answered as Kafka does: a JSON error
# challenge ({"status":"invalid_token"}), then, after the client's %x01, the failure with
# that JSON as message. Extensions are all accepted (the unsecured handler's default). The
# token's expiry is the credential lifetime (KIP-368 bounds the session by it). Sans-I/O.
# The client side (the CLI's --command-config) makes the token as Kafka's
# OAuthBearerUnsecuredLoginCallbackHandler does from the JAAS config's unsecuredLogin* options.
from __future__ import annotations

import base64
import json
import re
from typing import Any, Callable, Mapping

from .sasl_errors import SaslAuthenticationFailed, SaslInvalid

_FIRST = re.compile(r"n,(?:a=(?P<authzid>[^,]*))?,\x01(?P<kvpairs>(?:[A-Za-z]+=[\x21-\x7e "
                    r"\t\r\n]+\x01)*)\x01", re.S)


class InvalidToken(Exception):
    def __init__(self, status: str, scope: str | None = None):
        super().__init__(status)
        self.status = status
        self.scope = scope


def _b64url_json(part: str) -> dict[str, Any]:
    try:
        value = json.loads(base64.urlsafe_b64decode(part + "=" * (-len(part) % 4)))
    except (ValueError, TypeError):
        raise InvalidToken("invalid_token") from None
    if not isinstance(value, dict):
        raise InvalidToken("invalid_token")
    return value


def validate_unsecured_jwt(token: str, now_ms: int, options: Mapping[str, str]
                           ) -> tuple[str, int]:
    """(principal, expiry in wall ms) of a valid unsecured JWT; raises InvalidToken."""
    parts = token.split(".")
    if len(parts) != 3 or parts[2]:
        raise InvalidToken("invalid_token")
    header, claims = _b64url_json(parts[0]), _b64url_json(parts[1])
    if header.get("alg") != "none":
        raise InvalidToken("invalid_token")
    skew = int(options.get("unsecuredValidatorAllowableClockSkewMs", "0") or 0)
    principal = claims.get(options.get("unsecuredValidatorPrincipalClaimName") or "sub")
    exp = claims.get("exp")
    if not isinstance(principal, str) or not principal.strip() \
            or isinstance(exp, bool) or not isinstance(exp, (int, float)):
        raise InvalidToken("invalid_token")
    exp_ms = int(exp * 1000)
    if now_ms > exp_ms + skew:
        raise InvalidToken("invalid_token")
    iat = claims.get("iat")
    if isinstance(iat, (int, float)) and not isinstance(iat, bool) \
            and int(iat * 1000) > now_ms + skew:
        raise InvalidToken("invalid_token")
    required = (options.get("unsecuredValidatorRequiredScope") or "").split()
    if required:
        scope = claims.get(options.get("unsecuredValidatorScopeClaimName") or "scope")
        have = set(scope.split() if isinstance(scope, str) else
                   scope if isinstance(scope, list) else [])
        if not set(required) <= have:
            raise InvalidToken("insufficient_scope", " ".join(required))
    return principal, exp_ms


class OAuthBearerServer:
    mechanism = "OAUTHBEARER"

    def __init__(self, wall_ms: Callable[[], int], options: Mapping[str, str]):
        self.wall_ms = wall_ms
        self.options = options
        self.complete = False
        self.principal_name: str | None = None
        self.credential_expiry_ms: int | None = None
        self._error: str | None = None

    def evaluate(self, token: bytes) -> bytes:
        if token == b"\x01" and self._error is not None:
            raise SaslAuthenticationFailed(self._error)
        self._error = None
        m = _FIRST.fullmatch(token.decode("utf-8", "replace"))
        if m is None:
            raise SaslInvalid("Invalid OAUTHBEARER client first message")
        kv = dict(p.split("=", 1) for p in m["kvpairs"].split("\x01") if p)
        auth = kv.get("auth", "")
        if not auth.startswith("Bearer "):
            raise SaslInvalid("Invalid OAUTHBEARER client first message: no auth=Bearer")
        try:
            principal, exp_ms = validate_unsecured_jwt(auth[7:].strip(), self.wall_ms(),
                                                       self.options)
        except InvalidToken as e:
            # Kafka's jsonErrorResponse, byte for byte
            self._error = f'{{"status":"{e.status}"' + (
                f', "scope":"{e.scope}"' if e.scope else "") + "}"
            return self._error.encode()
        authzid = m["authzid"] or ""
        if authzid and authzid != principal:
            raise SaslAuthenticationFailed(
                f"Authentication failed: Client requested an authorization id ({authzid}) "
                f"that is different from the token's principal name ({principal})")
        self.principal_name = principal
        self.credential_expiry_ms = exp_ms
        self.complete = True
        return b""


# --- the client side: Kafka's OAuthBearerUnsecuredLoginCallbackHandler ---------------------

_LOGIN = "unsecuredLogin"


def _b64url(value: Mapping[str, Any]) -> str:
    raw = json.dumps(value, separators=(",", ":")).encode()
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()


def unsecured_login_token(options: Mapping[str, str], wall_ms: int) -> str:
    """The unsecured JWT that Kafka's login handler makes from a JAAS config's options:
    unsecuredLoginStringClaim_<name>, unsecuredLoginNumberClaim_<name>,
    unsecuredLoginListClaim_<name> (its first character is the delimiter),
    unsecuredLoginPrincipalClaimName (default sub, which must be set),
    unsecuredLoginLifetimeSeconds (default 3600); iat and exp are seconds."""
    iat = wall_ms / 1000.0
    claims: dict[str, Any] = {}
    for key, value in options.items():
        kind, sep, name = key.partition("Claim_")
        if not sep or not name or not kind.startswith(_LOGIN):
            continue
        kind = kind[len(_LOGIN):]
        if name in ("iat", "exp"):
            raise ValueError(f"{key}: the {name} claim is set from the lifetime")
        if kind == "String":
            claims[name] = value
        elif kind == "Number":
            number = float(value)
            claims[name] = int(number) if number.is_integer() else number
        elif kind == "List":
            claims[name] = [v for v in value[1:].split(value[:1])] if value else []
    principal = options.get(_LOGIN + "PrincipalClaimName", "sub").strip() or "sub"
    if not isinstance(claims.get(principal), str) or not claims[principal].strip():
        raise ValueError(f"{_LOGIN}StringClaim_{principal} is required: the principal")
    lifetime = float(options.get(_LOGIN + "LifetimeSeconds", "3600"))
    claims.update(iat=iat, exp=iat + lifetime)
    return f"{_b64url({'alg': 'none'})}.{_b64url(claims)}."


def unsecured_login_extensions(options: Mapping[str, str]) -> dict[str, str]:
    """unsecuredLoginExtension_<name>=value: the SASL extensions sent with the token."""
    head = _LOGIN + "Extension_"
    return {k[len(head):]: v for k, v in options.items() if k.startswith(head)}
