# `kafkalite acls create|list|delete`: kafka-acls.sh's --add/--list/--remove over the public
# protocol (CreateAcls, DescribeAcls, DeleteAcls v1, which Kafka 2.0+ serves), so it works
# against any Kafka broker with an authorizer. Options follow kafka-acls.sh: one resource
# (--topic, --group, --cluster, --transactional-id, --delegation-token, --user-principal),
# --resource-pattern-type, --allow-principal/--deny-principal with --allow-host/--deny-host,
# --operation (repeatable), LITERAL patterns unless told. For list and delete an option
# left out matches anything.
# --command-config (common.py) logs in to a SASL or TLS listener, as kafka-acls.sh's does.
from __future__ import annotations

import argparse

from ..security.acl_codes import Operation, PatternType, Permission, ResourceType
from .common import CliError, add_command, check_code, describe_exception, open_admin, send
from .output import emit_json, table

_RESOURCES = (("topic", ResourceType.TOPIC), ("group", ResourceType.GROUP),
              ("transactional_id", ResourceType.TRANSACTIONAL_ID),
              ("delegation_token", ResourceType.DELEGATION_TOKEN),
              ("user_principal", ResourceType.USER))


def _op(name: str) -> Operation:
    try:
        return Operation[name.strip().upper().replace("-", "_")]
    except KeyError:
        raise argparse.ArgumentTypeError(f"unknown operation {name}") from None


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("acls", help="create, list, delete ACL bindings")
    asub = p.add_subparsers(dest="acls_command", required=True, metavar="ACTION")
    for name, func, help in (("create", _create, "add ACL bindings (kafka-acls --add)"),
                             ("list", _list, "list ACL bindings (kafka-acls --list)"),
                             ("delete", _delete, "remove ACL bindings (kafka-acls --remove)")):
        s = add_command(asub, name, func, help)
        for opt, _ in _RESOURCES:
            s.add_argument(f"--{opt.replace('_', '-')}", default=None)
        s.add_argument("--cluster", action="store_true", help="the kafka-cluster resource")
        s.add_argument("--resource-pattern-type", default=None,
                       choices=["literal", "prefixed"] + (["any", "match"]
                                                          if name != "create" else []))
        if name == "list":
            s.add_argument("--principal", default=None, help="only this principal's bindings")
            continue
        s.add_argument("--allow-principal", action="append", default=[])
        s.add_argument("--deny-principal", action="append", default=[])
        s.add_argument("--allow-host", action="append", default=[])
        s.add_argument("--deny-host", action="append", default=[])
        s.add_argument("--operation", type=_op, action="append", default=[],
                       help="READ, WRITE, ALL, ... (repeatable)")


def _resource(args: argparse.Namespace, any_ok: bool) -> tuple[ResourceType, str | None]:
    chosen = [(rt, getattr(args, opt)) for opt, rt in _RESOURCES
              if getattr(args, opt) is not None]
    if args.cluster:
        chosen.append((ResourceType.CLUSTER, "kafka-cluster"))
    if len(chosen) > 1:
        raise CliError("name one resource at most")
    if not chosen:
        if not any_ok:
            raise CliError("name a resource: --topic, --group, --cluster, ...")
        return ResourceType.ANY, None
    return chosen[0]


def _pattern(args: argparse.Namespace, rt: ResourceType) -> PatternType:
    """LITERAL by default as kafka-acls.sh, ANY when no resource is named."""
    if args.resource_pattern_type:
        return PatternType[args.resource_pattern_type.upper()]
    return PatternType.ANY if rt == ResourceType.ANY else PatternType.LITERAL


def _entries(args: argparse.Namespace, create: bool) -> list[tuple]:
    """(principal, host, operation, permission) per combination, as kafka-acls.sh builds."""
    ops = args.operation or ([] if create else [Operation.ANY])
    if create and not ops:
        raise CliError("name at least one --operation")
    out = []
    for perm, principals, hosts in ((Permission.ALLOW, args.allow_principal, args.allow_host),
                                    (Permission.DENY, args.deny_principal, args.deny_host)):
        for p in principals:
            for h in hosts or (["*"] if create else [None]):
                out += [(p, h, op, perm) for op in ops]
    if not out and not create:
        out = [(None, None, op, Permission.ANY) for op in ops]
    if not out:
        raise CliError("name at least one --allow-principal or --deny-principal")
    return out


def _call(args: argparse.Namespace, request):
    admin = open_admin(args)
    try:
        return send(admin, request)
    except Exception as e:
        raise describe_exception(e) from None
    finally:
        admin.close()


def _row(rt, name, pt, principal, host, op, perm) -> dict:
    return {"resource_type": ResourceType(rt).name, "name": name,
            "pattern_type": PatternType(pt).name, "principal": principal, "host": host,
            "operation": Operation(op).name, "permission": Permission(perm).name}


def _show(args: argparse.Namespace, rows: list[dict]) -> None:
    if args.json:
        emit_json(rows)
        return
    table(["RESOURCE-TYPE", "NAME", "PATTERN", "PRINCIPAL", "HOST", "OPERATION", "PERMISSION"],
          [tuple(r.values()) for r in rows])


def _create(args: argparse.Namespace) -> int:
    from kafka.protocol.admin import CreateAclsRequest
    rt, name = _resource(args, any_ok=False)
    pt = _pattern(args, rt)
    C = CreateAclsRequest[1]
    entries = _entries(args, create=True)
    resp = _call(args, C(creations=[C.AclCreation(
        resource_type=rt, resource_name=name, resource_pattern_type=pt, principal=p, host=h,
        operation=op, permission_type=perm) for p, h, op, perm in entries]))
    for r in resp.results:
        check_code(r.error_code, r.error_message)
    _show(args, [_row(rt, name, pt, *e) for e in entries])
    return 0


def _list(args: argparse.Namespace) -> int:
    from kafka.protocol.admin import DescribeAclsRequest
    rt, name = _resource(args, any_ok=True)
    resp = _call(args, DescribeAclsRequest[1](
        resource_type_filter=rt, resource_name_filter=name,
        pattern_type_filter=_pattern(args, rt), principal_filter=args.principal,
        host_filter=None, operation=Operation.ANY, permission_type=Permission.ANY))
    check_code(resp.error_code, resp.error_message)
    _show(args, sorted((_row(x.resource_type, x.resource_name, x.pattern_type, a.principal,
                             a.host, a.operation, a.permission_type)
                        for x in resp.resources for a in x.acls),
                       key=lambda r: tuple(r.values())))
    return 0


def _delete(args: argparse.Namespace) -> int:
    from kafka.protocol.admin import DeleteAclsRequest
    rt, name = _resource(args, any_ok=True)
    D = DeleteAclsRequest[1]
    resp = _call(args, D(filters=[D.DeleteAclsFilter(
        resource_type_filter=rt, resource_name_filter=name,
        pattern_type_filter=_pattern(args, rt), principal_filter=p,
        host_filter=h, operation=op, permission_type=perm)
        for p, h, op, perm in _entries(args, create=False)]))
    rows = []
    for f in resp.filter_results:
        check_code(f.error_code, f.error_message)
        rows += [_row(m.resource_type, m.resource_name, m.pattern_type, m.principal, m.host,
                      m.operation, m.permission_type) for m in f.matching_acls]
    _show(args, sorted({tuple(r.items()): r for r in rows}.values(),
                       key=lambda r: tuple(r.values())))
    return 0
