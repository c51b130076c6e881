"""--compress none|lz4|zstd:1|zstd:3 side by side: checkpoint time, image size, restart time.

    nice python bench/compress.py [--sizes 256,2048] [--kinds text,sparse,random] [--reps 3]
                                  [--modes none,lz4,zstd:1,zstd:3] [--dir /var/tmp] [--json]
                                  [--baseline-crac NATIVE_DIR]

Builds bench/apps/compress_data.c: SIZE MiB of text (words of a small vocabulary), of sparse
pages (one non-zero word each: mostly zero but not zero) or of random bytes, then a tick every
20 ms. For each size and kind, REPS times, interleaved: a plain write of SIZE MiB of the same
kind of bytes with one fsync (the floor: what writing the raw pages costs), then for each mode a
fresh `crac launch --compress MODE`, SIGUSR2, timed until `latest/MANIFEST.json` exists (crac
publishes a generation only once it is on disk: the durable checkpoint), the size of upper.core,
SIGKILL, then `crac restart` timed until the restarted program's first tick (all its memory is
back by then; Python's start-up is in every mode's time alike).

`--baseline-crac NATIVE_DIR` runs every mode a second time with another build's loader (e.g.
main's `crac_py/_native`, through CRAC_NATIVE_DIR; its restart too), interleaved with this
build's: rows "MODE (baseline)", their ratio against the baseline's own `none`.

Prints medians and the ratios to `none`; never asserts on time.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _common import (
    REPO,
    BenchError,
    build_program,
    clean_env,
    crac_cmd,
    markdown_table,
    run_header,
    timed_restart,
    wait_line,
)

APP_SRC = REPO / "bench" / "apps" / "compress_data.c"
MIB = 1 << 20
TIMEOUT = 600.0


def wait_path(path: Path) -> None:
    deadline = time.monotonic() + TIMEOUT
    while not path.exists():
        if time.monotonic() > deadline:
            raise BenchError(f"{path} never appeared")
        time.sleep(0.002)


def plain_write(path: Path, kind: str, size_mib: int) -> float:
    """The same number of bytes written and fsync'd, from memory already filled."""
    text = (b"checkpoint restart the memory " * 40000)[:MIB]
    data = os.urandom(MIB) if kind == "random" else text
    t0 = time.perf_counter()
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        for _ in range(size_mib):
            os.write(fd, data)
        os.fsync(fd)
    finally:
        os.close(fd)
    t = time.perf_counter() - t0
    path.unlink()
    return t


def one(app: Path, work: Path, kind: str, size_mib: int, mode: str, native: str | None) -> dict:
    ckdir = work / f"ck-{mode.replace(':', '')}"
    shutil.rmtree(ckdir, ignore_errors=True)
    ckdir.mkdir()
    argv = [*crac_cmd(), "launch", "--compress", mode, "-c", str(ckdir), "--", str(app), kind]
    env = clean_env() | ({"CRAC_NATIVE_DIR": native} if native else {})
    p = subprocess.Popen(
        [*argv, str(size_mib)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env
    )
    try:
        wait_line(p, b"tick 2")
        t0 = time.perf_counter()
        p.send_signal(signal.SIGUSR2)
        manifest = next(iter(ckdir.glob("ckpt_*")), None)
        while manifest is None:
            time.sleep(0.002)
            manifest = next(iter(ckdir.glob("ckpt_*")), None)
        wait_path(manifest / "latest" / "MANIFEST.json")
        ckpt_s = time.perf_counter() - t0
    finally:
        p.kill()
        p.wait(timeout=60)
    core = manifest / "latest" / "upper.core"
    size = core.stat().st_blocks * 512
    restart_s = timed_restart(ckdir, f"the {mode} image", native_dir=native)
    shutil.rmtree(ckdir, ignore_errors=True)
    return {"ckpt_s": ckpt_s, "image_bytes": size, "restart_s": restart_s}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="256")
    ap.add_argument("--kinds", default="text,sparse,random")
    ap.add_argument("--modes", default="none,lz4,zstd:1,zstd:3")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--dir", default="/var/tmp")
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--baseline-crac", metavar="NATIVE_DIR")
    opts = ap.parse_args()
    modes = opts.modes.split(",")
    builds = {"": None}
    if opts.baseline_crac:
        builds[" (baseline)"] = str(Path(opts.baseline_crac).resolve())
    results: dict = {}
    try:
        with tempfile.TemporaryDirectory(prefix="crac-compress-", dir=opts.dir) as tmp:
            work = Path(tmp)
            app = build_program(APP_SRC, work)
            for size in map(int, opts.sizes.split(",")):
                for kind in opts.kinds.split(","):
                    cell: dict = {"plain_s": [], **{m + b: [] for b in builds for m in modes}}
                    for _rep in range(opts.reps):
                        cell["plain_s"].append(plain_write(work / "plain", kind, size))
                        for m in modes:
                            for b, native in builds.items():
                                cell[m + b].append(one(app, work, kind, size, m, native))
                    results[f"{size} MiB {kind}"] = cell
    except BenchError as exc:
        print(f"compress.py: {exc}", file=sys.stderr)
        return 1
    if opts.json:
        print(json.dumps(results, indent=1))
        return 0
    print(run_header(opts.reps))
    rows = []
    for name, cell in results.items():
        plain = statistics.median(cell["plain_s"])
        rows.append([name, "plain write+fsync", f"{plain:.2f}", "", "", "", ""])
        for m in (m + b for m in modes for b in builds):
            none = "none" + m[m.index(" ") :] if " " in m else "none"
            base = (
                {k: statistics.median(r[k] for r in cell[none]) for k in cell[none][0]}
                if none in cell
                else None
            )
            med = {k: statistics.median(r[k] for r in cell[m]) for k in cell[m][0]}
            ratio = f"{med['ckpt_s'] / base['ckpt_s']:.2f}" if base else ""
            shrink = f"{base['image_bytes'] / max(med['image_bytes'], 1):.1f}x" if base else ""
            rows.append([
                name, m, f"{med['ckpt_s']:.2f}", ratio,
                f"{med['image_bytes'] / MIB:.1f}", shrink, f"{med['restart_s']:.2f}",
            ])  # fmt: skip
    print(markdown_table(
        ["data", "mode", "checkpoint s", "vs none", "image MiB", "smaller", "restart s"], rows
    ))  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
