#!/usr/bin/env bash
# Build-test of the container image: build the repo's Dockerfile, check the image's contract
# (non-root user, volume, port, KAFKALITE_* defaults, health check), start the broker from the
# image with its own defaults, run its HEALTHCHECK command, produce and consume records
# through it, restart it on the same data volume with its port changed through
# KAFKALITE_LISTENERS and read the records again, stop it with SIGTERM; then start it with a
# SASL_PLAINTEXT listener and a SCRAM user from KAFKALITE_* variables alone, and produce and
# consume as that user with confluent-kafka (a wrong password is refused).
# Exit 0 on success or SKIP, non-zero on failure.
#
# Builder: docker when an engine answers `docker info`; otherwise Debian's buildah, installed
# with apt-get when missing and we are root. With buildah nothing is pulled (no container
# registry is reachable where this runs): the Dockerfile's BASE_IMAGE is replaced by a Debian
# bookworm image made here with `debootstrap --variant=minbase` from the apt mirror this
# machine uses. Containers run with `buildah run --isolation=chroot` (podman run does not
# work in this sandbox) inside a network namespace made here (`ip netns`), so the broker
# keeps the image's 0.0.0.0:9092 without touching the host's ports.
#
# Cache: KAFKALITE_DOCKER_CACHE (default /var/tmp/kafkalite-docker-cache) holds buildah's own
# storage (`buildah --root $CACHE/storage --runroot $CACHE/run images` lists it), the base
# image and the build's layer cache. Delete the directory to start over.
# Knobs: KAFKALITE_SMOKE_BUILDER=docker|buildah forces a builder; KAFKALITE_SMOKE_PYTHON is
# the interpreter with kafka-python for the client side (default .venv/bin/python);
# KAFKALITE_BUILDAH_STORAGE_DRIVER (e.g. vfs) where overlay mounts are not allowed.
set -euo pipefail
cd "$(dirname "$0")/.."
REPO=$PWD

CACHE=${KAFKALITE_DOCKER_CACHE:-/var/tmp/kafkalite-docker-cache}
IMAGE=${KAFKALITE_SMOKE_IMAGE:-localhost/kafkalite:smoke}
PY=${KAFKALITE_SMOKE_PYTHON:-$REPO/.venv/bin/python}
TOOLS=$REPO/tests/docker/image_tools.py  # the Python side: config checks, client, probes
# What the local base needs to stand in for python:3.11-slim: python3 with the venv module
# (and the pip wheel it bootstraps), useradd/groupadd, CA certificates for pip's HTTPS.
BASE_PACKAGES=python3,python3-venv,passwd,ca-certificates
BASE_VERSION=1  # bump when the base recipe in ensure_base changes

tools() { "$PY" "$TOOLS" "$@"; }
say() { printf '[docker-smoke] %s\n' "$*"; }
fail() { printf '[docker-smoke] FAIL: %s\n' "$*" >&2; exit 1; }
skip() { printf 'SKIP: docker-smoke: %s\n' "$*"; exit 0; }

can_apt() { [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; }

apt_install() {
  local opts=(-y -q -o DPkg::Lock::Timeout=300)
  say "installing with apt-get: $*"
  DEBIAN_FRONTEND=noninteractive apt-get install "${opts[@]}" "$@" >/dev/null && return
  apt-get update -q -o DPkg::Lock::Timeout=300 >/dev/null || fail "apt-get update failed"
  DEBIAN_FRONTEND=noninteractive apt-get install "${opts[@]}" "$@" >/dev/null \
    || fail "apt-get install $* failed"
}

pick_builder() {
  if [ -n "${KAFKALITE_SMOKE_BUILDER:-}" ]; then
    echo "$KAFKALITE_SMOKE_BUILDER"
  elif command -v docker >/dev/null && timeout 30 docker info >/dev/null 2>&1; then
    echo docker
  elif command -v buildah >/dev/null || can_apt; then
    echo buildah
  else
    echo none
  fi
}

BUILDER=$(pick_builder)
case "$BUILDER" in
  docker|buildah) ;;
  none) skip "no Docker engine (docker info fails), no buildah, and cannot install buildah (needs root and apt-get)" ;;
  *) fail "KAFKALITE_SMOKE_BUILDER must be docker or buildah, not $BUILDER" ;;
esac
[ -x "$PY" ] || fail "no client interpreter at $PY (run scripts/test.sh once, or set KAFKALITE_SMOKE_PYTHON)"
"$PY" -c 'import kafka' 2>/dev/null || fail "$PY cannot import kafka (kafka-python); install '.[test]'"

if [ "$BUILDER" = buildah ]; then
  need=()
  command -v buildah >/dev/null || need+=(buildah)
  command -v debootstrap >/dev/null || need+=(debootstrap)
  command -v ip >/dev/null || need+=(iproute2)
  command -v pgrep >/dev/null || need+=(procps)
  if [ ${#need[@]} -gt 0 ]; then
    can_apt || skip "buildah path needs ${need[*]}, and cannot install them (needs root and apt-get)"
    apt_install "${need[@]}"
  fi
  BUILDAH=(buildah --root "$CACHE/storage" --runroot "$CACHE/run")
  if [ -n "${KAFKALITE_BUILDAH_STORAGE_DRIVER:-}" ]; then
    BUILDAH+=(--storage-driver "$KAFKALITE_BUILDAH_STORAGE_DRIVER")
  fi
fi

# One run at a time per cache: runs share the base, the layer cache and the image name.
mkdir -p "$CACHE"
exec 9>"$CACHE/lock"
flock -w 900 9 || fail "another docker-smoke run held $CACHE/lock for 15 minutes"

WORK=$(mktemp -d /tmp/kafkalite-docker-smoke.XXXXXX)
DATA=$WORK/data
TOPIC=smoke-$$
NS=
IN_NET=()      # prefix that runs a host command where the broker's ports are
BROKER_PID=    # buildah: the `buildah run` of the broker
BROKER_NAME=   # docker: the broker's container
CONTAINERS=()

cleanup() {
  local rc=$? c
  if [ -n "$BROKER_PID" ] && kill -0 "$BROKER_PID" 2>/dev/null; then
    kill -TERM "$(innermost "$BROKER_PID")" 2>/dev/null || true
    for _ in $(seq 1 50); do kill -0 "$BROKER_PID" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$BROKER_PID" 2>/dev/null || true
    wait "$BROKER_PID" 2>/dev/null || true
  fi
  for c in "${CONTAINERS[@]}"; do
    if [ "$BUILDER" = docker ]; then
      docker rm -f "$c" >/dev/null 2>&1 || true
    else
      "${BUILDAH[@]}" rm "$c" >/dev/null 2>&1 || true
    fi
  done
  [ -z "$NS" ] || ip netns del "$NS" 2>/dev/null || true
  rm -rf "$WORK"
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# ---------------------------------------------------------------- the base and the build

# The Debian mirror apt uses here (first non-comment Debian URI), for debootstrap.
debian_mirror() {
  local m
  m=$(cat /etc/apt/sources.list /etc/apt/sources.list.d/*.list /etc/apt/sources.list.d/*.sources \
        2>/dev/null | grep -v '^[[:space:]]*#' | grep -oE 'https?://[^[:space:]]+/debian/?' \
        | grep -v security | head -n1 || true)
  echo "${KAFKALITE_DEBIAN_MIRROR:-${m:-http://deb.debian.org/debian}}"
}

# The local stand-in for python:3.11-slim, kept in buildah's storage under a name that
# changes with its recipe. The machine's own extra CA certificates go into its trust store
# (Debian's pip reads it), so pip reaches PyPI through whatever TLS proxy this machine sits
# behind; the image is for this test only and is never pushed.
ensure_base() {
  local cas=() key rootfs mirror ctr mnt
  shopt -s nullglob; cas=(/usr/local/share/ca-certificates/*.crt); shopt -u nullglob
  key=$( { echo "$BASE_VERSION $BASE_PACKAGES"; [ ${#cas[@]} -eq 0 ] || cat "${cas[@]}"; } \
         | sha256sum | cut -c1-12)
  BASE=localhost/kafkalite-smoke-base:bookworm-$key
  if "${BUILDAH[@]}" inspect --type image "$BASE" >/dev/null 2>&1; then
    say "base image $BASE (cached)"
    return
  fi
  rootfs=$CACHE/rootfs-$key
  mirror=$(debian_mirror)
  say "creating base image $BASE: debootstrap bookworm from $mirror (a minute or two)"
  rm -rf "$rootfs"
  timeout 900 debootstrap --variant=minbase --include="$BASE_PACKAGES" bookworm "$rootfs" \
      "$mirror" >"$CACHE/debootstrap.log" 2>&1 \
    || { tail -20 "$CACHE/debootstrap.log" >&2; fail "debootstrap failed (log: $CACHE/debootstrap.log)"; }
  if [ ${#cas[@]} -gt 0 ]; then
    cp "${cas[@]}" "$rootfs/usr/local/share/ca-certificates/"
    chroot "$rootfs" update-ca-certificates >/dev/null 2>&1 || fail "update-ca-certificates failed"
  fi
  # What a slim image leaves out: package caches and lists, docs, man pages, locales.
  rm -rf "$rootfs"/var/cache/apt/archives/*.deb "$rootfs"/var/cache/apt/*.bin \
         "$rootfs"/var/lib/apt/lists/* "$rootfs"/usr/share/doc/* "$rootfs"/usr/share/man/* \
         "$rootfs"/usr/share/locale/* "$rootfs"/usr/share/info/*
  ctr=$("${BUILDAH[@]}" from scratch)
  mnt=$("${BUILDAH[@]}" mount "$ctr")
  cp -a "$rootfs/." "$mnt/"
  "${BUILDAH[@]}" umount "$ctr" >/dev/null
  "${BUILDAH[@]}" config --env PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
      --env LANG=C.UTF-8 --cmd python3 "$ctr"
  "${BUILDAH[@]}" commit -q "$ctr" "$BASE" >/dev/null
  "${BUILDAH[@]}" rm "$ctr" >/dev/null
  rm -rf "$rootfs"
  say "base image $BASE created"
}

build_image() {
  local t0=$SECONDS
  if [ "$BUILDER" = docker ]; then
    say "building $IMAGE with docker"
    timeout 900 docker build -t "$IMAGE" "$REPO" >"$WORK/build.log" 2>&1 \
      || { tail -40 "$WORK/build.log" >&2; fail "docker build failed"; }
  else
    ensure_base
    # Each build of changed sources leaves its old layers behind; past a bound, drop them
    # all (the next build re-runs the Dockerfile's RUN steps, the base stays).
    local used
    used=$(du -sm "$CACHE/storage" 2>/dev/null | cut -f1)
    if [ "${used:-0}" -gt 1500 ]; then
      say "layer cache at ${used} MB: pruning unused images"
      "${BUILDAH[@]}" rmi --prune >/dev/null || true
    fi
    say "building $IMAGE with buildah bud (isolation chroot, base $BASE)"
    # Docker format: the OCI format has no HEALTHCHECK. --layers keeps a layer cache.
    timeout 900 "${BUILDAH[@]}" bud --isolation=chroot --pull=never --format docker --layers \
        --build-arg BASE_IMAGE="$BASE" -t "$IMAGE" -f "$REPO/Dockerfile" "$REPO" \
        >"$WORK/build.log" 2>&1 \
      || { tail -40 "$WORK/build.log" >&2; fail "buildah bud failed"; }
  fi
  say "built in $((SECONDS - t0))s"
}

# The image's configuration (Docker's Config section) as JSON.
image_config() {
  if [ "$BUILDER" = docker ]; then
    docker image inspect -f '{{json .Config}}' "$IMAGE"
  else
    "${BUILDAH[@]}" inspect --type image "$IMAGE" \
      | "$PY" -c 'import json, sys; print(json.dumps(json.load(sys.stdin)["Docker"]["config"]))'
  fi
}

# One field of the configuration (see tests/docker/image_tools.py).
config_field() { image_config | tools field "$1"; }

image_size() {
  if [ "$BUILDER" = docker ]; then
    docker image inspect -f '{{.Size}}' "$IMAGE" | awk '{printf "%.0f MB", $1/1e6}'
  else
    "${BUILDAH[@]}" images --format '{{.Size}}' "$IMAGE" | head -n1
  fi
}

# ---------------------------------------------------------------- running the image

# The broker is the innermost process under `buildah run`; buildah answers SIGTERM by
# killing its child outright, so a clean stop needs the signal sent to the broker itself.
innermost() {
  local pid=$1 kid
  for _ in 1 2 3 4 5 6; do
    kid=$(pgrep -P "$pid" | head -n1 || true)
    [ -z "$kid" ] && break
    pid=$kid
  done
  echo "$pid"
}

# A command as the image runs it (its user, env, workdir), with its data volume mounted.
# buildah: a fresh working container each time, so runs never share one.
image_run() {
  if [ "$BUILDER" = docker ]; then
    timeout 60 docker run --rm --network none -v "$DATA:/var/lib/kafkalite" --entrypoint "$1" \
        "$IMAGE" "${@:2}"
    return
  fi
  local ctr
  ctr=$("${BUILDAH[@]}" from --pull=never "$IMAGE")
  CONTAINERS+=("$ctr")
  timeout 60 "${IN_NET[@]}" "${BUILDAH[@]}" run --isolation=chroot \
      -v "$DATA:/var/lib/kafkalite" "$ctr" -- "$@"
}

# start_broker NAME PORT_INSIDE CLIENT_PORT [KEY=VALUE env...]: the image's own
# ENTRYPOINT+CMD in the background; waits until CLIENT_PORT answers ApiVersions.
start_broker() {
  local name=$1 inside=$2 port=$3 log=$WORK/broker-$1.log env=() e i
  shift 3
  for e in "$@"; do env+=(-e "$e"); done
  if [ "$BUILDER" = docker ]; then
    BROKER_NAME=kafkalite-smoke-$$-$name
    CONTAINERS+=("$BROKER_NAME")
    docker run -d --name "$BROKER_NAME" -p "127.0.0.1:$port:$inside" \
        -v "$DATA:/var/lib/kafkalite" "${env[@]}" "$IMAGE" >/dev/null
  else
    local ctr cmd
    ctr=$("${BUILDAH[@]}" from --pull=never "$IMAGE")
    CONTAINERS+=("$ctr")
    mapfile -t cmd < <(config_field Entrypoint+Cmd | grep -v '^$')
    "${IN_NET[@]}" "${BUILDAH[@]}" run --isolation=chroot "${env[@]}" \
        -v "$DATA:/var/lib/kafkalite" "$ctr" -- "${cmd[@]}" >"$log" 2>&1 &
    BROKER_PID=$!
  fi
  for i in $(seq 1 300); do
    if "${IN_NET[@]}" "$PY" "$TOOLS" ready "$port"; then
      say "broker $name is listening (image port $inside, clients at 127.0.0.1:$port)"
      return
    fi
    if [ -n "$BROKER_PID" ] && ! kill -0 "$BROKER_PID" 2>/dev/null; then
      broker_log "$name" >&2; fail "broker $name exited before listening"
    fi
    sleep 0.1
  done
  broker_log "$name" >&2; fail "broker $name not listening within 30s"
}

broker_log() {
  if [ "$BUILDER" = docker ]; then docker logs "kafkalite-smoke-$$-$1" 2>&1 | tail -40
  else tail -40 "$WORK/broker-$1.log"; fi
}

stop_broker() {
  local name=$1 rc=0 inner
  if [ "$BUILDER" = docker ]; then
    docker stop -t 20 "$BROKER_NAME" >/dev/null
    rc=$(docker inspect -f '{{.State.ExitCode}}' "$BROKER_NAME")
  else
    inner=$(innermost "$BROKER_PID")
    [ "$inner" != "$BROKER_PID" ] || fail "cannot find the broker process under buildah ($BROKER_PID)"
    kill -TERM "$inner"
    for _ in $(seq 1 200); do kill -0 "$BROKER_PID" 2>/dev/null || break; sleep 0.1; done
    wait "$BROKER_PID" || rc=$?
    BROKER_PID=
  fi
  [ "$rc" = 0 ] || { broker_log "$name" >&2; fail "broker $name exited with $rc on SIGTERM"; }
  say "broker $name stopped cleanly on SIGTERM"
}

# A command from the image where the broker's ports are: docker exec into the broker's
# container while it runs, else a fresh container.
beside_broker() {
  if [ "$BUILDER" = docker ] \
       && [ "$(docker inspect -f '{{.State.Running}}' "$BROKER_NAME")" = true ]; then
    timeout 60 docker exec "$BROKER_NAME" "$@"
  else
    image_run "$@"
  fi
}

# The image's HEALTHCHECK command, as Docker would run it.
health() {
  local cmd
  mapfile -t cmd < <(config_field Healthcheck)
  beside_broker "${cmd[@]}"
}

client() { "${IN_NET[@]}" timeout 120 "$PY" "$TOOLS" client "$@"; }

# ---------------------------------------------------------------- the test
say "builder: $BUILDER"
build_image
SIZE=$(image_size)
say "image $IMAGE size: $SIZE"

# The image's contract: non-root, volume, port, KAFKALITE_* defaults, health check.
image_config | tools contract || fail "image configuration does not match the contract"

if [ "$BUILDER" = buildah ]; then
  NS=kafkalite-smoke-$$
  ip netns add "$NS" || { NS=; fail "cannot create a network namespace (ip netns add)"; }
  ip netns exec "$NS" ip link set lo up
  IN_NET=(ip netns exec "$NS")
  PORT1=9092 PORT2=9093 PORT3=9094  # the namespace is ours: the image's own port is free
else
  PORT1=$(tools free-port) PORT2=$(tools free-port) PORT3=$(tools free-port)
fi

# A bind-mounted data directory must belong to the image's user, as the Dockerfile says.
mkdir -p "$DATA"
image_run sh -c 'echo "$(id -u):$(id -g)"' >"$WORK/ids"  # not in $(...): it records containers
ids=$(tail -n1 "$WORK/ids")
[ "${ids%%:*}" != 0 ] && [ -n "${ids%%:*}" ] || fail "the image runs as uid ${ids%%:*}"
chown "$ids" "$DATA"
say "image user is uid:gid $ids"

# Run 1: the image's defaults (0.0.0.0:9092); only the advertised address is set.
start_broker 1 9092 "$PORT1" "KAFKALITE_ADVERTISED_LISTENERS=PLAINTEXT://127.0.0.1:$PORT1"
health >"$WORK/health.log" 2>&1 || { cat "$WORK/health.log" >&2; fail "the HEALTHCHECK command failed against a running broker"; }
say "HEALTHCHECK: $(tail -n1 "$WORK/health.log")"
client "127.0.0.1:$PORT1" "$TOPIC" produce || fail "produce/consume through the image failed"
# The operator commands work inside the image (their client library is installed).
beside_broker kafkalite topics list >"$WORK/topics.log" 2>&1 || true
grep -qE "^$TOPIC([[:space:]]|\$)" "$WORK/topics.log" \
  || { cat "$WORK/topics.log" >&2; fail "'kafkalite topics list' in the image does not list $TOPIC"; }
say "kafkalite topics list (in the image) lists $TOPIC"
stop_broker 1
if health >"$WORK/health.log" 2>&1; then fail "the HEALTHCHECK command passed with no broker running"; fi
say "HEALTHCHECK fails with the broker stopped, as it should"
ls "$DATA/$TOPIC-0/"*.log >/dev/null 2>&1 || fail "no segment for $TOPIC in the data volume"

# Run 2: same volume, listener moved to 9093 through KAFKALITE_LISTENERS.
start_broker 2 9093 "$PORT2" "KAFKALITE_LISTENERS=PLAINTEXT://0.0.0.0:9093" \
    "KAFKALITE_ADVERTISED_LISTENERS=PLAINTEXT://127.0.0.1:$PORT2"
client "127.0.0.1:$PORT2" "$TOPIC" consume || fail "records did not survive a restart on the volume"
stop_broker 2

# Run 3: SASL_PLAINTEXT with SCRAM-SHA-512 and a bootstrap user from the environment alone
# (no server.properties); the HEALTHCHECK keeps its PLAINTEXT listener on 127.0.0.1:9092.
start_broker 3 9094 "$PORT3" \
    "KAFKALITE_LISTENERS=PLAINTEXT://127.0.0.1:9092,SASL_PLAINTEXT://0.0.0.0:9094" \
    "KAFKALITE_ADVERTISED_LISTENERS=PLAINTEXT://127.0.0.1:9092,SASL_PLAINTEXT://127.0.0.1:$PORT3" \
    "KAFKALITE_SASL_ENABLED_MECHANISMS=SCRAM-SHA-512" \
    "KAFKALITE_SASL_SCRAM_USERS=alice:alice-secret"
health >"$WORK/health.log" 2>&1 || { cat "$WORK/health.log" >&2; fail "the HEALTHCHECK command failed beside a SASL listener"; }
sasl_client() { "${IN_NET[@]}" timeout 120 "$PY" "$TOOLS" sasl "127.0.0.1:$PORT3" "$TOPIC-sasl" alice "$@"; }
sasl_client alice-secret ok || fail "SCRAM user from KAFKALITE_SASL_SCRAM_USERS could not produce/consume"
sasl_client wrong-secret refused || fail "a wrong SCRAM password was not refused"
stop_broker 3
say "PASS: builder $BUILDER, image $IMAGE, size $SIZE"
