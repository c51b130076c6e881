"""Startup cost of crac: a program (`/bin/true`) natively, under the loader directly, and under
`crac launch`.

    python bench/startup.py [-n 20] [--device sim] [--json] [--program "node -e 0"]

Runs the variants interleaved, N times each (after one warm-up), and prints the medians and the
milliseconds each adds to the native run. Exits 1 with a clear message when crac's native loader
is not built (the native baselines are still measured and printed).
"""

from __future__ import annotations

import argparse
import json
import shlex
import shutil
import sys

from _common import (
    BenchError,
    Variant,
    command_line,
    crac_launch_cmd,
    loader_cmd,
    markdown_table,
    measure,
    missing_loader_message,
)

PROGRAM = "/bin/true"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-n", "--reps", type=int, default=20, help="repetitions per variant")
    ap.add_argument("--device", default="sim", help="backend for the crac runs (default sim)")
    ap.add_argument("--timeout", type=float, default=60, help="seconds per run")
    ap.add_argument("--json", action="store_true", help="print JSON instead of a table")
    ap.add_argument(
        "--program",
        default=PROGRAM,
        help="the program and its arguments, one shell-quoted string (default /bin/true); "
        "a large one shows the preflight's share (crac_py/launch/preflight.py)",
    )
    opts = ap.parse_args()
    program = shlex.split(opts.program)
    if not program:
        raise BenchError("--program is empty")

    missing = missing_loader_message()
    variants = [
        Variant("native", program),
        Variant("python -c pass (interpreter start only)", [sys.executable, "-c", "pass"]),
    ]
    exe = shutil.which(program[0]) or program[0]  # the loader takes a path, not a name
    if missing is None:
        variants += [
            Variant("loader directly", loader_cmd(exe, *program[1:], device=opts.device)),
            Variant("crac launch", crac_launch_cmd(*program, device=opts.device)),
        ]
    measure(variants, opts.reps, opts.timeout)

    native = variants[0]
    if native.error:
        raise BenchError(f"the native baseline fails: {native.error}")
    results = []
    for v in variants:
        entry = {"variant": v.name, "command": v.cmd, "error": v.error}
        if v.error is None:
            entry |= {
                "median_ms": v.median * 1e3,
                "min_ms": v.best * 1e3,
                "added_ms": (v.median - native.median) * 1e3,
                "reps": len(v.samples),
            }
        results.append(entry)
    if missing:
        for name in ("loader directly", "crac launch"):
            results.append({"variant": name, "command": None, "error": "not built"})

    if opts.json:
        print(json.dumps({"command": command_line(), "results": results}, indent=2))
    else:
        rows = []
        for r in results:
            if r["error"]:
                rows.append([r["variant"], "n/a", "n/a", f"n/a ({r['error']})"])
            else:
                rows.append(
                    [
                        r["variant"],
                        f"{r['median_ms']:.2f}",
                        f"{r['min_ms']:.2f}",
                        f"{r['added_ms']:+.2f}",
                    ]
                )
        print(f"Startup of `{shlex.join(program)}`, {opts.reps} interleaved repetitions, medians\n")
        print(markdown_table(["variant", "median ms", "min ms", "added vs native ms"], rows))
        print(f"\ncommand: `{command_line()}`")
        for r in results:
            if r["command"]:
                print(f"- {r['variant']}: `{shlex.join(map(str, r['command']))}`")

    failed = [r for r in results if r["error"]]
    if missing:
        print(f"bench/startup.py: {missing}", file=sys.stderr)
    for r in failed:
        if r["error"] != "not built":
            print(f"bench/startup.py: {r['variant']} failed: {r['error']}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except BenchError as exc:
        print(f"bench/startup.py: error: {exc}", file=sys.stderr)
        sys.exit(1)
