#!/usr/bin/env bash
# Makes sure a Java 17+ JDK is on PATH: the real Kafka the compatibility suite compares with
# (tests/helpers/real_kafka.py), the PySpark pipeline (spark_pipeline/, tests/spark/) and the
# Java client check, which compiles with javac (tests/clients_extra/test_java_client.py).
# Installs Debian's openjdk-17-jdk-headless with apt-get when `java` or `javac` is missing;
# does nothing when a suitable JDK is already there.
# Exit status: 0 when java and javac 17+ are available afterwards, 1 otherwise.
set -euo pipefail

java_major() {
  # `java -version` prints e.g. `openjdk version "17.0.15" 2025-04-15` (or "1.8.0_392") on stderr
  local v
  v=$("$1" -version 2>&1 | sed -n 's/.*version "\([^"]*\)".*/\1/p' | head -n1)
  case "$v" in
    1.*) echo "$v" | cut -d. -f2 ;;
    "") echo 0 ;;
    *) echo "$v" | cut -d. -f1 ;;
  esac
}

have_jdk() {
  command -v java >/dev/null 2>&1 && command -v javac >/dev/null 2>&1 \
    && [ "$(java_major java)" -ge 17 ]
}

if have_jdk; then
  echo "setup-java: $(java -version 2>&1 | head -n1)"
  exit 0
fi

bash "$(dirname "$0")/apt-install.sh" setup-java openjdk-17-jdk-headless

if have_jdk; then
  echo "setup-java: $(java -version 2>&1 | head -n1)"
  exit 0
fi
echo "setup-java: java and javac 17+ still not on PATH after installing" >&2
exit 1
