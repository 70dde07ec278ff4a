#!/usr/bin/env bash
# Installs everything the test suite needs (Python deps in .venv, Debian packages where
# missing) and runs the whole suite. Exit status: pytest's, with "no tests" (5) a failure.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  "$PY" -m venv .venv
fi
.venv/bin/python -m pip install -q --upgrade pip >/dev/null 2>&1 || true
bash scripts/setup-java.sh || echo "Java 17 unavailable: the Spark tests will be skipped" >&2
.venv/bin/python -m pip install -q -e '.[test,spark]'
set +e
.venv/bin/python -m pytest -p no:cacheprovider "$@"
rc=$?
set -e
if [ "$rc" -eq 5 ]; then
  echo "pytest collected no tests: failing" >&2
  exit 1
fi
exit "$rc"
