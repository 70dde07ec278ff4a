"""The CLI's OAUTHBEARER token (--command-config, issue 15): the unsecured JWT that Kafka's
OAuthBearerUnsecuredLoginCallbackHandler makes from a JAAS config, accepted by the broker's
OAuthBearerServer on a fake clock until its lifetime ends."""
from __future__ import annotations

import base64
import json

import pytest

from kafkalite.clock import FakeClock
from kafkalite.security.sasl import parse_jaas
from kafkalite.security.sasl_oauthbearer import (OAuthBearerServer, unsecured_login_extensions,
                                                 unsecured_login_token)

JAAS = ('org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required '
        'unsecuredLoginStringClaim_sub="carol" unsecuredLoginListClaim_scope="|read|write" '
        'unsecuredLoginNumberClaim_level="2" unsecuredLoginLifetimeSeconds="60" '
        'unsecuredLoginExtension_traceId="t1";')


def parts(token: str) -> list:
    return [json.loads(base64.urlsafe_b64decode(p + "=" * (-len(p) % 4)))
            for p in token.split(".")[:2]]


def test_token_from_the_jaas_options_is_accepted_until_it_expires():
    clock = FakeClock()
    options = parse_jaas(JAAS)
    token = unsecured_login_token(options, clock.wall_ms())
    header, claims = parts(token)
    assert token.endswith(".") and header == {"alg": "none"}
    now_s = clock.wall_ms() / 1000
    assert claims == {"sub": "carol", "scope": ["read", "write"], "level": 2,
                      "iat": now_s, "exp": now_s + 60}
    assert unsecured_login_extensions(options) == {"traceId": "t1"}
    first = f"n,,\x01auth=Bearer {token}\x01traceId=t1\x01\x01".encode()
    server = OAuthBearerServer(clock.wall_ms, {})
    assert server.evaluate(first) == b"" and server.principal_name == "carol"
    clock.advance(61_000)
    late = OAuthBearerServer(clock.wall_ms, {})
    assert late.evaluate(first) == b'{"status":"invalid_token"}'


@pytest.mark.parametrize("jaas, fragment", [
    ('unsecuredLoginStringClaim_user="carol";', "unsecuredLoginStringClaim_sub"),
    ('unsecuredLoginPrincipalClaimName="user" unsecuredLoginStringClaim_sub="carol";',
     "unsecuredLoginStringClaim_user"),
    ('unsecuredLoginStringClaim_sub="carol" unsecuredLoginNumberClaim_exp="1";', "exp"),
])
def test_a_token_without_its_principal_or_with_a_set_time_claim_is_refused(jaas, fragment):
    options = parse_jaas("org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule "
                         "required " + jaas)
    with pytest.raises(ValueError, match=fragment):
        unsecured_login_token(options, 0)
