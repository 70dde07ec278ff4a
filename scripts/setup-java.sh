#!/usr/bin/env bash
# Makes sure a Java runtime that Spark 4 accepts (17 or newer) is on PATH, for the optional
# PySpark pipeline (spark_pipeline/, tests/spark/). Installs Debian's openjdk-17-jre-headless
# with apt-get when `java` is missing; does nothing when a suitable Java is already there.
# Exit status: 0 when Java 17+ is available afterwards, 1 otherwise.
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

if command -v java >/dev/null 2>&1 && [ "$(java_major java)" -ge 17 ]; then
  echo "setup-java: $(java -version 2>&1 | head -n1)"
  exit 0
fi

if ! command -v apt-get >/dev/null 2>&1; then
  echo "setup-java: Java 17+ is needed and apt-get is not available: install a JDK/JRE 17" >&2
  exit 1
fi
SUDO=""
if [ "$(id -u)" -ne 0 ]; then
  SUDO="sudo"
fi
echo "setup-java: installing openjdk-17-jre-headless"
$SUDO apt-get update -q
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q --no-install-recommends \
  openjdk-17-jre-headless

if command -v java >/dev/null 2>&1 && [ "$(java_major java)" -ge 17 ]; then
  echo "setup-java: $(java -version 2>&1 | head -n1)"
  exit 0
fi
echo "setup-java: java 17+ still not on PATH after installing" >&2
exit 1
