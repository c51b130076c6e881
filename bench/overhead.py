"""Run-time overhead of crac: compute, malloc, mmap, clock, syscall and dup2 loops natively vs crac.

    python bench/overhead.py [-n 5] [--iters compute=200000000] [--device sim] [--json]

Builds the programs from tests/apps/, runs native and crac interleaved N times each (after one
warm-up), checks that both print the same output, and prints median times and their ratio. The
launch cost (`crac launch /bin/true` minus native `/bin/true`, measured in the same run) is also
subtracted to give the steady-state ratio. Exits 1 with a clear message when crac's native loader
is not built (the native baselines are still measured and printed).
"""

from __future__ import annotations

import argparse
import json
import shlex
import sys
import tempfile
from pathlib import Path

from _common import (
    BenchError,
    Variant,
    build_apps,
    command_line,
    crac_launch_cmd,
    markdown_table,
    measure,
    missing_loader_message,
)

PROGRAMS = ["compute", "malloc_bench", "mmap_bench", "clock_bench", "syscall_bench", "dup2_bench"]
WHAT = {
    "compute": "pure CPU loop (no syscalls)",
    "malloc_bench": "malloc/free, mixed sizes, glibc default thresholds",
    "mmap_bench": "mmap/mremap/munmap every iteration (each one trapped under crac)",
    "clock_bench": "clock_gettime(CLOCK_MONOTONIC) in a loop (the vDSO)",
    "syscall_bench": "getppid through syscall(2) in a loop (the seccomp filter's cost)",
    "dup2_bench": "dup2(1, 5) in a loop (each one trapped under crac, as a shell's redirections)",
}


PY_CLOCK = "import time\nc = time.perf_counter\nfor _ in range(3000000):\n    c()\nprint('done')"
WHAT["python_clock"] = "python3: time.perf_counter() 3,000,000 times"
NO_VDSO = "clock_bench, CRAC_NO_VDSO=1"
ALLOW_ALL = "syscall_bench, native, allow-all filter"
WHAT[ALLOW_ALL] = "the same natively under a one-instruction seccomp filter (any filter's cost)"
WHAT[NO_VDSO] = "the same, crac giving the program no vDSO (every read a system call)"


def parse_iters(items: list[str]) -> dict[str, str]:
    iters = {}
    for item in items:
        name, sep, count = item.partition("=")
        if not sep or name not in PROGRAMS or not count.isdigit():
            raise BenchError(f"--iters wants NAME=COUNT with NAME in {PROGRAMS}, got {item!r}")
        iters[name] = count
    return iters


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-n", "--reps", type=int, default=5, help="repetitions per variant")
    ap.add_argument(
        "--iters",
        action="append",
        default=[],
        metavar="NAME=COUNT",
        help="iteration count for one program (default: the program's own)",
    )
    ap.add_argument("--device", default="sim", help="backend for the crac runs (default sim)")
    ap.add_argument("--timeout", type=float, default=300, help="seconds per run")
    ap.add_argument("--json", action="store_true", help="print JSON instead of a table")
    opts = ap.parse_args()
    iters = parse_iters(opts.iters)
    missing = missing_loader_message()

    with tempfile.TemporaryDirectory(prefix="crac-bench-") as tmp:
        apps = build_apps(PROGRAMS, Path(tmp))
        pairs: list[tuple[str, Variant, Variant | None]] = []
        variants: list[Variant] = []
        launch = [Variant("native /bin/true", ["/bin/true"])]
        if missing is None:
            launch.append(
                Variant("crac /bin/true", crac_launch_cmd("/bin/true", device=opts.device))
            )
        variants += launch
        for name in PROGRAMS:
            args = [iters[name]] if name in iters else []
            native = Variant(f"{name} native", [str(apps[name]), *args])
            crac = None
            if missing is None:
                crac = Variant(
                    f"{name} crac", crac_launch_cmd(str(apps[name]), *args, device=opts.device)
                )
            pairs.append((name, native, crac))
            variants += [native] + ([crac] if crac else [])
            if name == "clock_bench" and crac is not None:
                # The same loop without crac's vDSO proxy: what clock reads cost before it.
                plain = Variant(f"{name} crac, no vDSO", ["env", "CRAC_NO_VDSO=1", *crac.cmd])
                pairs.append((NO_VDSO, native, plain))
                variants.append(plain)
            if name == "syscall_bench":
                # The floor: the same loop natively under a one-instruction allow-all filter.
                count = iters.get(name, "2000000")
                floor = Variant(f"{name} allow-all", [str(apps[name]), count, "allow-all"])
                pairs.append((ALLOW_ALL, native, floor))
                variants.append(floor)
        # Python timing itself: time.perf_counter is clock_gettime through the vDSO.
        py = [sys.executable, "-c", PY_CLOCK]
        native = Variant("python_clock native", py)
        crac = Variant("python_clock crac", crac_launch_cmd(*py, device=opts.device))
        pairs.append(("python_clock", native, crac if missing is None else None))
        variants += [native] + ([crac] if missing is None else [])
        measure(variants, opts.reps, opts.timeout)

    for v in variants:
        if v.name.endswith("native") and v.error:
            raise BenchError(f"the native baseline {v.name!r} fails: {v.error}")
    launch_cost = None
    if len(launch) == 2 and launch[1].error is None:
        launch_cost = launch[1].median - launch[0].median

    results = []
    for name, native, crac in pairs:
        entry = {
            "program": name,
            "what": WHAT[name],
            "native_cmd": native.cmd,
            "native_s": native.median,
            "output": native.stdout.decode(errors="replace").strip(),
        }
        if crac is None:
            entry["error"] = "not built"
        elif crac.error is None and crac.stdout != native.stdout:
            entry["error"] = f"output differs: native {native.stdout!r}, crac {crac.stdout!r}"
        else:
            entry["error"] = crac.error
        if crac is not None:
            entry["crac_cmd"] = crac.cmd
        if entry["error"] is None:
            entry["crac_s"] = crac.median
            entry["ratio"] = crac.median / native.median
            if launch_cost is not None and name != ALLOW_ALL:  # that one is no crac run
                entry["ratio_minus_launch"] = (crac.median - launch_cost) / native.median
        results.append(entry)

    doc = {
        "command": command_line(),
        "reps": opts.reps,
        "launch_cost_s": launch_cost,
        "results": results,
    }
    if opts.json:
        print(json.dumps(doc, indent=2))
    else:
        rows = []
        for r in results:
            if r["error"]:
                rows.append(
                    [
                        r["program"],
                        r["what"],
                        f"{r['native_s']:.3f}",
                        "n/a",
                        f"n/a ({r['error']})",
                        "n/a",
                    ]
                )
            else:
                steady = r.get("ratio_minus_launch")
                rows.append(
                    [
                        r["program"],
                        r["what"],
                        f"{r['native_s']:.3f}",
                        f"{r['crac_s']:.3f}",
                        f"{r['ratio']:.3f}",
                        "n/a" if steady is None else f"{steady:.3f}",
                    ]
                )
        header = ["program", "work", "native s", "crac s", "ratio", "ratio minus launch cost"]
        print(f"Run-time overhead, {opts.reps} interleaved repetitions, medians\n")
        print(markdown_table(header, rows))
        if launch_cost is not None:
            print(f"\nlaunch cost (crac /bin/true - native /bin/true): {launch_cost * 1e3:.1f} ms")
        print(f"\ncommand: `{command_line()}`")
        for r in results:
            print(f"- {r['program']}: `{r['output']}`")
            if r.get("crac_cmd"):
                print(f"  - crac: `{shlex.join(r['crac_cmd'])}`")

    if missing:
        print(f"bench/overhead.py: {missing}", file=sys.stderr)
    failed = [r for r in results if r["error"]]
    for r in failed:
        if r["error"] != "not built":
            print(f"bench/overhead.py: {r['program']} under crac: {r['error']}", file=sys.stderr)
    if len(launch) == 2 and launch[1].error:
        print(f"bench/overhead.py: crac /bin/true: {launch[1].error}", file=sys.stderr)
    return 1 if failed or missing else 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except BenchError as exc:
        print(f"bench/overhead.py: error: {exc}", file=sys.stderr)
        sys.exit(1)
