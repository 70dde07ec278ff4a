"""One module per API key; importing this package registers them all."""
from . import (  # noqa: F401
    api_versions,
    fetch,
    init_producer_id,
    list_offsets,
    metadata,
    produce,
)
