"""Command: cache (what `$ODQA_HOME` holds, and clearing it)."""

from __future__ import annotations

import sys

from odqa.commands.common import add_command, print_json_last
from odqa.core.cache import KIND_NAMES, KINDS


def register(subparsers) -> None:
    p = add_command(
        subparsers,
        "cache",
        "List what odqa caches under $ODQA_HOME (ONNX graphs, the demo index and KB, ...) with sizes, or clear it: "
        "all of it is made again on first use, but the shell's history, cleared only when named.",
        "odqa cache clear onnx",
        run_cache,
    )
    p.add_argument("action", nargs="?", choices=("list", "clear"), default="list", help="list (default) or clear")
    p.add_argument(
        "kinds",
        nargs="*",
        metavar="KIND",
        help="the kinds to list or clear: "
        + "; ".join(f"{k.name}: {k.what}" for k in KINDS)
        + " (none named: every kind; clear leaves history unless named)",
    )
    p.add_argument("--json", action="store_true", help="print the entries as one JSON object on the last line")


def run_cache(args) -> int:
    from odqa.core.cache import cache_entries, check_kinds, clear_cache, human_size, other_entries
    from odqa.core.paths import odqa_home
    from odqa.core.terminal import printable

    home = odqa_home()
    check_kinds(args.kinds)
    if args.action == "clear":
        removed = clear_cache(args.kinds, home)
        freed = sum(e.bytes for e in removed)
        out = sys.stderr if args.json else sys.stdout
        print(printable(f"cleared {len(removed)} entries of {home} ({human_size(freed)} freed)"), file=out)
        if args.json:
            print_json_last({"home": str(home), "removed": [e.to_dict(home) for e in removed], "bytes": freed})
        return 0
    entries = [e for e in cache_entries(home) if not args.kinds or e.kind in args.kinds]
    others = [] if args.kinds else other_entries(home)
    if args.json:
        print_json_last(
            {
                "home": str(home),
                "entries": [e.to_dict(home) for e in entries],
                "bytes": sum(e.bytes for e in entries),
                "other": [str(p.relative_to(home)) for p in others],
            }
        )
        return 0
    print(printable(f"{home}: {human_size(sum(e.bytes for e in entries))} in {len(entries)} entries"))
    for kind in KIND_NAMES:
        mine = [e for e in entries if e.kind == kind]
        if not mine:
            continue
        what = next(k.what for k in KINDS if k.name == kind)
        print(printable(f"{kind} ({human_size(sum(e.bytes for e in mine))}): {what}"))
        for entry in mine:
            used = entry.to_dict(home)["used"]
            print(printable(f"  {human_size(entry.bytes):>9}  {used}  {entry.path.relative_to(home)}"))
    for path in others:
        print(printable(f"not odqa's cache, left alone: {path.relative_to(home)}"))
    if entries:
        print("clear with `odqa cache clear` (every kind but history) or `odqa cache clear KIND ...`")
    return 0
