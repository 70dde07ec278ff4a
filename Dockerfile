# kafkalite broker image.
#
#   docker build -t kafkalite .
#   docker run -p 9092:9092 -v kafkalite-data:/var/lib/kafkalite \
#       -e KAFKALITE_ADVERTISED_LISTENERS=PLAINTEXT://localhost:9092 kafkalite
#
# Configuration: any broker property as KAFKALITE_<NAME_IN_CAPITALS_WITH_UNDERSCORES>
# (KAFKALITE_LOG_SEGMENT_BYTES=... -> log.segment.bytes), or `serve --set key=value`
# appended to the run command. Clients outside the container need
# KAFKALITE_ADVERTISED_LISTENERS set to an address they can reach; unset, the broker
# advertises localhost:9092, which only works with `-p 9092:9092` on the same machine.
# TLS: mount the PEM certificates read-only and name them with the ssl.* properties, e.g.
#   -v $PWD/certs:/certs:ro -p 9093:9093
#   -e KAFKALITE_LISTENERS=PLAINTEXT://0.0.0.0:9092,SSL://0.0.0.0:9093
#   -e KAFKALITE_SSL_KEYSTORE_TYPE=PEM -e KAFKALITE_SSL_KEYSTORE_LOCATION=/certs/keystore.pem
# (per listener: KAFKALITE_LISTENER_NAME_SSL_SSL_CLIENT_AUTH=required); README "TLS".
# SASL and ACLs: -e KAFKALITE_SASL_SCRAM_USERS=admin:admin-secret (SCRAM-SHA-256/512 users made
# at start; KAFKALITE_SASL_PLAIN_USERS for PLAIN), KAFKALITE_SASL_ENABLED_MECHANISMS,
# KAFKALITE_AUTHORIZER_CLASS_NAME=org.apache.kafka.metadata.authorizer.StandardAuthorizer,
# KAFKALITE_SUPER_USERS=User:admin; per-mechanism JAAS configs in a mounted server.properties
# (`serve --config`). The HEALTHCHECK does not log in: keep a PLAINTEXT listener on 127.0.0.1
# first in KAFKALITE_LISTENERS. README "Security".
# Data lives in the volume /var/lib/kafkalite, owned by the non-root user kafkalite
# (uid/gid 10001: chown a host directory to 10001 before bind-mounting it).
#
# BASE_IMAGE must provide `python3` (3.11+) with the venv module. The default is the
# official slim image; scripts/docker-smoke.sh overrides it with a Debian bookworm image
# it builds locally, because no container registry is reachable where it runs.
ARG BASE_IMAGE=python:3.11-slim

# Build stage: a venv with kafkalite and its dependencies (all binary wheels from PyPI,
# so no compiler is needed). pip and setuptools are removed afterwards: the runtime
# never installs anything, and the final stage copies only the venv. The wheels' native
# modules keep their debug info (uvloop's is 13 MB, 2 MB stripped): binutils' strip,
# installed here only, removes it.
FROM ${BASE_IMAGE} AS build
ENV PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PIP_ROOT_USER_ACTION=ignore
RUN apt-get update \
 && apt-get install -y --no-install-recommends binutils \
 && rm -rf /var/lib/apt/lists/*
COPY pyproject.toml README.md /src/
COPY kafkalite /src/kafkalite
# KAFKALITE_EXTRAS=[zookeeper] adds kazoo for cluster members (docker-compose.yml sets it).
ARG KAFKALITE_EXTRAS=
RUN python3 -m venv /opt/kafkalite \
 && /opt/kafkalite/bin/pip install "/src${KAFKALITE_EXTRAS}" \
 && /opt/kafkalite/bin/pip uninstall -y pip setuptools \
 && find /opt/kafkalite -name '*.so' -exec strip --strip-debug {} + \
 && /opt/kafkalite/bin/kafkalite --help >/dev/null

FROM ${BASE_IMAGE}
# A fixed uid so a bind-mounted host directory can be prepared for it.
RUN groupadd --system --gid 10001 kafkalite \
 && useradd --system --uid 10001 --gid kafkalite --no-create-home \
        --home-dir /var/lib/kafkalite --shell /usr/sbin/nologin kafkalite \
 && mkdir -p /var/lib/kafkalite \
 && chown kafkalite:kafkalite /var/lib/kafkalite
COPY --from=build /opt/kafkalite /opt/kafkalite
ENV PATH=/opt/kafkalite/bin:$PATH \
    PYTHONUNBUFFERED=1 \
    KAFKALITE_LISTENERS=PLAINTEXT://0.0.0.0:9092 \
    KAFKALITE_LOG_DIRS=/var/lib/kafkalite
USER kafkalite
WORKDIR /var/lib/kafkalite
# Declared after the chown so a new named volume starts out owned by kafkalite.
VOLUME ["/var/lib/kafkalite"]
EXPOSE 9092
# `kafkalite health` exits 0 once localhost:9092 answers ApiVersions and Metadata. If you
# move the listener, move the check too: --health-cmd 'kafkalite health
# --bootstrap-server localhost:PORT'. Docker-format only: OCI images drop HEALTHCHECK.
HEALTHCHECK --interval=15s --timeout=5s --start-period=10s --retries=3 \
    CMD ["kafkalite", "health"]
# The broker is PID 1 and stops cleanly on SIGTERM (docker stop), closing its segments.
ENTRYPOINT ["kafkalite"]
CMD ["serve"]
