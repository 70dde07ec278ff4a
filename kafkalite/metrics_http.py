# The Prometheus endpoint (`kafkalite.metrics.port`): GET /metrics in the text format.
#
# A minimal HTTP/1.1 responder rather than an HTTP library: one request per connection
# (`Connection: close`), so a scraper never holds anything open, and nothing to install.
# The metrics themselves are rendered by kafkalite/metrics.py from the broker's state.
from __future__ import annotations

import asyncio
from typing import Any

from .metrics import CONTENT_TYPE, render

# A scraper that connects and sends nothing must not hold a task forever.
HEAD_TIMEOUT_S = 10


async def start_metrics_server(broker: Any, host: str | None, port: int) -> asyncio.AbstractServer:
    """Listen on host:port (port 0: any free port) and answer with `broker`'s metrics."""

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), HEAD_TIMEOUT_S)
            parts = head.split(b"\r\n", 1)[0].split()
            if len(parts) >= 2 and parts[0] == b"GET" \
                    and parts[1].split(b"?")[0] in (b"/metrics", b"/"):
                status, ctype, body = b"200 OK", CONTENT_TYPE, render(broker)
            else:
                status, ctype, body = b"404 Not Found", b"text/plain", b"not found\n"
            writer.write(b"HTTP/1.1 " + status + b"\r\nContent-Type: " + ctype
                         + b"\r\nContent-Length: " + str(len(body)).encode()
                         + b"\r\nConnection: close\r\n\r\n" + body)
            await writer.drain()
        except (asyncio.TimeoutError, asyncio.IncompleteReadError, asyncio.LimitOverrunError,
                ConnectionError):
            pass
        finally:
            writer.close()

    return await asyncio.start_server(serve, host, port, reuse_address=True)
