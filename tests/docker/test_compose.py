# Build-test of docker-compose.yml without a container engine: the file parses (PyYAML
# where this interpreter or the system's python3 has it, else a strict reader of the subset
# the file uses, checked against PyYAML whenever both exist), its services agree with the
# Dockerfile (build context and args, the image's volume and health command) and with each
# other (one image, distinct node ids, volumes and host ports), and each broker's
# environment, laid over the image's own KAFKALITE_* defaults, is a valid broker
# configuration whose listeners, advertised addresses and ZooKeeper address fit the compose
# network. tests/docker/test_compose_image.py builds the image and runs the brokers.
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from kafkalite.config import env_overrides, load_config
from kafkalite.security.listeners import parse_listeners

REPO = Path(__file__).resolve().parents[2]
COMPOSE = REPO / "docker-compose.yml"
BROKERS = ("broker1", "broker2", "broker3")
DATA = "/var/lib/kafkalite"
ZK_CLIENT_PORT = 2181  # the official zookeeper image's (ZOO_PORT unset)


# ---------------------------------------------------------------- reading the file

def _scalar(text: str, where: str):
    if text.startswith('"') or text.startswith("["):
        try:
            return json.loads(text)  # double-quoted strings and flow lists of them
        except ValueError:
            raise ValueError(f"{where}: not a JSON-compatible scalar: {text}") from None
    if text.startswith(("'", "{", "&", "*", "!", "|", ">")):
        raise ValueError(f"{where}: outside the strict subset: {text}")
    return int(text) if re.fullmatch(r"-?\d+", text) else text


def strict_load(text: str):
    """Block mappings and sequences, two spaces per level, scalars plain, double-quoted or
    flow lists; full-line comments. Anything else (tabs, anchors, duplicate keys, odd
    indentation) is an error."""
    lines = []
    for n, raw in enumerate(text.splitlines(), 1):
        if "\t" in raw:
            raise ValueError(f"line {n}: tab")
        if not raw.strip() or raw.lstrip().startswith("#"):
            continue
        indent = len(raw) - len(raw.lstrip(" "))
        if indent % 2:
            raise ValueError(f"line {n}: indentation of {indent}")
        lines.append((n, indent, raw.strip()))

    def block(i: int, indent: int):
        if lines[i][2].startswith("- "):
            out: list = []
            while i < len(lines) and lines[i][1] == indent and lines[i][2].startswith("- "):
                out.append(_scalar(lines[i][2][2:].strip(), f"line {lines[i][0]}"))
                i += 1
            return out, i
        out_map: dict = {}
        while i < len(lines) and lines[i][1] == indent:
            n, _, body = lines[i]
            m = re.fullmatch(r"([A-Za-z0-9_.-]+):(?: (.*))?", body)
            if not m:
                raise ValueError(f"line {n}: not `key: value`: {body}")
            key, value = m.group(1), m.group(2)
            if key in out_map:
                raise ValueError(f"line {n}: duplicate key {key}")
            i += 1
            if value is not None:
                out_map[key] = _scalar(value.strip(), f"line {n}")
            elif i < len(lines) and lines[i][1] > indent:
                if lines[i][1] != indent + 2:
                    raise ValueError(f"line {lines[i][0]}: indentation jumps")
                out_map[key], i = block(i, indent + 2)
            else:
                out_map[key] = None
        return out_map, i

    doc, i = block(0, 0)
    if i != len(lines):
        raise ValueError(f"line {lines[i][0]}: indentation")
    return doc


def pyyaml_load(text: str):
    """The document as PyYAML reads it, from this interpreter or a system python3; None
    when neither has PyYAML."""
    try:
        import yaml
        return yaml.safe_load(text)
    except ImportError:
        pass
    for python in {shutil.which("python3"), "/usr/bin/python3"} - {None, sys.executable}:
        if not os.path.exists(python):
            continue
        p = subprocess.run([python, "-c", "import json, sys, yaml; "
                            "print(json.dumps(yaml.safe_load(sys.stdin.read())))"],
                           input=text, capture_output=True, text=True, timeout=60)
        if p.returncode == 0:
            return json.loads(p.stdout)
    return None


@pytest.fixture(scope="module")
def compose() -> dict:
    text = COMPOSE.read_text()
    doc = strict_load(text)
    reference = pyyaml_load(text)
    if reference is not None:
        assert doc == reference  # the strict reader reads what Compose's YAML reads
    return doc


def image_env() -> dict[str, str]:
    """The KAFKALITE_* defaults of the Dockerfile's final stage (its ENV lines)."""
    final = (REPO / "Dockerfile").read_text().rsplit("\nFROM ", 1)[1]
    return dict(re.findall(r"\b(KAFKALITE_[A-Z_]+)=(\S+)", final))


def broker_env(service: dict) -> dict[str, str]:
    return {**image_env(), **service["environment"]}


def published(service: dict) -> dict[int, int]:
    """container port -> host port."""
    out = {}
    for spec in service.get("ports") or []:
        host, container = str(spec).rsplit(":", 1)
        out[int(container)] = int(host.rsplit(":", 1)[-1])
    return out


# ---------------------------------------------------------------- the checks

def test_services_agree_with_the_dockerfile_and_each_other(compose):
    services = compose["services"]
    assert sorted(services) == sorted(("zookeeper", *BROKERS))
    zk = services["zookeeper"]
    assert re.fullmatch(r"zookeeper:3\.\d+", zk["image"]) and zk["healthcheck"]["test"]
    dockerfile = (REPO / "Dockerfile").read_text()
    extras = set(re.findall(r"^\s*(\w+) = \[", (REPO / "pyproject.toml").read_text(), re.M))
    images, volumes, host_ports = set(), [], []
    for name in BROKERS:
        s = services[name]
        assert s["build"]["context"] == "." and (REPO / "Dockerfile").is_file()
        for arg, value in s["build"]["args"].items():
            assert re.search(rf"^ARG {arg}=", dockerfile, re.M), arg
        assert s["build"]["args"]["KAFKALITE_EXTRAS"] == "[zookeeper]" and "zookeeper" in extras
        images.add(s["image"])
        assert s["depends_on"] == {"zookeeper": {"condition": "service_healthy"}}
        assert s["healthcheck"]["test"][:3] == ["CMD", "kafkalite", "health"]
        [volume] = s["volumes"]
        source, target = volume.split(":")
        assert target == DATA and f'VOLUME ["{DATA}"]' in dockerfile
        volumes.append(source)
        host_ports.extend(published(s).values())
    assert len(images) == 1  # one build, three containers
    assert len(set(volumes)) == 3 and set(volumes) <= set(compose["volumes"])
    assert len(set(host_ports)) == len(host_ports)


@pytest.mark.parametrize("name", BROKERS)
def test_each_broker_environment_is_a_valid_broker_config(compose, name):
    s = compose["services"][name]
    env = broker_env(s)
    assert all(isinstance(v, str) for v in s["environment"].values())  # quoted, as Compose wants
    assert len(env_overrides(env)) == len(env)  # every KAFKALITE_* variable is a property
    cfg = load_config(None, (), environ=env)
    listeners = {lst.name: lst for lst in parse_listeners(cfg)}
    assert cfg.node_id == BROKERS.index(name) + 1
    assert cfg["log.dirs"] == DATA
    zk_host, _, rest = cfg["zookeeper.connect"].partition(":")
    assert zk_host == "zookeeper" and rest.split("/", 1)[0] == str(ZK_CLIENT_PORT)
    assert rest.split("/", 1)[1]  # a chroot, as a shared ZooKeeper wants
    internal, external = listeners["PLAINTEXT"], listeners["EXTERNAL"]
    # others reach it by service name on the compose network
    assert (internal.advertised_host, internal.advertised_port) == (name, internal.port)
    # the host reaches it on the published port, which is the EXTERNAL listener's
    assert published(s)[external.port] == external.port
    assert (external.advertised_host, external.advertised_port) == ("localhost", external.port)
    assert cfg["kafkalite.metrics.port"] in published(s)
    assert cfg["default.replication.factor"] == cfg["offsets.topic.replication.factor"] == 3


def test_the_brokers_form_one_cluster(compose):
    configs = [load_config(None, (), environ=broker_env(compose["services"][n]))
               for n in BROKERS]
    assert len({c["zookeeper.connect"] for c in configs}) == 1
    assert sorted(c.node_id for c in configs) == [1, 2, 3]


def test_the_strict_reader_refuses_what_it_does_not_know():
    for bad in ("a:\n\tb: 1\n", "a: 1\na: 2\n", "a:\n   b: 1\n", "a: &x 1\n", "a: {b: 1}\n"):
        with pytest.raises(ValueError):
            strict_load(bad)
