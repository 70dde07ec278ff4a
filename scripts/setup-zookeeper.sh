#!/usr/bin/env bash
# Makes sure a ZooKeeper server can run for the cluster tests (tests/helpers/zookeeper.py):
# the Kafka anchor's ZooKeeper 3.8.4 (../shared/anchors/kafka-3.8.0, or KAFKA_ANCHOR_DIR) when
# it is there; otherwise Debian's `zookeeper` package (the server's jars, not `zookeeperd`,
# whose system service on :2181 the tests do not want), installed with apt-get when missing.
# Does nothing when either is already there. The server needs Java: scripts/setup-java.sh.
# Exit status: 0 when a ZooKeeper is available afterwards, 1 otherwise.
set -euo pipefail
cd "$(dirname "$0")/.."

DEBIAN_JAR=/usr/share/java/zookeeper.jar

have_zookeeper() {
  local anchor
  for anchor in "${KAFKA_ANCHOR_DIR:-}" ../shared/anchors/kafka-3.8.0 \
      /work/shared/anchors/kafka-3.8.0; do
    if [ -n "$anchor" ] && [ -f "$anchor/serve.sh" ] \
        && [ -x "$anchor/bin/zookeeper-server-start.sh" ]; then
      echo "setup-zookeeper: the Kafka anchor's ZooKeeper ($anchor)"
      return 0
    fi
  done
  if [ -f "$DEBIAN_JAR" ]; then
    echo "setup-zookeeper: Debian's ZooKeeper ($DEBIAN_JAR)"
    return 0
  fi
  return 1
}

if have_zookeeper; then
  exit 0
fi

bash "$(dirname "$0")/apt-install.sh" setup-zookeeper zookeeper

if have_zookeeper; then
  exit 0
fi
echo "setup-zookeeper: $DEBIAN_JAR still missing after installing" >&2
exit 1
