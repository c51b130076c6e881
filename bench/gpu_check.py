"""The cuda backend on a real GPU, in one short run (bench/gpu_check.sh runs it; docs/CUDA.md).

    python bench/gpu_check.py [--gib 8] [--launches 100000] [--out DIR] [--dry-run]

Needs an NVIDIA GPU with its driver, nvcc (CUDA 13) and crac installed in the running Python; on a
machine without a GPU it says why and exits 2 at once. Then, in this order:

1. builds examples/cuda/*.cu and bench/apps/gpu_*.cu with `nvcc -cudart shared` (RUNPATH to
   NVIDIA's runtime, so natively they run on it);
2. each example: its output natively and under `crac launch --device cuda` must be identical; then
   two checkpoint -> SIGKILL -> restart cycles on the GPU (tests/ckpt_harness.py run_cycles: the
   stitched output must equal the uninterrupted run); once more restarted from CUDA 13 onto
   CUDA 12 (`crac restart --cuda-runtime 12`); and vector_add built against CUDA 12 (its headers,
   NVIDIA's libcudart.so.12): native vs `--cuda-runtime 12`, then restarted onto CUDA 13;
3. the crossing's cost: an empty kernel launched N times, natively and under crac (3 runs each,
   interleaved, medians), as a ratio;
4. device memory: GIB GiB filled on the GPU; crac's checkpoint (from `crac launch -v`'s line) and
   restart (to the first tick) against the program's own cudaMemcpy of the same bytes through one
   pinned buffer; the data checked on the device after the restart.

Prints one table; exits 1 if anything mismatched or failed (each row says what), 0 otherwise.
--dry-run, on any machine: step 1 only (every program must build), then it stops.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests"))

from _common import markdown_table  # noqa: E402

ROWS: list[list[str]] = []
FAILED: list[str] = []
CKPT_LINE = re.compile(
    r"crac: checkpoint (\d+): ([\d.]+) MiB in .*, program paused (\d+) ms, (\d+) ms"
)


def row(check: str, result: str, ok: bool | None) -> None:
    verdict = "ok" if ok else ("skipped" if ok is None else "FAIL")
    ROWS.append([check, result, verdict])
    if ok is False:
        FAILED.append(check)
    print(f"gpu_check: {check}: {verdict}: {result}", file=sys.stderr, flush=True)


def crac() -> list[str]:
    from conftest import crac_cmd

    return list(crac_cmd())


def find_nvcc() -> str | None:
    for home in (os.environ.get("CUDA_HOME"), "/usr/local/cuda"):
        if home and os.access(Path(home) / "bin" / "nvcc", os.X_OK):
            return str(Path(home) / "bin" / "nvcc")
    return shutil.which("nvcc")


def build(nvcc: str, src: Path, out: Path, runtime_dir: Path) -> Path:
    cmd = [nvcc, "-O2", "-cudart", "shared", f"-Xlinker=-rpath,{runtime_dir}", "-o", str(out)]
    cmd += [f"-I{src.parent}", str(src)]
    res = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    if res.returncode != 0:
        raise RuntimeError(f"nvcc failed on {src.name}: {res.stderr.strip()[-500:]}")
    return out


def run(argv: list[str], cwd: Path, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run(argv, capture_output=True, cwd=cwd, timeout=timeout)


def check_example(prog: Path, work: Path) -> None:
    import pytest
    from ckpt_harness import run_cycles

    name = prog.name
    native = run([str(prog), "20", "0"], work)
    under = run(
        [*crac(), "launch", "--device", "cuda", "-c", str(work), "--", str(prog), "20", "0"], work
    )
    same = native.returncode == 0 and under.returncode == 0 and native.stdout == under.stdout
    detail = (
        "identical"
        if same
        else (
            f"native rc {native.returncode}, crac rc {under.returncode}; crac stderr: "
            f"{under.stderr.decode(errors='replace').strip()[-300:]}"
        )
    )
    row(f"{name}: native vs crac launch", detail, same)
    cycles = work / f"{name}-cycles"
    try:
        run_cycles(prog, ["40", "30"], cycles, launch_opts=["--device", "cuda"])
        row(f"{name}: 2 checkpoint/restart cycles", "output identical to the native run", True)
    except pytest.fail.Exception as exc:
        row(f"{name}: 2 checkpoint/restart cycles", str(exc).splitlines()[0][:300], False)
    restart_onto(prog, work / f"{name}-onto12", "13", "12")


def restart_onto(prog: Path, work: Path, first: str, then: str) -> None:
    """launch on CUDA runtime FIRST -> checkpoint -> SIGKILL -> `crac restart --cuda-runtime
    THEN` -> run to the end: the stitched output must equal the native run's."""
    import pytest
    from ckpt_harness import (
        Segment,
        assert_same_output,
        checkpoint,
        kill9,
        launch,
        native_reference,
        restart,
        stitch,
        wait_exit,
        wait_for_step,
    )

    what = f"{prog.name}: restart from CUDA {first} onto CUDA {then}"
    if not (REPO / "crac_py" / "_native" / f"libcrac-cuda{then}.so").exists():
        row(what, f"no CUDA {then} backend built (docs/CUDA.md)", None)
        return
    try:
        ref = native_reference(prog, ["40", "30"], work / "ref", work / "ref_cwd")
        ck, logs = work / "ck", work / "logs"
        logs.mkdir(parents=True, exist_ok=True)
        opts = ["--device", "cuda", "--cuda-runtime", first]
        proc = launch(prog, ["40", "30"], ck, out_dir=logs, opts=opts)
        try:
            wait_for_step(proc, ref.steps // 3)
            before = proc.last_step()
            gen = checkpoint(proc, ck)
            at = proc.last_step()
            kill9(proc)
        finally:
            proc.stop()
        seg = Segment(proc.label, proc.lines(), before, at, gen)
        again = restart(gen, out_dir=logs, label="restart", opts=["--cuda-runtime", then])
        try:
            status = wait_exit(again)
            assert status == 0, again.report()
            assert_same_output(stitch([seg, Segment(again.label, again.lines())]), ref.lines, what)
        finally:
            again.stop()
        row(what, "output identical to the native run", True)
    except (AssertionError, pytest.fail.Exception) as exc:
        row(what, str(exc).splitlines()[0][:300], False)


def cuda12_program(nvcc: str, src: Path, work: Path) -> None:
    """A CUDA 12 program (CUDA 13's nvcc, CUDA 12's headers, NVIDIA's libcudart.so.12): natively on
    NVIDIA's CUDA 12 runtime and under `crac launch --device cuda --cuda-runtime 12` the same,
    then restarted onto CUDA 13 (docs/CUDA.md "CUDA 12")."""
    from crac_py.codegen.cuda12 import find_cuda12
    from crac_py.launch import devices

    what = f"{src.stem} (CUDA 12): native vs crac launch --cuda-runtime 12"
    try:
        cu12 = find_cuda12()
        libdir = devices.find_cuda_runtime("12").parent
        prog = work / f"{src.stem}_cu12"
        cmd = [nvcc, "-O2", "-cudart", "none", f"-I{cu12.include_dir}", f"-I{src.parent}"]
        cmd += ["-o", str(prog), str(src), f"-L{libdir}", "-l:libcudart.so.12"]
        cmd += [f"-Xlinker=-rpath,{libdir}"]
        res = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
        if res.returncode != 0:
            raise RuntimeError(f"nvcc failed on {src.name}: {res.stderr.strip()[-500:]}")
    except Exception as exc:  # no CUDA 12 here: say so in the table
        row(what, f"not built: {exc}", False)
        return
    native = run([str(prog), "20", "0"], work)
    opts = ["--device", "cuda", "--cuda-runtime", "12", "-c", str(work)]
    under = run([*crac(), "launch", *opts, "--", str(prog), "20", "0"], work)
    same = native.returncode == 0 and under.returncode == 0 and native.stdout == under.stdout
    row(
        what,
        "identical"
        if same
        else f"native rc {native.returncode}, crac rc "
        f"{under.returncode}: {under.stderr.decode(errors='replace').strip()[-300:]}",
        same,
    )
    restart_onto(prog, work / f"{src.stem}_cu12-onto13", "12", "13")


def launch_overhead(prog: Path, n: int, work: Path) -> None:
    def seconds(argv: list[str]) -> float:
        cp = run(argv, work)
        m = re.search(rb"launches \d+ seconds ([\d.]+)", cp.stdout)
        if cp.returncode != 0 or not m:
            raise RuntimeError(cp.stderr.decode(errors="replace").strip()[-300:])
        return float(m.group(1))

    native, under = [], []
    try:
        for _ in range(3):
            native.append(seconds([str(prog), str(n)]))
            under.append(
                seconds(
                    [
                        *crac(),
                        "launch",
                        "--device",
                        "cuda",
                        "-c",
                        str(work),
                        "--",
                        str(prog),
                        str(n),
                    ]
                )
            )
    except RuntimeError as exc:
        row(f"{n} kernel launches: crac / native", f"failed: {exc}", False)
        return
    a, b = statistics.median(native), statistics.median(under)
    row(
        f"{n} kernel launches: crac / native",
        f"{b / a:.3f} ({b * 1e6 / n:.2f} vs {a * 1e6 / n:.2f} µs per launch)",
        True,
    )


def read_until(proc: subprocess.Popen, pattern: bytes, timeout: float) -> bytes:
    """Lines of proc's stdout up to the first containing PATTERN."""
    assert proc.stdout is not None
    deadline = time.monotonic() + timeout
    seen = b""
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        if not line:
            raise RuntimeError(f"the program ended waiting for {pattern!r}: {seen[-300:]!r}")
        seen += line
        if pattern in line:
            return seen
    raise RuntimeError(f"no {pattern!r} within {timeout:.0f} s")


def device_memory(prog: Path, gib: int, work: Path) -> None:
    ck = work / "devmem"
    err = open(work / "devmem.err", "w+b")
    proc = subprocess.Popen(
        [
            *crac(),
            "launch",
            "--device",
            "cuda",
            "-v",
            "-c",
            str(ck),
            "--",
            str(prog),
            str(gib),
            "100",
        ],
        stdout=subprocess.PIPE,
        stderr=err,
        cwd=work,
    )
    try:
        head = read_until(proc, b"ready", 600)
        m = re.search(rb"memcpy d2h ([\d.]+) h2d ([\d.]+)", head)
        d2h, h2d = float(m.group(1)), float(m.group(2))
        read_until(proc, b"tick", 60)
        proc.send_signal(signal.SIGUSR2)
        deadline = time.monotonic() + 600
        line = None
        while time.monotonic() < deadline and not line:
            err.seek(0)
            line = CKPT_LINE.search(err.read().decode(errors="replace"))
            time.sleep(0.2)
        if not line:
            raise RuntimeError("no checkpoint line from crac launch -v within 600 s")
        total_s = int(line.group(4)) / 1000
        row(
            f"checkpoint of {gib} GiB device memory",
            f"{total_s:.2f} s in all, paused {int(line.group(3))} ms; cudaMemcpy d2h {d2h:.2f} s "
            f"(ratio {total_s / d2h:.2f})",
            True,
        )
        read_until(proc, b"tick", 60)
    except (RuntimeError, AttributeError) as exc:
        row(f"checkpoint of {gib} GiB device memory", f"failed: {exc}", False)
        return
    finally:
        proc.kill()
        proc.wait()
    t0 = time.monotonic()
    again = subprocess.Popen(
        [*crac(), "restart", str(ck)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=work
    )
    try:
        read_until(again, b"tick", 600)
        restart_s = time.monotonic() - t0
        again.send_signal(signal.SIGUSR1)
        checked = read_until(again, b"check", 600)
        ok = b"check ok" in checked
        row(
            f"restart of {gib} GiB device memory",
            f"{restart_s:.2f} s to the first tick; cudaMemcpy h2d {h2d:.2f} s (ratio "
            f"{restart_s / h2d:.2f}); data on the device after restart: "
            f"{'intact' if ok else 'WRONG'}",
            ok,
        )
    except RuntimeError as exc:
        row(f"restart of {gib} GiB device memory", f"failed: {exc}", False)
    finally:
        again.kill()
        again.wait()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--gib", type=int, default=8)
    ap.add_argument("--launches", type=int, default=100000)
    ap.add_argument("--out", help="keep builds and images here (default: a temporary directory)")
    ap.add_argument("--dry-run", action="store_true", help="build everything, run nothing")
    opts = ap.parse_args()
    from crac_py.launch import devices

    why = devices.cuda_backend_note()
    if why and not opts.dry_run:
        print(
            f"gpu_check: no GPU here ({why}): nothing to check; run this where an NVIDIA GPU "
            "and its driver are (crac doctor tells)",
            file=sys.stderr,
        )
        return 2
    nvcc = find_nvcc()
    if not nvcc:
        print("gpu_check: nvcc not found (CUDA_HOME, /usr/local/cuda, PATH)", file=sys.stderr)
        return 2
    try:
        runtime = devices.find_cuda_runtime("13")
    except devices.DeviceError as exc:
        print(f"gpu_check: {exc}", file=sys.stderr)
        return 2
    work = Path(opts.out or tempfile.mkdtemp(prefix="crac-gpu-check-"))
    work.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    built: dict[str, Path] = {}
    sources = sorted((REPO / "examples" / "cuda").glob("*.cu"))
    sources += sorted((REPO / "bench" / "apps").glob("gpu_*.cu"))
    for src in sources:
        try:
            built[src.stem] = build(nvcc, src, work / src.stem, runtime.parent)
        except (RuntimeError, subprocess.TimeoutExpired) as exc:
            row(f"build {src.name}", str(exc), False)
    if opts.dry_run:
        print(
            f"gpu_check: dry run: built {len(built)} of {len(sources)} programs; the GPU steps "
            "were not run",
            file=sys.stderr,
        )
        return 1 if FAILED else 0
    for name, prog in built.items():
        if not name.startswith("gpu_"):
            check_example(prog, work)
    cuda12_program(nvcc, REPO / "examples" / "cuda" / "vector_add.cu", work)
    if "gpu_launch_loop" in built:
        launch_overhead(built["gpu_launch_loop"], opts.launches, work)
    if "gpu_devmem" in built:
        device_memory(built["gpu_devmem"], opts.gib, work)
    print(
        f"\n`{' '.join(sys.argv)}` on {devices.gpu_nodes()}, {time.monotonic() - started:.0f} s\n"
    )
    print(markdown_table(["check", "result", "verdict"], ROWS))
    if FAILED:
        print(f"\ngpu_check: {len(FAILED)} failed: {'; '.join(FAILED)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
