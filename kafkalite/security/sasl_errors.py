# The two ways a SASL mechanism fails, as Kafka's SaslServer implementations fail. Kept apart
# from sasl.py so that each mechanism module imports only these (no import cycle).
from __future__ import annotations


class SaslAuthenticationFailed(Exception):
    """Kafka's SaslAuthenticationException: its message is sent to the client as it is."""


class SaslInvalid(Exception):
    """Kafka's SaslException: the client gets only the generic "invalid credentials" message
    (which must not tell whether the user exists); the detail is logged at debug."""
