#!/usr/bin/env bash
# Installs everything the test suite needs (Python deps in .venv, Debian packages where
# missing) and runs the whole suite. Exit status: pytest's, with "no tests" (5) a failure.
# Progress: each test's name as it starts and its outcome (-v; the Docker and Spark tests take
# minutes each), then the slowest tests. KAFKALITE_TEST_NO_SETUP=1 skips the installation and
# runs with .venv as it is.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
if [ "${KAFKALITE_TEST_NO_SETUP:-0}" != 1 ]; then
  if [ ! -x .venv/bin/python ]; then
    echo "test.sh: creating .venv" >&2
    "$PY" -m venv .venv
  fi
  echo "test.sh: installing the test dependencies into .venv" >&2
  .venv/bin/python -m pip install -q --upgrade pip >/dev/null 2>&1 || true
  bash scripts/setup-java.sh \
    || echo "Java 17 unavailable: the real-Kafka, Java client and Spark tests will skip" >&2
  bash scripts/setup-zookeeper.sh || echo "ZooKeeper unavailable: the cluster tests will skip" >&2
  .venv/bin/python -m pip install -q -e '.[test,spark]'
fi
set +e
.venv/bin/python -m pytest -p no:cacheprovider -v --durations=10 "$@"
rc=$?
set -e
if [ "$rc" -eq 5 ]; then
  echo "pytest collected no tests: failing" >&2
  exit 1
fi
exit "$rc"
