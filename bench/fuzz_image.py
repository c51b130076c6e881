"""Structure-aware fuzzer of crac images (docs/TRUST.md, "Fuzzing").

Takes one good generation (a seed; made here from tests/apps/ckpt_counter.c unless --seed names
one), and for each case changes one structural thing of it: a field of a crac note's record
(regions, threads, fds, the process, timers, pending and seccomp counts), a note's header, or a
key of MANIFEST.json; then recomputes every checksum (upper.core's header CRC-32C and page
digest, the manifest's own SHA-256), so only the structure is tested, not the checksums. Each
case is run through what reads images:

* `crac-loader --check-image` (the structural checks restart and verify share);
* when that passes, the restart itself (the loader run by hand, as `crac restart` runs it), until
  the restarted program prints a line (it is back: killed then) or exits;
* `crac verify` and `crac inspect` in this process (their Python code), for every case that
  changed the manifest and every tenth other one.

A crash is a death by a signal of crac-loader or a Python exception other than crac's ImageError;
a hang is a timeout. Both must be zero. Semantic contents the program itself chose (signal masks
and handlers, timer values, limits, memory protections) are not mutated: an image with a
different but well-formed value there restarts a different, valid program.

    python bench/fuzz_image.py [-n 10000] [-j JOBS] [--seed-image GEN] [--rng 1] [--start K]
                               [--compress none|lz4|zstd]
                               [--json]

Case i is the same mutation in every run with the same --rng: `--start K -n N` runs cases
K..K+N-1, so a long run can be split into parts that add up to it.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import signal
import struct
import subprocess
import sys
import tempfile
import time
import traceback
from collections import Counter
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from _common import APPS_DIR, CFLAGS, _import_crac_py

_import_crac_py()
from crac_py import paths  # noqa: E402
from crac_py.image import digest, trust  # noqa: E402
from crac_py.image import format as fmt  # noqa: E402
from crac_py.image import generation as image  # noqa: E402

CHECK_TIMEOUT_S = 20.0
RESTART_TIMEOUT_S = 30.0
W_START, W_END, D_START, D_END = (
    0x2000_0000_0000,
    0x3000_0000_0000,
    0x3000_0000_0000,
    0x3400_0000_0000,
)
NHDR = struct.Struct("<III")

# Fields that describe structure (sizes, counts, addresses, offsets, kinds, numbers, lengths).
# Not file_offset: where a mapping starts in its (unchanged) file is the memory's content, as
# its bytes are; only the image's checksums can protect it (docs/TRUST.md, "Fuzzing").
STRUCTURAL: dict[str, tuple[str, ...]] = {
    "crac_process_rec": ("format", "registry", "w_start", "w_end", "d_start", "d_end",
                         "ckpt_signal", "cwd_len"),
    "crac_region_rec": ("size", "kind", "start", "end", "flags", "core_offset",
                        "path_len", "bitmap_bytes", "saved_pages"),
    "crac_thread_note": ("tid", "is_main", "rec"),
    "crac_fd_rec": ("size", "kind", "fd", "size_at_ckpt", "saved", "unlinked", "path_len",
                    "pos", "ino"),
    "crac_timers_rec": ("n_posix",),
    "crac_pending_rec": ("n_threads",),
    "crac_seccomp_rec": ("n_filters", "n_threads"),
}  # fmt: skip
NOTE_RECORD = {
    0x43520001: ("crac_process_rec", False),
    0x43520002: ("crac_region_rec", True),  # sized records (`size` field)
    0x43520003: ("crac_thread_note", False),
    0x43520004: ("crac_fd_rec", True),
    0x43520006: ("crac_timers_rec", False),
    0x43520007: ("crac_pending_rec", False),
    0x43520022: ("crac_seccomp_rec", False),
}


@dataclass
class NoteLoc:
    type: int
    hdr: int  # offset of its Elf64_Nhdr in the header
    desc: int  # offset of its descriptor
    size: int


@dataclass
class Seed:
    gen: Path
    header: bytes  # upper.core [0, data_start)
    notes: list[NoteLoc]
    manifest: dict
    argv: list[str]


def parse_seed(gen: Path) -> Seed:
    core = gen / image.CORE
    raw = core.open("rb").read(1 << 20)
    phoff, phnum = struct.unpack_from("<Q", raw, 32)[0], struct.unpack_from("<H", raw, 56)[0]
    p_offset, p_filesz = (
        struct.unpack_from("<QQ", raw, phoff + 8)[0],
        struct.unpack_from("<Q", raw, phoff + 32)[0],
    )
    assert phnum >= 1
    data_start = (p_offset + p_filesz + 4095) & ~4095
    with core.open("rb") as fh:
        header = fh.read(data_start)
    notes, off = [], p_offset
    while off + 12 <= p_offset + p_filesz:
        namesz, descsz, ntype = NHDR.unpack_from(header, off)
        desc = off + 12 + ((namesz + 3) & ~3)
        if header[off + 12 : off + 12 + namesz] == b"CRAC\0":
            notes.append(NoteLoc(ntype, off, desc, descsz))
        off = desc + ((descsz + 3) & ~3)
    manifest = image.load_manifest(gen)
    return Seed(gen, header, notes, manifest, [str(a) for a in manifest["process"]["argv"]])


def _records(seed: Seed, note: NoteLoc) -> list[int]:
    """Offsets (in the header) of the records of NOTE that this fuzzer mutates."""
    name, sized = NOTE_RECORD[note.type]
    rec = fmt.RECORD[name]
    if not sized:
        n = max(1, note.size // rec.size) if note.type == 0x43520003 else 1
        return [note.desc + i * rec.size for i in range(n) if (i + 1) * rec.size <= note.size]
    out, off = [], 0
    while off + rec.size <= note.size:
        out.append(note.desc + off)
        size = struct.unpack_from("<I", seed.header, note.desc + off)[0]
        if size < rec.size:
            break
        off += size
    return out


def _interesting(rng: random.Random, old: int, bits: int) -> int:
    mask = (1 << bits) - 1
    choices: list[Callable[[], int]] = [
        lambda: 0,
        lambda: 1,
        lambda: mask,
        lambda: mask >> 1,
        lambda: (mask >> 1) + 1,
        lambda: old + rng.choice((-4096, -8, -1, 1, 8, 4096)),
        lambda: old ^ (1 << rng.randrange(bits)),
        lambda: rng.getrandbits(bits),
        lambda: old * 2,
        lambda: old + 4096 * rng.randrange(1, 1 << 20),
    ]
    if bits == 64:
        choices += [
            lambda: rng.choice((W_START, W_END, D_START, D_END, W_END - 4096, 0x7FFFFFFFF000)),
            lambda: rng.choice((0x400000, 0x10000, 0xFFFF800000000000)) + 4096 * rng.randrange(16),
        ]
    if bits == 32:
        choices.append(lambda: rng.choice((4096, 4097, 65536, 1 << 20, 0x7FFFFFF0)))
    return choices[rng.randrange(len(choices))]() & mask


def mutate_notes(seed: Seed, rng: random.Random) -> tuple[str, bytearray]:
    h = bytearray(seed.header)
    crac = [n for n in seed.notes if n.type in NOTE_RECORD]
    what = rng.random()
    if what < 0.12:  # a note's header: its size, type, name length
        note = rng.choice(seed.notes)
        fld = rng.randrange(3)
        name = ("n_namesz", "n_descsz", "n_type")[fld]
        old = struct.unpack_from("<I", h, note.hdr + 4 * fld)[0]
        new = (
            rng.choice([n.type for n in seed.notes])
            if fld == 2 and rng.random() < 0.5
            else _interesting(rng, old, 32)
        )
        struct.pack_into("<I", h, note.hdr + 4 * fld, new)
        return f"note {note.type:#x} {name} {old:#x} -> {new:#x}", h
    note = rng.choice(crac)
    recname = NOTE_RECORD[note.type][0]
    rec = fmt.RECORD[recname]
    at = rng.choice(_records(seed, note))
    fname = rng.choice(STRUCTURAL[recname])
    f = next(x for x in rec.fields if x.name == fname)
    code = fmt.CTYPES[f.ctype][1]
    bits = fmt.CTYPES[f.ctype][2] * 8
    off = at + rec.offsets[fname]
    if off + bits // 8 > len(h):
        return "no-op", h
    old = struct.unpack_from("<" + code.upper() if code in "iq" else "<" + code, h, off)[0]
    old &= (1 << bits) - 1
    if recname == "crac_thread_note" and fname == "rec" and rng.random() < 0.3:
        # another thread's record, or one inside it: pointers that look plausible
        new = old + rng.choice((8, 64, -128, 128, 4096, -4096))
    else:
        new = _interesting(rng, old, bits)
    struct.pack_into("<" + code.upper() if code in "iq" else "<" + code, h, off, new)
    return f"{recname}.{fname} at {at:#x}: {old:#x} -> {new:#x}", h


def _walk(obj: object, path: tuple = ()) -> list[tuple]:
    out = [path]
    if isinstance(obj, dict):
        for k, v in obj.items():
            if k != "manifest_sha256":
                out += _walk(v, (*path, k))
    elif isinstance(obj, list):
        for i, v in enumerate(obj):
            out += _walk(v, (*path, i))
    return out


def mutate_manifest(seed: Seed, rng: random.Random) -> tuple[str, dict]:
    m = json.loads(json.dumps(seed.manifest))
    path = rng.choice([p for p in _walk(m) if p])
    parent = m
    for k in path[:-1]:
        parent = parent[k]
    key = path[-1]
    values = [None, 0, -1, 2**64, "", "x" * 5000, [], {}, True, 1.5, "../../etc/passwd",
              "/dev/zero", {"a": 1}, [1, 2]]  # fmt: skip
    if rng.random() < 0.2 and isinstance(parent, dict):
        del parent[key]
        return f"manifest: removed {'.'.join(map(str, path))}", m
    new = rng.choice(values)
    parent[key] = new
    return f"manifest: {'.'.join(map(str, path))} = {json.dumps(new)[:40]}", m


def write_case(gen: Path, seed: Seed, header: bytes, manifest: dict, recompute: bool) -> None:
    core = gen / image.CORE
    fd = os.open(core, os.O_WRONLY)
    try:
        os.pwrite(fd, header, 0)
    finally:
        os.close(fd)
    m = json.loads(json.dumps(manifest))
    if recompute:
        m["upper_core"]["header_crc32c"] = digest.crc32c(header)
        m["files"][image.CORE]["sha256_pages"] = digest.sha256_pages(core)
    m["manifest_sha256"] = "0" * 64
    raw = json.dumps(m, indent=2).encode()
    import hashlib

    sig = hashlib.sha256(raw).hexdigest().encode()
    raw = raw.replace(
        b'"manifest_sha256": "' + b"0" * 64 + b'"', b'"manifest_sha256": "' + sig + b'"'
    )
    tmp = gen / (image.MANIFEST + ".new")
    tmp.write_bytes(raw)
    os.chmod(tmp, 0o600)
    os.replace(tmp, gen / image.MANIFEST)


@dataclass
class Result:
    case: int
    what: str
    outcome: str  # refused / restarted / crash / hang / python-error / accepted
    detail: str = ""


def _clean_line(stderr: str) -> bool:
    lines = [ln for ln in stderr.splitlines() if ln.strip() and not ln.startswith("crac: warning")]
    return len(lines) == 1 and lines[0].startswith("crac: error: ")


def _run_check(loader: str, gen: Path, size: int, crc: int) -> tuple[str, str]:
    try:
        res = subprocess.run(
            [loader, "--check-image", str(gen), str(size), str(crc)],
            stdin=subprocess.DEVNULL,
            capture_output=True,
            timeout=CHECK_TIMEOUT_S,
        )
    except subprocess.TimeoutExpired:
        return "hang", "--check-image timed out"
    err = res.stderr.decode(errors="replace")
    if res.returncode < 0:
        return "crash", f"--check-image killed by signal {-res.returncode}"
    if res.returncode == 0:
        return "ok", ""
    if res.returncode == 2 and _clean_line(err):
        return "refused", err.strip()
    return "unclean", f"--check-image exit {res.returncode}: {err.strip()[:300]}"


def _loader_argv(loader: str, gen: Path, seed: Seed, size: int, crc: int) -> list[str]:
    backend = str(seed.manifest["backend"]["name"] or "none")
    return [loader, "--device", backend if backend in ("sim", "none") else "none",
            "--restart", str(gen), "--core-size", str(size), "--header-crc", str(crc),
            "--", *seed.argv]  # fmt: skip


def _run_restart(argv: list[str], work: Path) -> tuple[str, str]:
    proc = subprocess.Popen(
        argv,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        cwd=work,
        start_new_session=True,
    )
    deadline = time.monotonic() + RESTART_TIMEOUT_S
    import selectors

    sel = selectors.DefaultSelector()
    assert proc.stdout is not None and proc.stderr is not None
    sel.register(proc.stdout, selectors.EVENT_READ)
    sel.register(proc.stderr, selectors.EVENT_READ)
    back = False
    errs = b""
    while time.monotonic() < deadline and proc.poll() is None:
        for key, _ in sel.select(timeout=0.05):
            data = key.fileobj.read1(4096)  # type: ignore[union-attr]
            if key.fileobj is proc.stderr:
                errs += data
            # The program's own line (on either): it runs its own code again, the restart is done.
            back = back or (b"step " in data and (key.fileobj is proc.stdout or b"step " in errs))
        if back:
            time.sleep(0.05)  # a crash right after the restart still counts as one
            break
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        err = (errs + proc.stderr.read()).decode(errors="replace")
        if back:
            return "restarted", ""
        return "hang", f"restart timed out: {err.strip()[:200]}"
    err = (errs + proc.stderr.read()).decode(errors="replace")
    # It may have printed its line and ended before the loop above read it.
    back = back or "\nstep " in "\n" + err or b"step " in proc.stdout.read()
    rc = proc.returncode
    if rc < 0 and back:
        # After its own line: the program's code ran and died (SIGPIPE on a pipe end the image
        # no longer pairs, say): what it does with well-formed state is its own.
        return "program-died", f"signal {-rc} after the restart"
    if rc < 0:
        return "crash", f"restart killed by signal {-rc}: {err.strip()[:200]}"
    if "Traceback" in err:
        return "python-error", err.strip()[-600:]
    if rc == 2 and _clean_line(err):
        return "refused", err.strip()
    if rc == 0 or back:  # the program ran again, and ended as it chose (a check of its own)
        return "restarted", ""
    return "unclean", f"restart exit {rc}: {err.strip()[:300]}"


def _python(gen: Path) -> tuple[str, str]:
    """verify and inspect in this process: any exception but ImageError is a crash."""
    from crac_py.image import inspect as inspect_image
    from crac_py.image import verify

    try:
        verify.verify(str(gen))
        try:
            g = image.open_generation(str(gen))
            trust.check_structure(g.path, *g.core_check)
            inspect_image.describe(g)
        except image.ImageError:
            pass
    except Exception:  # noqa: BLE001 - exactly what the fuzzer looks for
        return "python-error", traceback.format_exc(limit=4)[-600:]
    return "ok", ""


_WORKER: dict = {}


def _worker_init(seed_gen: str, base: str) -> None:
    seed = parse_seed(Path(seed_gen))
    work = Path(tempfile.mkdtemp(prefix="fuzz-", dir=base))
    proc_dir = work / seed.gen.parent.name
    proc_dir.mkdir(mode=0o700)
    gen = proc_dir / seed.gen.name
    subprocess.run(["cp", "-a", "--sparse=always", str(seed.gen), str(gen)], check=True)
    _WORKER.update(seed=seed, gen=gen, work=work, loader=str(paths.loader()))


def run_case(args: tuple[int, int]) -> Result:
    case, rng_seed = args
    seed: Seed = _WORKER["seed"]
    gen: Path = _WORKER["gen"]
    loader: str = _WORKER["loader"]
    rng = random.Random(rng_seed * 1_000_003 + case)
    manifest_case = rng.random() < 0.1
    if manifest_case:
        what, manifest = mutate_manifest(seed, rng)
        header = bytearray(seed.header)
    else:
        what, header = mutate_notes(seed, rng)
        manifest = seed.manifest
    try:
        write_case(gen, seed, bytes(header), manifest, recompute=not manifest_case)
        if manifest_case:  # the Python side reads the manifest: `crac restart` itself
            crac = [sys.executable, "-m", "crac_py", "restart", "--no-coordinator", str(gen)]
            outcome, detail = _run_restart(crac, _WORKER["work"])
        else:
            m = seed.manifest["upper_core"]
            size, crc = m["size"], digest.crc32c(bytes(header))
            outcome, detail = _run_check(loader, gen, size, crc)
            if outcome == "ok":
                argv = _loader_argv(loader, gen, seed, size, crc)
                outcome, detail = _run_restart(argv, _WORKER["work"])
        if outcome not in ("crash", "hang") and (manifest_case or case % 10 == 0):
            py, pdetail = _python(gen)
            if py != "ok":
                outcome, detail = py, pdetail
        return Result(case, what, outcome, detail)
    finally:
        write_case(gen, seed, seed.header, seed.manifest, recompute=False)


def make_seed(base: Path, compress: str = "none") -> Path:
    """A generation of tests/apps/fuzz_seed.c taken at step 20 (it runs on for a long time: the
    fuzzer's restarts are ended once the program prints its next line); --compress MODE: written
    compressed (format 3), so the region records mutated point at chunk streams."""
    app = base / "fuzz_seed"
    subprocess.run(["gcc", *CFLAGS, "-o", str(app), str(APPS_DIR / "fuzz_seed.c")], check=True)
    ckpt, data = base / "seed", base / "data"
    ckpt.mkdir()
    data.mkdir()
    crac = [sys.executable, "-m", "crac_py"]
    proc = subprocess.Popen(
        [*crac, "launch", "--compress", compress, "-c", str(ckpt), "--", str(app), str(data)],
        stdout=(base / "seed.out").open("w"),
        stderr=subprocess.DEVNULL,
        cwd=base,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 60
        while "step 20\n" not in (base / "seed.out").read_text():
            if time.monotonic() > deadline or proc.poll() is not None:
                raise RuntimeError("the seed program did not reach step 20")
            time.sleep(0.05)
        os.kill(proc.pid, signal.SIGUSR2)
        while True:
            gens = [p / "latest" for p in ckpt.glob("ckpt_*")]
            if gens and (gens[0] / image.MANIFEST).exists():
                break
            if time.monotonic() > deadline:
                raise RuntimeError("the seed checkpoint did not complete")
            time.sleep(0.05)
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    return gens[0].resolve()


@dataclass
class Summary:
    cases: int = 0
    outcomes: Counter = field(default_factory=Counter)
    bad: list[Result] = field(default_factory=list)


def fuzz(n: int, jobs: int, seed_gen: Path, rng_seed: int, base: Path,
         progress: Callable[[int], None] | None = None, start: int = 0) -> Summary:  # fmt: skip
    seed = parse_seed(seed_gen)
    core = seed.manifest["upper_core"]
    outcome, detail = _run_check(str(paths.loader()), seed_gen, core["size"], core["header_crc32c"])
    if outcome != "ok":  # every case would be refused for the seed's own sake
        raise RuntimeError(f"the seed image itself does not pass: {outcome} {detail}")
    summary = Summary()
    with ProcessPoolExecutor(
        jobs, initializer=_worker_init, initargs=(str(seed_gen), str(base))
    ) as ex:
        cases = [(i, rng_seed) for i in range(start, start + n)]
        for res in ex.map(run_case, cases, chunksize=8):
            summary.cases += 1
            summary.outcomes[res.outcome] += 1
            if res.outcome in ("crash", "hang", "python-error", "unclean"):
                summary.bad.append(res)
            if progress:
                progress(summary.cases)
    return summary


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-n", type=int, default=10000, help="cases")
    ap.add_argument("-j", "--jobs", type=int, default=max(1, (os.cpu_count() or 2) // 2))
    ap.add_argument("--seed-image", type=Path, help="a generation to start from")
    ap.add_argument("--rng", type=int, default=1)
    ap.add_argument("--start", type=int, default=0, help="first case number")
    ap.add_argument("--json", action="store_true")
    ap.add_argument(
        "--compress",
        default="none",
        help="the seed's --compress (none, lz4, zstd): fuzz a compressed image's structure",
    )
    args = ap.parse_args(argv)
    base = Path(tempfile.mkdtemp(prefix="crac-fuzz-"))
    try:
        gen = args.seed_image.resolve() if args.seed_image else make_seed(base, args.compress)
        t0 = time.monotonic()

        def progress(done: int) -> None:
            if done % 500 == 0:
                print(f"fuzz_image: {done} of {args.n} cases", file=sys.stderr, flush=True)

        s = fuzz(args.n, args.jobs, gen, args.rng, base, progress, args.start)
        took = time.monotonic() - t0
    finally:
        shutil.rmtree(base, ignore_errors=True)
    report = {
        "cases": s.cases,
        "outcomes": dict(s.outcomes),
        "crashes": s.outcomes["crash"] + s.outcomes["python-error"],
        "hangs": s.outcomes["hang"],
        "unclean": s.outcomes["unclean"],
        "seconds": round(took, 1),
        "bad": [r.__dict__ for r in s.bad if r.outcome in ("crash", "hang", "python-error")][:100]
        + [r.__dict__ for r in s.bad if r.outcome == "unclean"][:20],
    }
    if args.json:
        print(json.dumps(report, indent=2))
    else:
        print(f"| cases | {' | '.join(sorted(s.outcomes))} | seconds |")
        print(f"|---|{'---|' * len(s.outcomes)}---|")
        counts = " | ".join(str(s.outcomes[k]) for k in sorted(s.outcomes))
        print(f"| {s.cases} | {counts} | {took:.0f} |")
        for r in sorted(s.bad, key=lambda r: r.outcome == "unclean")[:50]:
            print(f"case {r.case}: {r.outcome}: {r.what}: {r.detail.strip()[:300]}")
        print(
            f"command: python bench/fuzz_image.py -n {args.n} -j {args.jobs} --rng {args.rng} "
            f"--start {args.start}"
        )
    return 1 if report["crashes"] or report["hangs"] else 0


if __name__ == "__main__":
    sys.exit(main())
