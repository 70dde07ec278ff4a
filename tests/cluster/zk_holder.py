# A ZooKeeper session in a process of its own, for tests that SIGSTOP it until the server
# expires the session: registers the ephemeral znode argv[3] (a broker's registration) with
# session timeout argv[2] ms on argv[1], prints "ready <session id>", then idles (bounded).
from __future__ import annotations

import asyncio
import sys

from kafkalite.cluster import zkdata
from kafkalite.cluster.zk import ZkClient


async def main(connect: str, session_timeout_ms: int, path: str) -> None:
    client = ZkClient(connect, session_timeout_ms)
    await client.start()
    await client.checked_ephemeral_create(path, zkdata.BrokerRegistration(
        7, (zkdata.Endpoint("PLAINTEXT", "127.0.0.1", 19092),), {"PLAINTEXT": "PLAINTEXT"},
        0).encode())
    print("ready", client.session_id, flush=True)
    await asyncio.sleep(120)
    await client.close()


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], int(sys.argv[2]), sys.argv[3]))
