"""The image trust model (docs/TRUST.md): every attack on `crac restart`, `inspect` and `verify`
that the fuzzer or a person found, as a regression test. Each one is refused cleanly: exit
status 2, one `crac: error:` line, no crash, no hang, and `crac verify` never calls it VALID.

The image is tests/apps/fuzz_seed.c (a thread, an input file read-only, an output file,
/dev/null, a pipe) checkpointed at step 20; attacks that change the header of upper.core
recompute every checksum (bench/fuzz_image.py's write_case), so only the structure is wrong."""

from __future__ import annotations

import json
import os
import shutil
import stat
import struct
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest
from ckpt_harness import (
    assert_refused,
    base_env,
    checkpoint,
    kill9,
    launch,
    run_restart,
    wait_for_step,
)
from conftest import APPS_DIR, CFLAGS, crac_cmd, describe

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "bench"))
import fuzz_image  # noqa: E402

STEPS = 400
TIMEOUT = 60.0


@pytest.fixture(scope="module")
def seed_app(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("trust_app") / "fuzz_seed"
    res = subprocess.run(
        ["gcc", *CFLAGS, "-o", str(out), str(APPS_DIR / "fuzz_seed.c")],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert res.returncode == 0, res.stderr
    return out


@dataclass
class Image:
    base: Path
    gen: Path
    data: Path  # the program's input and output files

    @property
    def core(self) -> Path:
        return self.gen / "upper.core"


def make_image(app: Path, base: Path) -> Image:
    ckpt, data, logs = base / "ckpt", base / "data", base / "logs"
    for d in (ckpt, data, logs):
        d.mkdir()
    proc = launch(app, [str(data), STEPS], ckpt, out_dir=logs)
    try:
        wait_for_step(proc, 20)
        gen = checkpoint(proc, ckpt)
        kill9(proc)
    finally:
        proc.stop()
    return Image(base, gen, data)


@pytest.fixture(scope="module")
def image(seed_app, tmp_path_factory) -> Image:
    return make_image(seed_app, tmp_path_factory.mktemp("trust_image"))


@pytest.fixture
def fresh(seed_app, tmp_path) -> Image:
    """An image of its own, for attacks on the files the program uses."""
    return make_image(seed_app, tmp_path)


def copy(img: Image, dest: Path) -> Image:
    """A private copy of the checkpoint directory (sparse, links as links, modes kept)."""
    dest.mkdir()
    subprocess.run(
        ["cp", "-a", "--sparse=always", str(img.base / "ckpt"), str(dest / "ckpt")], check=True
    )
    rel = img.gen.relative_to(img.base / "ckpt")
    return Image(dest, dest / "ckpt" / rel, img.data)


def crac(*args: str, timeout: float = TIMEOUT) -> subprocess.CompletedProcess:
    return subprocess.run(
        [*crac_cmd(), *args],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        env=base_env(),
        timeout=timeout,
    )


def all_refuse(gen: Path, what: str) -> list[str]:
    """restart, inspect and verify each refuse GEN with one line; their lines."""
    lines = [assert_refused(run_restart(gen, timeout=TIMEOUT), f"restart: {what}")]
    lines.append(assert_refused(crac("inspect", str(gen)), f"inspect: {what}"))
    res = crac("verify", str(gen))
    assert res.returncode == 2 and b"VALID\n" not in res.stdout.replace(b"INVALID", b""), (
        f"verify accepted {what}\n{describe(res)}"
    )
    assert b"Traceback" not in res.stderr, describe(res)
    return lines


# ---------------------------------------------------------------------------------------------
# An image is trusted only if its owner is


@pytest.mark.parametrize(
    "target,mode",
    [("upper.core", 0o620), ("MANIFEST.json", 0o602), (".", 0o770), ("..", 0o707)],
)
def test_writable_by_others(image, tmp_path, target, mode):
    img = copy(image, tmp_path / "c")
    os.chmod(img.gen / target, mode)
    for line in all_refuse(img.gen, f"{target} mode {mode:o}"):
        assert "untrusted image" in line and "writable by others" in line, line


def test_owned_by_someone_else(image, tmp_path):
    if os.geteuid() != 0:
        pytest.skip("making a file another user's needs root")
    img = copy(image, tmp_path / "c")
    os.chown(img.core, 4242, 4242)
    for line in all_refuse(img.gen, "upper.core owned by uid 4242"):
        assert "owned by uid 4242" in line, line


def _symlink(path: Path) -> None:
    shutil.copy(path, path.with_name("elsewhere"))
    path.unlink()
    path.with_name("elsewhere").rename(path.parent.parent / "elsewhere")
    path.symlink_to(path.parent.parent / "elsewhere")


def _fifo(path: Path) -> None:
    path.unlink()
    os.mkfifo(path, 0o600)


def _device(path: Path) -> None:
    path.unlink()
    if os.geteuid() == 0:
        os.mknod(path, 0o600 | stat.S_IFCHR, os.makedev(1, 5))  # /dev/zero's numbers
    else:
        path.symlink_to("/dev/zero")


@pytest.mark.parametrize("name", ["upper.core", "MANIFEST.json"])
@pytest.mark.parametrize("make", [_symlink, _fifo, _device], ids=["symlink", "fifo", "device"])
def test_special_file_in_place_of_the_image(image, tmp_path, name, make):
    img = copy(image, tmp_path / "c")
    make(img.gen / name)
    for line in all_refuse(img.gen, f"{name}: {make.__name__}"):
        assert "untrusted image" in line and "where a regular file belongs" in line, line


# ---------------------------------------------------------------------------------------------
# Restart validates structure before it acts


def _note(seed: fuzz_image.Seed, ntype: int) -> fuzz_image.NoteLoc:
    return next(n for n in seed.notes if n.type == ntype)


def _field(rec: str, name: str) -> int:
    return fuzz_image.fmt.RECORD[rec].offsets[name]


NT_PROCESS, NT_REGIONS, NT_THREADS, NT_FDS, NT_TIMERS = (
    0x43520001,
    0x43520002,
    0x43520003,
    0x43520004,
    0x43520006,
)


def region_outside_w(seed, h):
    at = _note(seed, NT_REGIONS).desc
    struct.pack_into("<QQ", h, at + _field("crac_region_rec", "start"), 0x400000, 0x401000)


def region_over_loader(seed, h):
    # the second region moved onto the first: overlapping maps would replace each other
    regs = fuzz_image._records(seed, _note(seed, NT_REGIONS))
    first = struct.unpack_from("<Q", h, regs[0] + _field("crac_region_rec", "start"))[0]
    struct.pack_into("<Q", h, regs[1] + _field("crac_region_rec", "start"), first)


def thread_pointer(seed, h):
    at = _note(seed, NT_THREADS).desc + _field("crac_thread_note", "rec")
    struct.pack_into("<Q", h, at, 0x1000)


def thread_pointer_unmapped_w(seed, h):
    at = _note(seed, NT_THREADS).desc + _field("crac_thread_note", "rec")
    struct.pack_into("<Q", h, at, 0x2FFF00000000)


def zero_threads(seed, h):
    struct.pack_into("<I", h, _note(seed, NT_THREADS).hdr + 4, 0)


def duplicated_thread(seed, h):
    n = _note(seed, NT_THREADS)
    h[n.desc + 24 : n.desc + 48] = h[n.desc : n.desc + 24]


def registry_pointer(seed, h):
    at = _note(seed, NT_PROCESS).desc + _field("crac_process_rec", "registry")
    struct.pack_into("<Q", h, at, 0x2FFF00000000)


def timer_count(seed, h):
    at = _note(seed, NT_TIMERS).desc + _field("crac_timers_rec", "n_posix")
    struct.pack_into("<I", h, at, 0x7FFFFFF0)


def region_size_hides_next(seed, h):
    at = _note(seed, NT_REGIONS).desc
    size = struct.unpack_from("<I", h, at)[0]
    struct.pack_into("<I", h, at, size + 8)


def region_start_moved(seed, h):
    """One page more at the front of a region after a gap: the saved pages would land a page
    too low (found by the fuzzer: a segfault once the program ran)."""
    regs = fuzz_image._records(seed, _note(seed, NT_REGIONS))
    start_at = _field("crac_region_rec", "start")
    for prev, cur in zip(regs, regs[1:], strict=False):
        prev_end = struct.unpack_from("<Q", h, prev + start_at + 8)[0]
        start = struct.unpack_from("<Q", h, cur + start_at)[0]
        if start - 4096 >= prev_end:
            struct.pack_into("<Q", h, cur + start_at, start - 4096)
            return
    raise AssertionError("no region after a gap")


def duplicate_note(seed, h):
    struct.pack_into("<I", h, _note(seed, NT_TIMERS).hdr + 8, NT_FDS)


NT_SECCOMP = 0x43520022  # the seed installs one filter of its own (tests/apps/fuzz_seed.c)


def seccomp_filter_count(seed, h):
    struct.pack_into("<I", h, _note(seed, NT_SECCOMP).desc, 65)


def seccomp_filter_without_instructions(seed, h):
    at = _note(seed, NT_SECCOMP).desc + fuzz_image.fmt.RECORD["crac_seccomp_rec"].size
    struct.pack_into("<I", h, at + _field("crac_seccomp_filter_rec", "n_insns"), 0)


def seccomp_thread_names_missing_filter(seed, h):
    note = _note(seed, NT_SECCOMP)
    rec = fuzz_image.fmt.RECORD["crac_seccomp_thread_rec"]
    at = note.desc + note.size - rec.size + _field("crac_seccomp_thread_rec", "filters")
    struct.pack_into("<Q", h, at, 0b10)


ATTACKS: list[Callable[[fuzz_image.Seed, bytearray], None]] = [
    region_outside_w,
    region_over_loader,
    thread_pointer,
    thread_pointer_unmapped_w,
    zero_threads,
    duplicated_thread,
    registry_pointer,
    timer_count,
    region_size_hides_next,
    region_start_moved,
    duplicate_note,
    seccomp_filter_count,
    seccomp_filter_without_instructions,
    seccomp_thread_names_missing_filter,
]


def resign(img: Image, attack: Callable[[fuzz_image.Seed, bytearray], None]) -> None:
    seed = fuzz_image.parse_seed(img.gen)
    h = bytearray(seed.header)
    attack(seed, h)
    fuzz_image.write_case(img.gen, seed, bytes(h), seed.manifest, recompute=True)


def grow_threads(img: Image, n: int) -> None:
    """Rewrites upper.core with a THREADS note of N records (the first one's copies, tids made
    distinct): the notes grow, so the region data moves by whole pages and every offset to it
    with it; then every checksum is recomputed."""
    seed = fuzz_image.parse_seed(img.gen)
    h = seed.header
    phoff, phnum = struct.unpack_from("<Q", h, 32)[0], struct.unpack_from("<H", h, 56)[0]
    note_off, note_size = (
        struct.unpack_from("<Q", h, phoff + 8)[0],
        struct.unpack_from("<Q", h, phoff + 32)[0],
    )
    old_start = len(h)
    notes = bytearray()
    off = note_off
    regions_at = -1
    while off < note_off + note_size:
        namesz, descsz, ntype = fuzz_image.NHDR.unpack_from(h, off)
        desc = off + 12 + ((namesz + 3) & ~3)
        end = desc + ((descsz + 3) & ~3)
        is_crac = h[off + 12 : off + 17] == b"CRAC\0"
        if is_crac and ntype == NT_THREADS:
            one = bytearray(h[desc : desc + 24])
            body = bytearray()
            for i in range(n):
                struct.pack_into("<i", one, 0, 1_000_000 + i)
                body += one
            notes += fuzz_image.NHDR.pack(namesz, len(body), ntype) + h[off + 12 : desc] + body
        else:
            if is_crac and ntype == NT_REGIONS:
                regions_at = len(notes) + (desc - off)
            notes += h[off:end]
        off = end
    new_start = (note_off + len(notes) + 4095) & ~4095
    delta = new_start - old_start
    head = bytearray(h[:note_off]) + notes + bytes(new_start - note_off - len(notes))
    struct.pack_into("<Q", head, phoff + 32, len(notes))
    struct.pack_into("<Q", head, phoff + 40, len(notes))
    for i in range(1, phnum):
        at = phoff + i * 56 + 8
        p_off = struct.unpack_from("<Q", head, at)[0]
        if p_off >= old_start:
            struct.pack_into("<Q", head, at, p_off + delta)
    regions = _note(seed, NT_REGIONS)
    rec = fuzz_image.fmt.RECORD["crac_region_rec"]
    r = 0
    while r + rec.size <= regions.size:
        at = note_off + regions_at + r + rec.offsets["core_offset"]
        core_off = struct.unpack_from("<Q", head, at)[0]
        if core_off:
            struct.pack_into("<Q", head, at, core_off + delta)
        r += struct.unpack_from("<I", head, note_off + regions_at + r)[0]
    old, new = img.core, img.core.with_name("upper.core.new")
    size = old.stat().st_size
    with old.open("rb") as src, new.open("wb") as dst:
        dst.write(head)
        dst.truncate(size + delta)
        pos = old_start
        while pos < size:
            try:
                data = os.lseek(src.fileno(), pos, os.SEEK_DATA)
            except OSError:
                break
            hole = os.lseek(src.fileno(), data, os.SEEK_HOLE)
            src.seek(data)
            dst.seek(data + delta)
            dst.write(src.read(hole - data))
            pos = hole
    os.chmod(new, 0o600)
    os.replace(new, old)
    manifest = json.loads(json.dumps(seed.manifest))
    manifest["upper_core"]["size"] = size + delta
    manifest["files"]["upper.core"]["size"] = size + delta
    fuzz_image.write_case(img.gen, seed, bytes(head), manifest, recompute=True)


def test_more_threads_than_supported(image, tmp_path):
    img = copy(image, tmp_path / "c")
    grow_threads(img, 4097)
    for line in all_refuse(img.gen, "4097 threads"):
        assert "more threads than crac supports" in line, line


@pytest.mark.parametrize("attack", ATTACKS, ids=[a.__name__ for a in ATTACKS])
def test_structural_attack(image, tmp_path, attack):
    img = copy(image, tmp_path / "c")
    resign(img, attack)
    for line in all_refuse(img.gen, attack.__name__):
        assert "image corrupted" in line, line


# ---------------------------------------------------------------------------------------------
# Restoring files never reaches beyond what the program had


def test_changed_input_refused_then_allowed(fresh):
    """The input rewritten in place, same size and mtime: only its contents' hash tells."""
    inp = fresh.data / "input"
    st = inp.stat()
    inp.write_bytes(b"INPUT\n")
    os.utime(inp, ns=(st.st_atime_ns, st.st_mtime_ns))
    line = assert_refused(run_restart(fresh.gen, timeout=TIMEOUT), "changed input")
    assert str(inp) in line and "changed since the checkpoint" in line, line
    res = run_restart(fresh.gen, "--allow-changed-files", timeout=120)
    assert res.returncode == 0, describe(res)
    assert f"DONE steps={STEPS}".encode() in res.stdout, describe(res)
    assert b"crac: warning: fd" in res.stderr and str(inp).encode() in res.stderr, describe(res)


def test_appended_input_reads_on(fresh):
    """An input only appended to since the checkpoint (a log): the restart goes on, saying so."""
    with (fresh.data / "input").open("a") as fh:
        fh.write("more\n")
    res = run_restart(fresh.gen, timeout=120)
    assert res.returncode == 0, describe(res)
    assert f"DONE steps={STEPS}".encode() in res.stdout, describe(res)
    assert b"was appended to since the checkpoint" in res.stderr, describe(res)


def test_grown_input_with_other_contents_refused(fresh):
    """Longer, and what the checkpoint hashed is not what it holds now: refused."""
    (fresh.data / "input").write_bytes(b"OTHER\nmore\n")
    line = assert_refused(run_restart(fresh.gen, timeout=TIMEOUT), "grown input")
    assert "its size changed" in line, line


def test_input_replaced_by_symlink(fresh, tmp_path):
    """Even told to accept changed files, a link in place of the program's file is not followed."""
    inp = fresh.data / "input"
    target = tmp_path / "someone-elses"
    target.write_bytes(inp.read_bytes())
    inp.unlink()
    inp.symlink_to(target)
    line = assert_refused(
        run_restart(fresh.gen, "--allow-changed-files", timeout=TIMEOUT), "symlinked input"
    )
    assert "symbolic link" in line and str(inp) in line, line


def test_input_replaced_by_fifo(fresh):
    inp = fresh.data / "input"
    inp.unlink()
    os.mkfifo(inp, 0o600)
    line = assert_refused(
        run_restart(fresh.gen, "--allow-changed-files", timeout=TIMEOUT), "fifo input"
    )
    assert "no longer a regular file" in line, line


def test_device_fd_refused(image, tmp_path):
    """A device other than the harmless ones (here /dev/kmsg in place of /dev/null) is not
    opened."""
    img = copy(image, tmp_path / "c")

    def to_kmsg(seed, h):
        char = fuzz_image.fmt.ENUM["crac_fd_kind"].value("CRAC_FD_CHAR")
        size = fuzz_image.fmt.RECORD["crac_fd_rec"].size
        recs = fuzz_image._records(seed, _note(seed, NT_FDS))
        at = next(r for r in recs if struct.unpack_from("<I", h, r + 4)[0] == char) + size
        assert h[at : at + 10] == b"/dev/null\0"
        h[at : at + 10] = b"/dev/kmsg\0"

    resign(img, to_kmsg)
    line = assert_refused(run_restart(img.gen, timeout=TIMEOUT), "device fd")
    assert "/dev/kmsg is a device crac does not reopen" in line, line


def test_untouched_image_restarts(image, tmp_path):
    """The checks refuse nothing of a good image: it restarts and the program finishes."""
    img = copy(image, tmp_path / "c")
    res = crac("verify", str(img.gen))
    assert res.returncode == 0, describe(res)
    res = run_restart(img.gen, timeout=120)
    assert res.returncode == 0 and f"DONE steps={STEPS}".encode() in res.stdout, describe(res)


# ---------------------------------------------------------------------------------------------
# The program's own protections survive a restart


def test_prctl_state_survives(tmp_path):
    """Undumpable, no_new_privs, child subreaper and timer slack, set by the program, hold after
    two restarts (the program checks them at every step)."""
    from ckpt_harness import run_cycles

    exe = tmp_path / "ckpt_prctl"
    res = subprocess.run(
        ["gcc", *CFLAGS, "-o", str(exe), str(APPS_DIR / "ckpt_prctl.c")],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert res.returncode == 0, res.stderr
    run_cycles(exe, [], tmp_path, cycles=2)
