"""Device state on the sim: checkpoint and restart of a program holding SIZE MiB of
device memory vs a plain write (+fsync) and a read of the same bytes, side by side in one run;
and the image of a program before and after 1,000,000 kernel launches (the registry must not
grow). Prints a markdown table and the command; never asserts on time.

    python bench/device.py [--size-mib 2048] [--reps 3] [--launches 1000000] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))
from _common import prefault_and_free  # noqa: E402

from crac_py.codegen import sim_toolchain  # noqa: E402


def crac() -> list[str]:
    script = Path(sys.executable).parent / "crac"
    return [str(script)] if script.is_file() else [sys.executable, "-m", "crac_py"]


def wait_line(proc: subprocess.Popen, prefix: str, timeout: float = 300) -> float:
    deadline = time.monotonic() + timeout
    assert proc.stdout is not None
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        if line.startswith(prefix):
            return time.monotonic()
        if not line and proc.poll() is not None:
            break
    raise SystemExit(f"device bench: the program never printed {prefix!r}")


def wait_gen(ckpt: Path, n: int, timeout: float = 600) -> float:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        gens = [g for g in ckpt.glob("ckpt_*/gen-*") if (g / "MANIFEST.json").exists()]
        if len(gens) >= n:
            return time.monotonic()
        time.sleep(0.005)
    raise SystemExit("device bench: no checkpoint")


def allocated(path: Path) -> int:
    return sum(f.stat().st_blocks * 512 for f in path.rglob("*") if f.is_file())


def plain_write(path: Path, nbytes: int) -> float:
    block = os.urandom(64 << 20)
    t0 = time.monotonic()
    with path.open("wb") as fh:
        left = nbytes
        while left > 0:
            fh.write(block[: min(left, len(block))])
            left -= len(block)
        fh.flush()
        os.fsync(fh.fileno())
    dt = time.monotonic() - t0
    path.unlink()
    return dt


def read_files(paths: list[Path]) -> float:
    t0 = time.monotonic()
    for p in paths:
        with p.open("rb") as fh:
            while fh.read(16 << 20):
                pass
    return time.monotonic() - t0


def launch(exe: Path, ckpt: Path, *args: str) -> subprocess.Popen:
    cmd = [*crac(), "launch", "--device", "sim", "-c", str(ckpt), "--", str(exe), *args]
    return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)


def settle(size_mib: int) -> None:
    prefault_and_free((2 * size_mib + 256) << 20)


def one_rep(exe: Path, work: Path, size_mib: int) -> dict[str, float]:
    ckpt = work / "ckpt"
    ckpt.mkdir()
    proc = launch(exe, ckpt, str(size_mib))
    wait_line(proc, "ready")
    settle(size_mib)
    t0 = time.monotonic()
    os.kill(proc.pid, signal.SIGUSR2)
    ckpt_s = wait_gen(ckpt, 1) - t0
    proc.kill()
    proc.wait()
    (gen,) = list(ckpt.glob("ckpt_*/gen-*"))
    image = [gen / "upper.core", gen / "device.img"]
    settle(size_mib)
    plain_s = plain_write(work / "plain", size_mib << 20)
    read_s = read_files(image)
    settle(size_mib)
    t0 = time.monotonic()
    rp = subprocess.Popen(
        [*crac(), "restart", str(ckpt)],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    restart_s = wait_line(rp, "tick") - t0
    rp.kill()
    rp.wait()
    rec = {
        "checkpoint_s": ckpt_s,
        "plain_write_s": plain_s,
        "restart_s": restart_s,
        "read_s": read_s,
        "device_img_bytes": float((gen / "device.img").stat().st_blocks * 512),
        "image_bytes": float(allocated(gen)),
    }
    subprocess.run(["rm", "-rf", str(ckpt)], check=False)
    return rec


def registry_growth(exe: Path, work: Path, launches: int) -> dict[str, float]:
    sizes = {}
    for n in (0, launches):
        ckpt = work / f"reg-{n}"
        ckpt.mkdir()
        proc = launch(exe, ckpt, "16", str(n))
        wait_line(proc, "ready", timeout=1800)
        os.kill(proc.pid, signal.SIGUSR2)
        wait_gen(ckpt, 1)
        proc.kill()
        proc.wait()
        (gen,) = list(ckpt.glob("ckpt_*/gen-*"))
        sizes[n] = float(allocated(gen))
        sizes[f"manifest_{n}"] = json.loads((gen / "MANIFEST.json").read_text())["device"]
    return sizes


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size-mib", type=int, default=2048)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--launches", type=int, default=1_000_000)
    ap.add_argument("--json", action="store_true")
    opts = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="crac-bench-device-", dir="/tmp") as tmp:
        work = Path(tmp)
        exe = sim_toolchain.build(REPO / "bench" / "apps" / "devmem.c", work / "devmem", ("-lm",))
        recs = []
        for rep in range(opts.reps):
            rep_dir = work / f"rep{rep}"
            rep_dir.mkdir()
            recs.append(one_rep(exe, rep_dir, opts.size_mib))
        reg = registry_growth(exe, work, opts.launches)
    med = {k: statistics.median(r[k] for r in recs) for k in recs[0]}
    if opts.json:
        print(json.dumps({"reps": recs, "median": med, "registry": reg}, indent=2, default=str))
        return 0
    print(
        f"Device memory on the sim: {opts.size_mib} MiB, {opts.reps} reps, medians; before each "
        f"timed step: sync, {2 * opts.size_mib + 256} MiB of MADV_HUGEPAGE memory touched and "
        "freed (bench/_common.py prefault_and_free)\n"
    )
    print("| measure | crac | baseline | ratio |")
    print("|---|---|---|---|")
    print(
        f"| checkpoint vs plain write+fsync | {med['checkpoint_s']:.3f} s | "
        f"{med['plain_write_s']:.3f} s | {med['plain_write_s'] / med['checkpoint_s']:.2f} |"
    )
    print(
        f"| restart (to first output) vs read of the image | {med['restart_s']:.3f} s | "
        f"{med['read_s']:.3f} s | {med['restart_s'] / med['read_s']:.2f} |"
    )
    print(
        f"\ndevice.img on disk: {med['device_img_bytes'] / 2**20:.1f} MiB; whole image "
        f"{med['image_bytes'] / 2**20:.1f} MiB"
    )
    print(
        f"\nimage after 0 launches: {reg[0] / 2**20:.2f} MiB, after {opts.launches} launches: "
        f"{reg[opts.launches] / 2**20:.2f} MiB; device state {reg[f'manifest_{opts.launches}']}"
    )
    print(
        f"\ncommand: `python bench/device.py --size-mib {opts.size_mib} --reps {opts.reps} "
        f"--launches {opts.launches}`"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
