"""Security: SASL credential storage (SCRAM) and, later, mechanisms and the authorizer."""
