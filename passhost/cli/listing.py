"""``passhost list`` and ``passhost info``: what is installed, and one entry in detail."""
from __future__ import annotations

import argparse
import inspect
import json
from typing import Any

from .common import ExitCode, dash, print_table, printable, registry, stdout

__all__ = ["add_parsers", "cmd_list", "cmd_info"]


def add_parsers(sub: Any) -> None:
    """Add the ``list`` and ``info`` sub-commands."""
    p = sub.add_parser("list", help="list installed passes, instruments, formats, executors and broken plugins")
    p.add_argument("--json", action="store_true", help="print JSON instead of a table")
    p.add_argument("--configs", action="store_true",
                   help="list the PassContext config keys (the host's and the plugins') instead")
    p.set_defaults(func=cmd_list)

    p = sub.add_parser("info", help="describe one pass or instrument")
    p.add_argument("name", metavar="NAME")
    p.set_defaults(func=cmd_info)


def cmd_list(args: argparse.Namespace) -> int:
    """Print every installed pass and instrument (a table, or JSON with ``--json``)."""
    reg = registry(args, announce=False)
    passes = reg.pass_records()
    instruments = reg.instrument_records()
    formats = reg.format_records()
    executors = reg.executor_records()
    if args.configs:
        return _list_configs(reg, args.json)
    if args.json:
        doc = {
            "passes": [r.as_dict() for r in passes],
            "instruments": [r.as_dict() for r in instruments],
            "formats": [r.as_dict() for r in formats],
            "converters": [r.as_dict() for r in reg.converter_records()],
            "executors": [r.as_dict() for r in executors],
            "configs": [r.as_dict() for r in reg.config_records()],
            "broken": [b.as_dict() for b in reg.broken],
            "conflicts": [c.as_dict() for c in reg.conflicts],
            "disabled": [s.as_dict() for s in reg.disabled],
        }
        print(json.dumps(doc, indent=2), file=stdout())
        return ExitCode.OK
    rows = [("NAME", "KIND", "OPT", "REQUIRED", "DEFAULT", "DISTRIBUTION", "SUMMARY")]
    for r in passes:
        rows.append((r.name, "pass", str(r.opt_level), dash(",".join(r.required)),
                     "yes" if r.entry.default else "-", r.source.requirement, r.summary))
    for r in instruments:
        rows.append((r.name, "instrument", "-", "-", "-", r.source.requirement, r.summary))
    for r in formats:  # OPT/REQUIRED hold the suffixes and read/write for a format
        rows.append((r.name, "format", r.modes, " ".join(r.suffixes), "-", r.source.requirement, r.summary))
    for r in executors:  # passhost run --executor NAME
        rows.append((r.name, "executor", "-", "-", "-", r.source.requirement, r.summary))
    print_table(rows)
    if len(rows) == 1 + len(formats) + len(executors):
        print("(no passes or instruments installed: pip install a passhost plugin, "
              "e.g. passhost-fold-constant)", file=stdout())
    for title, items in (("broken plugins", [b.message for b in reg.broken]),
                         ("conflicts", [c.message for c in reg.conflicts]),
                         ("disabled plugins", [f"{s.describe()} (PASSHOST_DISABLE_PLUGINS)" for s in reg.disabled])):
        if items:
            print(f"\n{title}:", file=stdout())
            for line in items:
                print(f"  {printable(line)}", file=stdout())
    if not reg.autoload:
        print("\nplugin autoloading is disabled (PASSHOST_DISABLE_PLUGIN_AUTOLOAD)", file=stdout())
    return ExitCode.OK


def _list_configs(reg: Any, as_json: bool) -> int:
    """``passhost list --configs``: every PassContext config key, the host's included."""
    from .. import transform

    owners = {r.key: r.source.requirement for r in reg.config_records()}
    options = transform.PassContext.list_configs()
    entries = [{"key": key, "type": o["type"], "default": repr(o["default"]), "doc": o["doc"],
                "distribution": owners.get(key, "passhost (host)")} for key, o in sorted(options.items())]
    if as_json:
        print(json.dumps({"configs": entries}, indent=2), file=stdout())
        return ExitCode.OK
    rows = [("KEY", "TYPE", "DEFAULT", "FROM", "DOC")]
    rows += [(e["key"], e["type"], e["default"], e["distribution"], e["doc"]) for e in entries]
    print_table(rows)
    return ExitCode.OK


def _print_options(schema: Any) -> None:
    """The ``options:`` line, then a NAME / TYPE / DEFAULT / DOC table when there are any."""
    if not schema.options:
        print(f"{'options:':<18}{'any (undeclared)' if schema.open else '-'}", file=stdout())
        return
    print(f"{'options:':<18}{len(schema.options)}{' (and undeclared ones)' if schema.open else ''}", file=stdout())
    rows = [("  NAME", "TYPE", "DEFAULT", "DOC")]
    rows += [("  " + o.name, o.type_name, "(required)" if o.required else repr(o.default), o.doc)
             for o in schema.options]
    print_table(rows)


def _built_quietly(record: Any) -> Any:
    """The pass as its factory builds it without options (for its rules), or ``None``."""
    try:
        return record.prototype()
    except Exception:
        return None


def printable_doc(doc: str) -> str:
    """A docstring as plain text: reST markup removed, ``:param`` fields left out (the
    options table shows them), control characters escaped line by line."""
    from ..options import plain_doc

    kept, in_param = [], False
    for line in inspect.cleandoc(doc).splitlines():
        stripped = line.strip()
        if stripped.startswith((":param ", ":raises ", ":returns:", ":return:", ":rtype:", ":ivar ")):
            in_param = True
            continue
        if in_param and stripped and line[:1].isspace():
            continue
        in_param = False
        kept.append(line)
    text = plain_doc("\n".join(kept)).strip("\n")
    text = "\n".join(printable(line) for line in text.splitlines())
    while "\n\n\n" in text:
        text = text.replace("\n\n\n", "\n\n")
    return text


def cmd_info(args: argparse.Namespace) -> int:
    """Describe one pass or instrument: its record and its documentation."""
    from ..errors import InstrumentNotFound, PassNotFound

    reg = registry(args, announce=False)
    try:
        record = reg.pass_record(args.name)
    except PassNotFound as pass_err:
        try:
            record = reg.instrument_record(args.name)
        except InstrumentNotFound:
            raise pass_err from None
    fields = [("name", record.name), ("kind", record.kind)]
    if record.kind == "pass":
        entry = record.entry
        fields += [("opt_level", record.opt_level), ("required", ", ".join(record.required)),
                   ("default pipeline", "yes" if entry.default else "no"),
                   ("after", ", ".join(entry.after)), ("before", ", ".join(entry.before))]
    fields += [("distribution", record.source.requirement), ("plugin", record.source.name),
               ("summary", record.summary)]
    for key, value in fields:
        print(f"{key + ':':<18}{printable(dash(value))}", file=stdout())
    _print_options(record.options)
    doc = getattr(record.entry.factory, "__doc__", None)
    if record.kind == "pass":
        pass_func = getattr(_built_quietly(record), "pass_func", None)
        rules = getattr(pass_func, "rules", None)
        if isinstance(rules, tuple) and rules:
            print(f"{'rules:':<18}{len(rules)}, tried in this order (priority, then as listed)", file=stdout())
            for r in sorted(rules, key=lambda r: -int(getattr(r, "priority", 0))):
                shown = repr(getattr(r, "pattern", ""))
                shown = shown if len(shown) <= 90 else shown[:87] + "..."
                print(f"  {getattr(r, 'name', r)!s:<28} priority {getattr(r, 'priority', 0)}  {shown}", file=stdout())
        if not (isinstance(doc, str) and doc.strip()):
            doc = getattr(pass_func, "__doc__", None)
    if isinstance(doc, str) and doc.strip():
        print(file=stdout())
        print(printable_doc(doc), file=stdout())
    return ExitCode.OK
