# Raw DescribeConfigs / AlterConfigs / IncrementalAlterConfigs through kafka-python's codec,
# for the resources the admin clients refuse to name (the cluster-default BROKER resource "")
# and for field-by-field comparisons between brokers.
from __future__ import annotations

from kafka.protocol.admin import (AlterConfigsRequest, DescribeConfigsRequest,
                                  IncrementalAlterConfigsRequest)

from .kbatch import call, connect

TOPIC, BROKER = 2, 4
SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3

# (value, read_only, source, sensitive, synonyms [(name, value, source)], type, has no doc)
Described = tuple


def describe(bootstrap: str, rtype: int, name: str, keys: list[str] | None = None,
             docs: bool = False) -> tuple[int, str | None, dict[str, Described]]:
    """(error code, error message, {config name: Described}) of one resource."""
    Req = DescribeConfigsRequest[4]
    res = Req.DescribeConfigsResource(resource_type=rtype, resource_name=name,
                                      configuration_keys=keys)
    with connect(bootstrap) as s:
        r = call(s, Req(resources=[res], include_synonyms=True, include_documentation=docs))
    result = r.results[0]
    return result.error_code, result.error_message, {
        c.name: (c.value, c.read_only, c.config_source, c.is_sensitive,
                 [(x.name, x.value, x.source) for x in c.synonyms], c.config_type,
                 c.documentation is None)
        for c in result.configs}


def alter(bootstrap: str, rtype: int, name: str, configs: dict[str, str | None],
          validate_only: bool = False) -> tuple[int, str | None]:
    """Legacy AlterConfigs v2: `configs` becomes the resource's whole set."""
    Req = AlterConfigsRequest[2]
    Res = Req.AlterConfigsResource
    req = Req(resources=[Res(resource_type=rtype, resource_name=name, configs=[
        Res.AlterableConfig(name=k, value=v) for k, v in configs.items()])],
        validate_only=validate_only)
    with connect(bootstrap) as s:
        r = call(s, req).responses[0]
    return r.error_code, r.error_message


def alter_incremental(bootstrap: str, rtype: int, name: str,
                      ops: list[tuple[str, int, str | None]],
                      validate_only: bool = False) -> tuple[int, str | None]:
    """IncrementalAlterConfigs v1 with (config name, operation, value) entries."""
    Req = IncrementalAlterConfigsRequest[1]
    Res = Req.AlterConfigsResource
    req = Req(resources=[Res(resource_type=rtype, resource_name=name, configs=[
        Res.AlterableConfig(name=k, config_operation=op, value=v) for k, op, v in ops])],
        validate_only=validate_only)
    with connect(bootstrap) as s:
        r = call(s, req).responses[0]
    return r.error_code, r.error_message
