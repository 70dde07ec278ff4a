# ApiVersions (key 18), v0-4.
#
# The list is derived from the handler registry. The response header is always v0, even for
# flexible versions (KIP-511). A request at a version this broker does not know is answered
# with a v0 body, UNSUPPORTED_VERSION (35) and the full list, so the client can retry with a
# version it shares. Gaps: no feature flags (supported/finalized features are empty), and
# client_software_name/version are not validated.
from __future__ import annotations

import struct

from ...wire.codec import response_class
from ...wire.errors import ErrorCode
from ..build import ZERO, make, response_module
from ..registry import api, supported_versions

_ENTRY = struct.Struct(">hhh")


def unsupported_version_body() -> bytes:
    keys = supported_versions()
    return (struct.pack(">hi", ErrorCode.unsupported_version, len(keys))
            + b"".join(_ENTRY.pack(*k) for k in keys))


@api(18, "ApiVersions", (0, 4))
async def handle(ctx, req):
    v = ctx.api_version
    mod = response_module(18, v)
    keys = tuple(mod.ApiVersion(api_key=k, min_version=lo, max_version=hi)
                 for k, lo, hi in supported_versions())
    return make(response_class(18, v), error_code=ErrorCode.none, api_keys=keys,
                throttle_time=ZERO, supported_features=(), finalized_features_epoch=-1,
                finalized_features=(), zk_migration_ready=False)
