# What every operator command shares: the connection options, a kafka-python admin client
# that fails fast when no broker answers, and the one-line error reporting.
#
# The commands must work against any Kafka-protocol broker, so admin, produce and consume
# go through kafka-python (pure Python). Its public admin methods fold a broker's
# error_message into long exception texts or drop it (DescribeConfigs), so `send` hands
# raw kafka.protocol requests to the admin client's connection manager where a command
# needs the broker's own words. Exit codes: 1 for Kafka errors and unreachable brokers,
# 2 for bad arguments (argparse's convention), 130 on Ctrl-C.
from __future__ import annotations

import argparse
import os
import socket
import sys
import time
from typing import Any, Callable

def _default_bootstrap() -> str:
    """localhost:9092, or the first of KAFKALITE_LISTENERS (the image's own setting), so
    that `kafkalite health` in a container checks the port the broker really uses."""
    import os
    spec = os.environ.get("KAFKALITE_LISTENERS")
    if spec:
        try:
            from ..config import parse_listener
            host, port = parse_listener(spec)
            if host in ("", "0.0.0.0", "::"):
                host = "127.0.0.1"
            return f"{host}:{port}"
        except ValueError:
            pass
    return "localhost:9092"


DEFAULT_BOOTSTRAP = _default_bootstrap()
CLIENT_ID = "kafkalite-cli"


class CliError(Exception):
    """A failure reported as one line: `error: NAME: message` (NAME is Kafka's error name)."""

    def __init__(self, message: str, name: str | None = None, exit_code: int = 1):
        super().__init__(message)
        self.name = name
        self.message = message
        self.exit_code = exit_code

    def line(self) -> str:
        text = " ".join(self.message.split())  # one line, whatever the broker sent
        return f"error: {self.name}: {text}" if self.name else f"error: {text}"


def error_name(code: int) -> str:
    """Kafka's name for an error code (Errors.java), e.g. MESSAGE_TOO_LARGE.

    kio's ErrorCode carries Kafka's names; kafka-python renames a few (its
    MESSAGE_SIZE_TOO_LARGE, NOT_LEADER_FOR_PARTITION), so it is only the fallback.
    """
    from kio.schema.errors import ErrorCode
    try:
        return ErrorCode(code).name.upper()
    except ValueError:
        import kafka.errors as Errors
        return getattr(Errors.for_code(code), "message", None) or f"ERROR_{code}"


def kafka_error(code: int, message: str | None = None) -> CliError:
    """CliError for a Kafka error code, with the broker's message or Kafka's description."""
    import kafka.errors as Errors
    name = error_name(code)
    return CliError(message or getattr(Errors.for_code(code), "description", None) or name,
                    name)


def check_code(code: int, message: str | None = None) -> None:
    if code:
        raise kafka_error(code, message)


def add_common(parser: argparse.ArgumentParser, json_help: str = "print JSON for scripts",
               timeout_default: int = 10000, timeout_help: str | None = None,
               command_config: bool = True) -> None:
    """--bootstrap-server, --timeout, --json and (for commands that connect with kafka-python)
    --command-config; a custom timeout_help lets --timeout be 0."""
    parser.add_argument("--bootstrap-server", default=DEFAULT_BOOTSTRAP, metavar="HOST:PORT",
                        help=f"broker(s) to connect to, comma-separated "
                             f"(default {DEFAULT_BOOTSTRAP})")
    if command_config:
        parser.add_argument("--command-config", metavar="FILE",
                            help="Kafka client properties (security.protocol, sasl.mechanism, "
                                 "sasl.jaas.config, ssl.truststore.location, ...), as "
                                 "kafka-topics.sh --command-config takes them")
    parser.add_argument("--timeout", type=non_negative_int if timeout_help else positive_int,
                        default=timeout_default, metavar="MS",
                        help=(timeout_help or "connect and request timeout in milliseconds")
                        + f" (default {timeout_default})")
    parser.add_argument("--json", action="store_true", help=json_help)


def add_command(sub: argparse._SubParsersAction, name: str, func: Callable, help: str,
                **common: Any) -> argparse.ArgumentParser:
    """A subcommand with the common options, run as func(args); args.parser is its parser."""
    parser = sub.add_parser(name, help=help)
    add_common(parser, **common)
    parser.set_defaults(func=func, parser=parser)
    return parser


def _int_at_least(low: int) -> Callable[[str], int]:
    def parse(text: str) -> int:
        try:
            n = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
        if n < low:
            raise argparse.ArgumentTypeError(f"expected a number of at least {low}, got {n}")
        return n
    return parse


positive_int = _int_at_least(1)
non_negative_int = _int_at_least(0)


def report_deletions(args: argparse.Namespace, deleted: list[str], what: str,
                     failure: CliError | None) -> int:
    """Print what was deleted ("Deleted topic x.") or {"deleted": [...]}, then fail if one did."""
    from .output import emit_json
    if args.json:
        emit_json({"deleted": deleted})
    else:
        for name in deleted:
            print(f"Deleted {what} {name}.")
    if failure is not None:
        raise failure
    return 0


def key_value(text: str) -> tuple[str, str]:
    """KEY=VALUE, as --config and --header take it."""
    key, sep, value = text.partition("=")
    if not sep or not key:
        raise argparse.ArgumentTypeError(f"expected KEY=VALUE, got {text!r}")
    return key, value


def parse_bootstrap(servers: str) -> list[tuple[str, int]]:
    out = []
    for item in servers.split(","):
        item = item.strip()
        if not item:
            continue
        if item.startswith("["):  # [ipv6]:port
            host, _, rest = item[1:].partition("]")
            port_text = rest.lstrip(":") or "9092"
        else:
            host, _, port_text = item.rpartition(":") if ":" in item else (item, "", "9092")
        try:
            port = int(port_text)
        except ValueError:
            raise CliError(f"invalid --bootstrap-server {item!r}: port must be a number",
                           exit_code=2) from None
        out.append((host or "localhost", port))
    if not out:
        raise CliError("--bootstrap-server is empty", exit_code=2)
    return out


def no_answer(servers: str, timeout_ms: int) -> CliError:
    """The one wording of every command for a broker that accepted but did not answer."""
    return CliError(f"no Kafka broker answered at {servers} within {timeout_ms} ms")


def cannot_connect(failures: list[tuple[str, int, OSError]]) -> CliError:
    """The one wording of every command for servers that refused or ignored a connection."""
    return CliError("cannot connect to " + "; ".join(f"{host}:{port}: {e.strerror or e}"
                                                     for host, port, e in failures))


def check_reachable(servers: str, timeout_s: float) -> None:
    """Fail at once when no bootstrap server accepts a TCP connection.

    kafka-python would otherwise retry until its bootstrap timeout, and report only a
    timeout; a refused connection is known in milliseconds and deserves its own words.
    """
    failures = []
    for host, port in parse_bootstrap(servers):
        try:
            with socket.create_connection((host, port), timeout=min(timeout_s, 5.0)):
                return
        except OSError as e:
            failures.append((host, port, e))
    raise cannot_connect(failures)


def client_settings(args: argparse.Namespace) -> dict[str, Any]:
    """Connection settings shared by the admin client, the producer and the consumer."""
    return {
        "bootstrap_servers": args.bootstrap_server,
        "client_id": CLIENT_ID,
        "request_timeout_ms": args.timeout,
        "bootstrap_timeout_ms": args.timeout,
        "reconnect_backoff_max_ms": 1000,
        **security_settings(getattr(args, "command_config", None)),
    }


def read_client_properties(path: str) -> dict[str, str]:
    """A Java .properties file as Kafka's tools read one (Utils.loadProps: Properties.load,
    ISO-8859-1): comments, `=` or `:`, escapes, and lines continued by a trailing backslash
    (a sasl.jaas.config is often split so)."""
    from ..java_properties import PropertiesError, parse
    try:
        with open(path, "rb") as f:
            text = f.read().decode("latin-1")
    except OSError as e:
        raise CliError(f"--command-config {path}: {e.strerror or e}", exit_code=2) from None
    try:
        return {k: v.strip() for k, v in parse(text).items()}
    except PropertiesError as e:
        raise CliError(f"--command-config {path}: {e}", exit_code=2) from None


def _pem_only(props: dict[str, str], kind: str) -> None:
    store_type = props.get(f"ssl.{kind}.type", "PEM").upper()
    if store_type != "PEM":
        raise CliError(f"ssl.{kind}.type={store_type}: only PEM files can be read (convert "
                       "with keytool and openssl, see the README)", exit_code=2)


def security_settings(path: str | None) -> dict[str, Any]:
    """kafka-python settings for a Kafka client properties file (--command-config): the
    security protocol, SASL PLAIN/SCRAM with the JAAS config's username and password,
    OAUTHBEARER with the unsecured JWT of its unsecuredLogin* options, and PEM trust and key
    stores. librdkafka's names (sasl.username, ssl.ca.location, ...) also do."""
    if not path:
        return {}
    from ..security.sasl import parse_jaas
    props = read_client_properties(path)
    out: dict[str, Any] = {}
    protocol = props.get("security.protocol", "PLAINTEXT").upper()
    out["security_protocol"] = protocol
    if protocol.startswith("SASL_"):
        out["sasl_mechanism"] = props.get("sasl.mechanism", "GSSAPI").upper()
        jaas = parse_jaas(props.get("sasl.jaas.config"))
        user = jaas.get("username", props.get("sasl.username"))
        if out["sasl_mechanism"] == "OAUTHBEARER":
            out["sasl_oauth_token_provider"] = _unsecured_token_provider(jaas, path)
        elif user is not None:
            out["sasl_plain_username"] = user
            out["sasl_plain_password"] = jaas.get("password", props.get("sasl.password", ""))
    if "ssl.truststore.location" in props:
        _pem_only(props, "truststore")
        out["ssl_cafile"] = props["ssl.truststore.location"]
    elif "ssl.ca.location" in props:
        out["ssl_cafile"] = props["ssl.ca.location"]
    if "ssl.keystore.location" in props:
        _pem_only(props, "keystore")
        # Kafka's PEM keystore is the key and its chain in one file: ssl's load_cert_chain
        # reads both from it.
        out["ssl_certfile"] = out["ssl_keyfile"] = props["ssl.keystore.location"]
    elif "ssl.certificate.location" in props:
        out["ssl_certfile"] = props["ssl.certificate.location"]
        out["ssl_keyfile"] = props.get("ssl.key.location")
    password = props.get("ssl.key.password")
    if password:
        out["ssl_password"] = password
    if props.get("ssl.endpoint.identification.algorithm", "https").strip() == "":
        out["ssl_check_hostname"] = False
    return out


def _unsecured_token_provider(jaas: dict[str, str], path: str) -> Any:
    """kafka-python's token provider for OAUTHBEARER with Kafka's default (unsecured) login
    handler: a fresh token per login, so a long `consume` re-authenticates with an unexpired
    one. A JAAS config that names no principal is told before connecting, as Kafka's tools
    refuse it at login."""
    from kafka.net.sasl.oauth import AbstractTokenProvider
    from ..security.sasl_oauthbearer import unsecured_login_extensions, unsecured_login_token
    try:
        unsecured_login_token(jaas, 0)
    except ValueError as e:
        raise CliError(f"--command-config {path}: sasl.jaas.config: {e}", exit_code=2) from None

    class UnsecuredLogin(AbstractTokenProvider):
        def token(self) -> str:
            return unsecured_login_token(jaas, int(time.time() * 1000))

        def extensions(self) -> dict[str, str]:
            return unsecured_login_extensions(jaas)

    return UnsecuredLogin()


def open_admin(args: argparse.Namespace):
    """A connected KafkaAdminClient, or CliError within --timeout."""
    settings = client_settings(args)  # a bad --command-config is told before connecting
    check_reachable(args.bootstrap_server, args.timeout / 1000)
    from kafka.admin import KafkaAdminClient
    import kafka.errors as Errors
    try:
        return KafkaAdminClient(**settings)
    except Errors.KafkaTimeoutError:
        raise no_answer(args.bootstrap_server, args.timeout) from None


def send(admin, request, node_id: int | None = None):
    """Send one kafka.protocol request through the admin client; returns the response."""
    async def _send():
        return await admin._manager.send(request, node_id=node_id)
    return admin._manager.run(_send)


def coordinator_for(admin, group: str) -> int:
    """Node id of the group's coordinator (FindCoordinator), or CliError with Kafka's error."""
    import kafka.errors as Errors
    try:
        return admin._manager.run(admin._find_coordinator_id, group)
    except Errors.BrokerResponseError as e:
        raise kafka_error(e.errno, None) from None


def describe_exception(exc: BaseException) -> CliError:
    """One-line CliError for an exception from kafka-python or the OS."""
    import kafka.errors as Errors
    if isinstance(exc, CliError):
        return exc
    if isinstance(exc, Errors.BrokerResponseError) and exc.errno is not None:
        detail = str(exc.args[0]) if exc.args else ""
        # kafka-python's own texts quote whole requests; keep only short, human ones.
        if not detail or len(detail) > 200 or "Request '" in detail:
            detail = exc.description or ""
        return kafka_error(exc.errno, detail or None)
    if isinstance(exc, Errors.KafkaTimeoutError):
        return CliError(f"timed out: {exc.args[0] if exc.args else 'no answer from broker'}")
    if isinstance(exc, Errors.KafkaError):
        return CliError(f"{type(exc).__name__}: {exc.args[0] if exc.args else exc}")
    if isinstance(exc, OSError):
        return CliError(str(exc))
    return CliError(f"{type(exc).__name__}: {exc}")


def run(func: Callable[[argparse.Namespace], int | None], args: argparse.Namespace) -> int:
    """Run a command; any failure becomes one line on stderr and a non-zero exit code."""
    try:
        return func(args) or 0
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        # `kafkalite consume ... | head`: the reader left; that is not an error. Point
        # stdout at /dev/null so the interpreter's final flush does not complain.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 0
    except Exception as e:  # noqa: BLE001 - the command line reports, it does not trace
        err = describe_exception(e)
        sys.stdout.flush()
        print(err.line(), file=sys.stderr)
        return err.exit_code

