"""Cost of one CUDA call crossing into the lower half (docs/ARCHITECTURE.md "Crossing"), measured
side by side:

* native:  the program linked against the native sim libcudart (no split process),
* crac:    the same program under `crac launch --device sim` (shim -> crossing -> sim),
* proxy:   a forwarding baseline that sends every call to a server process over a Unix socket
           (bench/crossing/proxy_*.c), as proxy-process designs do.

Trivial calls: cudaGetLastError, and cudaStreamQuery on an idle stream (timed inside the program).
Then one example with enough runtime (examples/jacobi) as a whole process, natively vs under the
loader (no Python in either). Prints markdown tables; never asserts on time.

    python bench/crossing.py [-n 2000000] [-r 5] [--jacobi N ITERS] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _common import REPO, BenchError, loader_path, markdown_table

HERE = Path(__file__).resolve().parent / "crossing"
CALLS = ("cudaGetLastError", "cudaStreamQuery")


def _toolchain():
    try:
        from crac_py.codegen import sim_toolchain
    except ImportError:
        sys.path.insert(0, str(REPO))
        from crac_py.codegen import sim_toolchain
    return sim_toolchain


def build(out: Path) -> dict[str, Path]:
    tc = _toolchain()
    from crac_py.codegen.cudart_locate import find_cuda

    try:
        app = tc.build(HERE / "crossing_app.c", out / "crossing_app")
        server = tc.build(HERE / "proxy_server.c", out / "proxy_server")
        client = out / "proxy_client.so"
        cmd = [
            "gcc",
            "-O2",
            "-std=c11",
            "-Wall",
            "-Wextra",
            "-Werror",
            "-shared",
            "-fPIC",
            f"-I{find_cuda().include_dir}",
            "-Wl,-soname,libcudart.so.13",
            f"-Wl,--version-script={HERE / 'proxy_client.map'}",
            str(HERE / "proxy_client.c"),
            "-o",
            str(client),
            "-pthread",
        ]
        res = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
        if res.returncode != 0:
            raise BenchError(f"cannot build the proxy client: {shlex.join(cmd)}\n{res.stderr}")
        jacobi = tc.build(REPO / "examples" / "jacobi.c", out / "jacobi", ("-lm",))
    except tc.ToolchainError as exc:
        raise BenchError(str(exc)) from None
    return {"app": app, "server": server, "client": client, "jacobi": jacobi}


def crac_launch() -> list[str]:
    from _common import crac_cmd

    return [*crac_cmd(), "launch", "--device", "sim", "--"]


def per_call(cmd: list[str], env: dict[str, str] | None = None) -> dict[str, float]:
    res = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=600)
    if res.returncode != 0:
        raise BenchError(f"{shlex.join(cmd)} failed: {res.stderr.strip()[-2000:]}")
    out: dict[str, float] = {}
    for line in res.stdout.splitlines():
        name, _, value = line.partition(" ")
        out[name] = float(value)
    return out


def timed(cmd: list[str]) -> tuple[float, float]:
    """(wall seconds, CPU seconds: user + system of the process and all its threads)."""
    r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    res = subprocess.run(cmd, capture_output=True, timeout=600)
    dt = time.perf_counter() - t0
    r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    if res.returncode != 0:
        raise BenchError(f"{shlex.join(cmd)} failed: {res.stderr.decode().strip()[-2000:]}")
    return dt, (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("-n", type=int, default=2_000_000, help="calls per measurement")
    ap.add_argument("-r", "--reps", type=int, default=5, help="interleaved repetitions")
    ap.add_argument("--proxy-n", type=int, default=50_000, help="calls per proxy measurement")
    ap.add_argument("--jacobi", nargs=2, type=int, default=(320, 2000), metavar=("N", "ITERS"))
    ap.add_argument("--json", action="store_true")
    ns = ap.parse_args()
    if not loader_path().is_file():
        print(
            f"crossing: the loader is not built ({loader_path()}); run pip install .",
            file=sys.stderr,
        )
        return 1
    with tempfile.TemporaryDirectory(prefix="crac-bench-") as tmp:
        try:
            b = build(Path(tmp))
            proxy_env = {
                **os.environ,
                "LD_PRELOAD": str(b["client"]),
                "CRAC_BENCH_PROXY_SERVER": str(b["server"]),
            }
            samples: dict[str, dict[str, list[float]]] = {
                v: {c: [] for c in CALLS} for v in ("native", "crac", "proxy")
            }
            variants = {
                "native": ([str(b["app"]), str(ns.n)], None),
                "crac": ([*crac_launch(), str(b["app"]), str(ns.n)], None),
                "proxy": ([str(b["app"]), str(ns.proxy_n)], proxy_env),
            }
            for _ in range(ns.reps):
                for v, (cmd, env) in variants.items():
                    for c, value in per_call(cmd, env).items():
                        samples[v][c].append(value)
            jacobi_args = [str(x) for x in ns.jacobi]
            native_j = [str(b["jacobi"]), *jacobi_args]
            loader_j = [
                str(loader_path()),
                "--device",
                "sim",
                "--argv0",
                str(b["jacobi"]),
                "--",
                *native_j,
            ]
            wall_s: dict[str, list[float]] = {"native": [], "crac": []}
            cpu_s: dict[str, list[float]] = {"native": [], "crac": []}
            timed(native_j)  # warm-up
            timed(loader_j)
            for _ in range(ns.reps):
                for v, cmd in (("native", native_j), ("crac", loader_j)):
                    w, c = timed(cmd)
                    wall_s[v].append(w)
                    cpu_s[v].append(c)
        except BenchError as exc:
            print(f"crossing: {exc}", file=sys.stderr)
            return 1

    med = {v: {c: statistics.median(s) for c, s in d.items()} for v, d in samples.items()}
    rows = []
    for c in CALLS:
        n, k, p = med["native"][c], med["crac"][c], med["proxy"][c]
        rows.append([c, f"{n:.1f}", f"{k:.1f}", f"{p:.0f}", f"{k / n:.2f}x", f"{p / k:.0f}x"])
    wn, wc = statistics.median(wall_s["native"]), statistics.median(wall_s["crac"])
    cn, cc = statistics.median(cpu_s["native"]), statistics.median(cpu_s["crac"])
    if ns.json:
        print(
            json.dumps(
                {"per_call_ns": med, "jacobi_wall_s": wall_s, "jacobi_cpu_s": cpu_s}, indent=2
            )
        )
        return 0
    print(
        f"Command: python bench/crossing.py -n {ns.n} -r {ns.reps} --jacobi "
        f"{' '.join(jacobi_args)}  (medians of {ns.reps} interleaved runs)\n"
    )
    print(
        markdown_table(
            [
                "call",
                "native ns/call",
                "crac ns/call",
                "proxy ns/call",
                "crac / native",
                "proxy / crac",
            ],
            rows,
        )
    )
    print()
    prog = f"examples/jacobi {' '.join(jacobi_args)}"
    print(
        markdown_table(
            ["program", "time", "native s", "crac s (loader, sim1)", "crac / native"],
            [
                [
                    prog,
                    "wall",
                    f"{wn:.3f}",
                    f"{wc:.3f}",
                    f"{wc / wn:.4f} ({(wc / wn - 1) * 100:+.2f}%)",
                ],
                [
                    prog,
                    "CPU",
                    f"{cn:.3f}",
                    f"{cc:.3f}",
                    f"{cc / cn:.4f} ({(cc / cn - 1) * 100:+.2f}%)",
                ],
            ],
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
