#!/usr/bin/env bash
# apt-install.sh WHO PACKAGE...: installs Debian packages for one of the setup scripts
# (setup-java.sh, setup-zookeeper.sh), with sudo when not root. WHO prefixes the messages.
# Exit status: apt-get's, or 1 when apt-get is not available.
set -euo pipefail
who=$1
shift
if ! command -v apt-get >/dev/null 2>&1; then
  echo "$who: apt-get is not available: install $* yourself" >&2
  exit 1
fi
SUDO=""
if [ "$(id -u)" -ne 0 ]; then
  SUDO="sudo"
fi
echo "$who: installing $*"
$SUDO apt-get update -q
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q --no-install-recommends "$@"
