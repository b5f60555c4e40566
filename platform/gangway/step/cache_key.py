"""A cacheable step's cache check (:mod:`gangway.step.caching`): the task that runs before the step,
with the step's own arguments, and gives it the memoize key to use.

    python -m gangway.step.cache_key --spec JSON --image IMAGE --root URI \\
        --key-out PATH --record-out PATH --verdict-out PATH -- STEP-ARGUMENTS…

``--spec`` is what the compiler knows of the step (its template name, fingerprint, module,
``maxAge``, which flags read data and which are places). The check digests the data each
read flag names, makes the step's key, and reads the step's record under ``--root``. Its
outputs: ``key`` — the record's memoize key when the record is young enough and every output
it names still holds its recorded digest (the step is then a memoize hit), else a fresh key
(a miss: the step runs); ``record`` — where the step writes its record (empty: none);
``verdict`` — one line saying which, and why. It never fails: what goes wrong with the cache
costs a rerun of the step, no more.
"""

from __future__ import annotations

import argparse
import json
import secrets
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gangway.step.caching import (
    cache_key,
    check_record,
    code_digest,
    keyed_values,
    max_age_seconds,
    read_digest,
)

__all__ = ["Verdict", "decide", "main"]


@dataclass(frozen=True)
class Verdict:
    key: str
    """The memoize key the step gets."""
    record: str
    """Where the step writes its record ("" for nowhere)."""
    why: str


def decide(spec: Mapping[str, Any], image: str, root: str, args: list[str]) -> Verdict:
    """The key ``args`` (the step's arguments, resolved) get, with the record's verdict."""
    template = str(spec["template"])
    reads = {str(f) for f in spec.get("reads") or []}
    pairs = keyed_values(args, {str(f) for f in spec.get("keyed") or []})
    try:
        keyed = [
            read_digest(v) if i % 2 and pairs[i - 1] in reads else v for i, v in enumerate(pairs)
        ]
    except Exception as e:  # storage unreachable, a bad manifest: no key this time
        why = f"not cached: the data it reads could not be digested ({type(e).__name__}: {e})"
        return Verdict(f"{template}-{secrets.token_hex(6)}", "", why)
    module = str(spec.get("module") or "")
    code = code_digest(module) if module else ""
    base = cache_key(str(spec["fingerprint"]), image, keyed, code)
    record = f"{root.rstrip('/')}/{template}/{base}.json"
    max_age = max_age_seconds(str(spec.get("maxAge") or "")) or float("inf")
    try:
        found, why = check_record(record, max_age)
    except Exception as e:  # storage unreachable, say: run the step, which will tell
        found, why = None, f"could not be verified ({type(e).__name__}: {e})"
    if found is not None:
        return Verdict(found.key, record, f"verified: outputs of {found.workflow or 'a run'}")
    fresh = f"{template}-{base[:40]}-{secrets.token_hex(6)}"
    return Verdict(fresh, record, "no entry" if why == "no entry" else f"not used: {why}")


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="gangway.step.cache_key", description=__doc__)
    parser.add_argument("--spec", required=True, help="the step's cache spec (JSON)")
    parser.add_argument("--image", default="", help="the image the step runs")
    parser.add_argument("--root", required=True, help="where records are kept (a URI)")
    for out in ("key", "record", "verdict"):
        parser.add_argument(f"--{out}-out", type=Path, required=True, help=f"write the {out}")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    split = argv.index("--") if "--" in argv else len(argv)
    ns = _parser().parse_args(argv[:split])
    try:
        spec = json.loads(ns.spec)
        verdict = decide(spec, ns.image, ns.root, argv[split + 1 :])
    except (ValueError, KeyError, TypeError) as e:  # a spec the compiler did not write
        verdict = Verdict(f"uncached-{secrets.token_hex(6)}", "", f"not cached: bad spec ({e})")
    for out, text in (("key", verdict.key), ("record", verdict.record), ("verdict", verdict.why)):
        path: Path = getattr(ns, f"{out}_out")
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    print(f"cache: {verdict.why} (key {verdict.key})", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
