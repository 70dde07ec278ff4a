# The `kafkalite` command. `serve` runs the broker; other subcommands live in their own
# modules and are added here as they land.
from __future__ import annotations

import argparse
import logging
import sys

from .config import ConfigError, load_config


def _serve(args: argparse.Namespace) -> int:
    try:
        cfg = load_config(args.config, args.set or ())
    except (ConfigError, OSError) as e:
        print(f"kafkalite: invalid configuration: {e}", file=sys.stderr)
        return 2
    from .server import run
    try:
        run(cfg)
    except ConfigError as e:
        print(f"kafkalite: invalid configuration: {e}", file=sys.stderr)
        return 2
    except OSError as e:
        print(f"kafkalite: cannot start: {e}", file=sys.stderr)
        return 1
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="kafkalite",
                                     description="A lightweight Kafka-compatible broker.")
    parser.add_argument("--log-level", default="INFO",
                        choices=["DEBUG", "INFO", "WARNING", "ERROR"])
    sub = parser.add_subparsers(dest="command", required=True)
    serve = sub.add_parser("serve", help="run the broker")
    serve.add_argument("--config", help="a server.properties file")
    serve.add_argument("--set", action="append", metavar="KEY=VALUE",
                       help="override a property (repeatable)")
    serve.set_defaults(func=_serve)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    logging.basicConfig(level=getattr(logging, args.log_level),
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
