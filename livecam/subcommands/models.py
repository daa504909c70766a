"""``livecam models list | fetch NAME | verify [NAME] | import NAME PATH``."""

from __future__ import annotations

import argparse
import sys
import time
from typing import Any

from livecam.subcommands.common import accept_after_verb, add_config_options, config_from_args


def add_parser(sub: Any) -> None:
    parser = sub.add_parser("models", help="list, fetch, verify or import neural model files",
                            description="Model files (inswapper_128, w600k_r50, ...) live in "
                            "advanced.models.dir; each is checked against its manifest's sha256. A "
                            "model with no published sha256 is used only after you vouch for one "
                            "copy (--trust pins its sha256; later copies must match it).")
    add_config_options(parser)
    verbs = parser.add_subparsers(dest="verb", metavar="VERB", required=True)
    verbs.add_parser("list", help="show every known model and whether it is installed")
    fetch = verbs.add_parser("fetch", help="download a model (resumes; verifies sha256)")
    fetch.add_argument("name")
    fetch.add_argument("--trust", action="store_true", help=_TRUST_HELP)
    verify = verbs.add_parser("verify", help="re-hash installed models (always reads every "
                              "byte)")
    verify.add_argument("name", nargs="?")
    imp = verbs.add_parser("import", help="adopt a model file you already have")
    imp.add_argument("name")
    imp.add_argument("path")
    imp.add_argument("--move", action="store_true", help="move the file instead of copying")
    imp.add_argument("--trust", action="store_true", help=_TRUST_HELP)
    imp.add_argument("--replace", action="store_true", help="with --trust: replace the pinned "
                     "sha256 of a model with no published hash by this file's")
    accept_after_verb(parser, verbs)
    parser.set_defaults(func=run)


_TRUST_HELP = ("for a model with no published sha256: you vouch for this copy, and its sha256 "
               "is pinned (only when none is pinned yet; see --replace)")

#: Files smaller than this are hashed without a progress line.
_PROGRESS_MIN_BYTES = 64 << 20


def _progress(min_bytes: int = 0) -> Any:
    last = [0.0]

    def show(done: int, total: int | None) -> None:
        if total is not None and total < min_bytes:
            return
        now = time.monotonic()
        if now - last[0] < 0.2 and (total is None or done < total):
            return
        last[0] = now
        if total:
            print(f"\r  {done / 2**20:8.1f} / {total / 2**20:.1f} MiB "
                  f"({100 * done / total:5.1f}%)", end="", file=sys.stderr, flush=True)
        else:
            print(f"\r  {done / 2**20:8.1f} MiB", end="", file=sys.stderr, flush=True)

    return show


def _end_progress(size_bytes: int) -> None:
    if size_bytes >= _PROGRESS_MIN_BYTES:
        print(file=sys.stderr)  # ends the progress line


def run(args: argparse.Namespace) -> int:
    from livecam.core.errors import UsageError
    from livecam.engines.fetch import fetch_model
    from livecam.engines.registry import model_store

    config = config_from_args(args)
    store = model_store(config.models)
    if args.verb == "list":
        print(f"models dir: {store.models_dir}")
        for name in sorted(store.manifests):
            manifest = store.manifests[name]
            present = store.path(name).is_file()
            sha = ("sha256 documented" if manifest.accepted_sha256 else
                   "no public sha256, " + ("pinned" if store.pin(name) else "not pinned"))
            state = "installed" if present else "not installed"
            print(f"  {name:20s} {manifest.kind:10s} {state:14s} {sha}")
        return 0
    if args.verb == "fetch":
        path = fetch_model(store, args.name, progress=_progress(),
                           retries=config.models.fetch_retries,
                           timeout_s=config.models.fetch_timeout_s, trust=args.trust)
        print(f"\n{args.name}: {store.status(args.name).detail}, at {path}")
        return 0
    if args.verb == "import":
        if args.replace and not args.trust:
            raise UsageError("--replace replaces a pinned sha256: it needs --trust too")
        path = store.adopt(args.name, args.path, move=args.move, trust=args.trust,
                           replace=args.replace, progress=_progress(_PROGRESS_MIN_BYTES))
        _end_progress(path.stat().st_size)
        print(f"{args.name}: {store.status(args.name).detail}, at {path}")
        return 0
    names = [args.name] if args.name else sorted(store.manifests)
    store.tidy()  # what killed imports and fetches left
    if not args.name and not any(store.path(name).is_file() for name in names):
        print(f"no models installed in {store.models_dir}: nothing to verify (install one "
              "with `livecam models fetch NAME`; `livecam models list` names them)")
        return 0
    bad = 0
    for name in names:
        if not store.path(name).is_file():
            if args.name:
                raise store.missing_error(name)
            continue
        size = store.path(name).stat().st_size
        status = store.status(name, rehash=True, progress=_progress(_PROGRESS_MIN_BYTES))
        _end_progress(size)
        bad += not status.verified
        print(f"  {name:20s} {'ok' if status.verified else 'FAILED'}  {status.detail}")
    return 1 if bad else 0
