"""``livecam identity add|list|show|remove``: manage the identity library."""

from __future__ import annotations

import argparse
import json
import time
from typing import TYPE_CHECKING

from livecam.subcommands.common import accept_after_verb, command_parser, config_from_args

if TYPE_CHECKING:
    from livecam.identity import IdentityLibrary


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = command_parser(sub, run,
        "identity",
        help="add, list, show or remove the faces you can swap in",
        description="Manage the identity library (the faces `livecam run --identity NAME` swaps "
        "in). Photos are checked (one face must be found, at least advanced.identity.min_face_px "
        "wide; see the README's 'Identity photos') and stored with a thumbnail in the user data "
        "dir (or identity.library_dir).",
    )
    actions = p.add_subparsers(dest="action", metavar="ACTION", required=True)
    add = actions.add_parser("add", help="add photos to an identity (created if new)",
                             description="Add one or more photos of the same person. Several "
                             "photos from different angles help: the swap picks the one whose "
                             "head pose is nearest the live face.")
    add.add_argument("name", help="identity name: letters, digits, spaces, '.', '_', '-'")
    add.add_argument("photos", nargs="+", metavar="PHOTO", help="JPEG/PNG photo of the face")
    add.add_argument("--force", action="store_true", help="add photos despite quality warnings "
                     "(several faces of similar size: the largest is used; face under "
                     "advanced.identity.warn_face_px; turned, eyes closed, greyscale, blurry)")
    ls = actions.add_parser("list", help="list identities")
    ls.add_argument("--json", action="store_true", help="print JSON instead of a table")
    show = actions.add_parser("show", help="show one identity's photos and warnings")
    show.add_argument("name")
    rm = actions.add_parser("remove", help="remove an identity")
    rm.add_argument("name")
    accept_after_verb(p, actions)


def _print_list(library: IdentityLibrary, *, as_json: bool) -> None:
    """Every identity; a damaged record is listed with why and what to do, never fatal."""
    entries, damaged = library.scan()
    if as_json:
        rows: list[dict[str, object]] = [
            {"name": e.name, "photos": len(e.photos), "thumbnail": str(e.thumb_path)}
            for e in entries]
        rows += [{"name": name, "damaged": str(exc)} for name, exc in damaged.items()]
        print(json.dumps(sorted(rows, key=lambda row: str(row["name"])), indent=2))
        return
    if not entries and not damaged:
        print(f"no identities in {library.root}; add one with `livecam identity add NAME PHOTO`")
        return
    lines = {}
    for e in entries:
        warned = sum(1 for ph in e.photos if ph.get("warnings"))
        note = f", {warned} with warnings" if warned else ""
        lines[e.name] = f"{e.name}\t{len(e.photos)} photo(s){note}"
    for name, exc in damaged.items():
        lines[name] = f"{name}\tDAMAGED: {exc}"
    for name in sorted(lines):
        print(lines[name])


def run(args: argparse.Namespace) -> int:
    from livecam.core.errors import IdentityError, UsageError
    from livecam.identity import IdentityLibrary

    config = config_from_args(args)
    library = IdentityLibrary.from_config(config.identity)
    try:
        if args.action == "add":
            result = library.add(args.name, args.photos, force=args.force)
            for line in result.warnings:
                print(f"warning: {line}")
            print(f"identity {args.name!r}: {len(result.added_sha256)} photo(s) added"
                  + (f", {len(result.skipped_sha256)} already there" if result.skipped_sha256
                     else "")
                  + f" ({len(result.entry.photos)} in all); library: {library.root}")
        elif args.action == "list":
            _print_list(library, as_json=args.json)
        elif args.action == "show":
            e = library.get(args.name)
            print(f"name: {e.name}")
            print(f"created: {time.strftime('%Y-%m-%d %H:%M', time.localtime(e.created))}")
            print(f"thumbnail: {e.thumb_path}")
            for ph in e.photos:
                print(f"photo {ph['sha256'][:12]}: {ph.get('source', '?')} "
                      f"(face {ph.get('face_width_px', '?')} px)")
                for w in ph.get("warnings", ()):
                    print(f"  warning: {w}")
        elif args.action == "remove":
            from livecam.identity import validate_name

            names = library.names()
            if validate_name(args.name) not in names:
                # library.get's message suggests `identity add`: wrong advice for a removal
                raise IdentityError(f"no identity named {args.name!r}, nothing removed "
                                    f"(known: {', '.join(names) or 'none'})")
            library.remove(args.name)
            print(f"identity {args.name!r} removed")
    except IdentityError as exc:
        # a bad name or photo is bad input: one line, exit 2 (see cli.main)
        raise UsageError(str(exc)) from None
    return 0
