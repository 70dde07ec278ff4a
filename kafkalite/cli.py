# The `kafkalite` command. `serve` runs the broker; the operator commands (topics, groups,
# produce, consume, health, dump-log) live in kafkalite/tools/, one module per group.
# Argument errors are one line on stderr and exit 2, as argparse's exit code says.
# Each command imports what it needs when it runs (client libraries, kio, the broker), so
# that `--version`, `--help` and the light commands start in tens of milliseconds.
from __future__ import annotations

import argparse
import sys

from . import __version__


def _serve(args: argparse.Namespace) -> int:
    from .config import ConfigError, load_config
    try:
        cfg = load_config(args.config, args.set or ())
    except (ConfigError, OSError) as e:
        print(f"kafkalite: invalid configuration: {e}", file=sys.stderr)
        return 2
    from .cluster.membership import ClusterError
    from .security.tls import TlsConfigError
    from .server import run
    try:
        run(cfg)
    except (TlsConfigError, ClusterError) as e:
        print(f"kafkalite: cannot start: {e}", file=sys.stderr)
        return 1
    except ConfigError as e:
        print(f"kafkalite: invalid configuration: {e}", file=sys.stderr)
        return 2
    except OSError as e:
        print(f"kafkalite: cannot start: {e}", file=sys.stderr)
        return 1
    return 0


class _Parser(argparse.ArgumentParser):
    """argparse with its error as one line (usage stays available through --help)."""

    def error(self, message: str):
        self.exit(2, f"{self.prog}: error: {message} (see '{self.prog} --help')\n")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="kafkalite",
                     description="A lightweight Kafka-compatible broker.")
    parser.add_argument("--version", action="version", version=f"kafkalite {__version__}")
    parser.add_argument("--log-level", default=None,
                        choices=["DEBUG", "INFO", "WARNING", "ERROR"],
                        help="log level (default INFO for serve; other commands log nothing)")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    serve = sub.add_parser("serve", help="run the broker")
    serve.add_argument("--config", help="a server.properties file")
    serve.add_argument("--set", action="append", metavar="KEY=VALUE",
                       help="override a property (repeatable)")
    serve.add_argument("--log-format", choices=["text", "json"], default="text",
                       help="text lines (default) or one JSON object per line")
    serve.set_defaults(func=_serve)
    from . import tools
    tools.register(sub)
    from .tools import cluster_status
    cluster_status.register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    # kio registers hypothesis strategies at import time whenever hypothesis is installed
    # (test environments): ~150 ms of a broker's start, or of a command using kafkalite.wire,
    # for nothing either uses. kio falls back cleanly when the import fails, so hide it.
    sys.modules.setdefault("hypothesis", None)  # type: ignore[arg-type]
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command == "serve" or args.log_level:
        from .logformat import configure
        configure(args.log_level or "INFO", getattr(args, "log_format", "text"))
    if args.command == "serve":
        return args.func(args)
    if not args.log_level:
        # Client libraries log their retries as warnings; a command reports one line.
        import logging
        logging.getLogger().addHandler(logging.NullHandler())
    from .tools.common import run
    return run(args.func, args)


if __name__ == "__main__":
    sys.exit(main())
