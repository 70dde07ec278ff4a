# ApiVersions (key 18), v0-4.
#
# The list is derived from the handler registry. The response header is always v0, even for
# flexible versions (KIP-511). A request at a version this broker does not know is answered
# with a v0 body, UNSUPPORTED_VERSION (35) and a list holding ApiVersions alone, with its full
# range, which is all the client needs to retry (ApiVersionsRequest.getErrorResponse; Kafka
# 3.8 answers exactly that). From v3 the client's software name and version must match Kafka's
# pattern (ApiVersionsRequest.isValid), else INVALID_REQUEST with an empty list, as
# KafkaApis answers. Gap: no feature flags (supported/finalized features are empty).
from __future__ import annotations

import re
import struct

from ...wire.codec import response_class
from ...wire.errors import ErrorCode
from ..build import ZERO, make, response_module
from ..registry import api, supported_versions

_ENTRY = struct.Struct(">hhh")
_SOFTWARE = re.compile(r"[a-zA-Z0-9](?:[a-zA-Z0-9\-.]*[a-zA-Z0-9])?")


def unsupported_version_body() -> bytes:
    keys = [k for k in supported_versions() if k[0] == 18]
    return (struct.pack(">hi", ErrorCode.unsupported_version, len(keys))
            + b"".join(_ENTRY.pack(*k) for k in keys))


@api(18, "ApiVersions", (0, 4))
async def handle(ctx, req):
    v = ctx.api_version
    mod = response_module(18, v)
    valid = v < 3 or bool(_SOFTWARE.fullmatch(req.client_software_name)
                          and _SOFTWARE.fullmatch(req.client_software_version))
    keys = tuple(mod.ApiVersion(api_key=k, min_version=lo, max_version=hi)
                 for k, lo, hi in supported_versions(
                     bool(ctx.broker.config["zookeeper.connect"]))) if valid else ()
    return make(response_class(18, v),
                error_code=ErrorCode.none if valid else ErrorCode.invalid_request,
                api_keys=keys, throttle_time=ZERO, supported_features=(),
                finalized_features_epoch=-1, finalized_features=(), zk_migration_ready=False)
