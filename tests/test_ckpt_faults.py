"""Bad input to checkpoint/restart (docs/ARCHITECTURE.md "Restart", "Testing"): missing, truncated
and corrupted images, a wrong format version, a changed program, an unwritable checkpoint directory,
and SIGKILL in the middle of writing a checkpoint. Every refusal is exit status 2 with one `crac:
error:` line (never a traceback, a crash or death by a signal), and afterwards the previous good
generation still restarts and finishes exactly."""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import random
import re
import shutil
import signal
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

import pytest
from ckpt_harness import (
    Segment,
    assert_refused,
    base_env,
    build_ckpt_apps,
    checkpoint,
    counter_lines,
    crac_launch_argv,
    fail,
    finish_restart,
    generations,
    kill9,
    latest_complete,
    launch,
    process_dirs,
    restart,
    run_restart,
    tree,
    wait_exit,
    wait_for_step,
)

COUNTER_STEPS = 100


@pytest.fixture(scope="session")
def ckpt_apps(tmp_path_factory):
    return build_ckpt_apps(tmp_path_factory)


@dataclass
class Image:
    """A checkpoint directory with one process directory holding gen-000001 and gen-000002 of
    `ckpt_counter 100 20` (taken near its end, so a restart finishes quickly)."""

    ckptdir: Path
    procdir: Path
    gen1: Segment  # .gen is the generation; the rest describes the checkpoint for the checks
    gen2: Segment

    def copy(self, dest: Path) -> Image:
        """A private copy (tests damage theirs); symbolic links copied as links."""
        shutil.copytree(self.ckptdir, dest, symlinks=True)
        procdir = dest / self.procdir.name

        def moved(seg: Segment) -> Segment:
            gen = procdir / seg.gen.name
            return Segment(seg.label, seg.lines, seg.before_signal, seg.at_complete, gen)

        return Image(dest, procdir, moved(self.gen1), moved(self.gen2))


@pytest.fixture(scope="module")
def image(ckpt_apps, tmp_path_factory) -> Image:
    base = tmp_path_factory.mktemp("fault_image")
    ckptdir, logs = base / "ckpt", base / "logs"
    ckptdir.mkdir()
    app = ckpt_apps["ckpt_counter"]
    proc = launch(app, [COUNTER_STEPS, 20], ckptdir, out_dir=logs)
    try:
        wait_for_step(proc, 70)
        b1 = proc.last_step()
        g1 = checkpoint(proc, ckptdir)
        a1 = proc.last_step()
        wait_for_step(proc, a1 + 2)
        b2 = proc.last_step()
        g2 = checkpoint(proc, ckptdir)
        a2 = proc.last_step()
        wait_for_step(proc, a2 + 2)
        kill9(proc)
    finally:
        proc.stop()
    lines = proc.lines()
    assert [g.name for g in generations(g2.parent)] == ["gen-000001", "gen-000002"]
    return Image(
        ckptdir,
        g2.parent,
        Segment("launch", lines, b1, a1, g1),
        Segment("launch", lines, b2, a2, g2),
    )


def good_restart(img: Image, logs: Path, label: str) -> None:
    """The previous good generation (gen-000001) restarts and finishes exactly."""
    finish_restart(img.gen1.gen, counter_lines(COUNTER_STEPS), img.gen1, out_dir=logs, label=label)


def refused(path: Path | str, what: str, *opts: str) -> str:
    return assert_refused(run_restart(path, *opts), what)


# ---------------------------------------------------------------------------------------------
# Missing pieces


def test_missing_paths(image, tmp_path):
    img = image.copy(tmp_path / "ckpt")
    empty = tmp_path / "empty"
    empty.mkdir()
    a_file = tmp_path / "a_file"
    a_file.write_text("not a checkpoint\n")
    refused(tmp_path / "does-not-exist", "a path that does not exist")
    refused(empty, "an empty directory")
    refused(a_file, "a regular file")

    good_restart(img, tmp_path / "logs", "good-after-paths")


@pytest.mark.parametrize("missing", ["MANIFEST.json", "upper.core", "generation"])
def test_missing_parts(image, tmp_path, missing):
    """A generation without its manifest or core, or `latest` naming a deleted generation."""
    img = image.copy(tmp_path / "ckpt")
    gen2 = img.gen2.gen
    if missing == "generation":
        shutil.rmtree(gen2)
        refused(img.procdir / "latest", "a dangling latest link")
        refused(img.procdir, "a process directory whose latest generation is gone")
    else:
        (gen2 / missing).unlink()
        refused(gen2, f"a generation without {missing}")
        refused(img.procdir, f"a process directory whose latest generation lacks {missing}")
    good_restart(img, tmp_path / "logs", "good")


# ---------------------------------------------------------------------------------------------
# Truncated and corrupted files


def sizes_below(size: int) -> list[int]:
    return sorted(
        {s for s in (0, 1, 52, 64, 4095, 4096, size // 2, size - 4096, size - 1) if 0 <= s < size}
    )


@pytest.mark.parametrize("name", ["upper.core", "MANIFEST.json"])
def test_truncated(image, tmp_path, name):
    img = image.copy(tmp_path / "ckpt")
    victim = img.gen2.gen / name
    pristine = image.gen2.gen / name
    for n, size in enumerate(sizes_below(victim.stat().st_size)):
        os.truncate(victim, size)
        refused(img.gen2.gen, f"{name} truncated to {size} bytes")
        shutil.copyfile(pristine, victim)
        good_restart(img, tmp_path / "logs", f"good-{n}")


def flip_bit(path: Path, offset: int, bit: int) -> None:
    with path.open("r+b") as fh:
        fh.seek(offset)
        byte = fh.read(1)[0]
        fh.seek(offset)
        fh.write(bytes([byte ^ (1 << bit)]))


def test_bit_flips(image, tmp_path):
    """30 seeded trials: one bit flipped at a random offset of one file of the generation
    (every file in turn: MANIFEST.json, upper.core, files/*)."""
    img = image.copy(tmp_path / "ckpt")
    gen2 = img.gen2.gen
    files = sorted(p for p in gen2.rglob("*") if p.is_file() and p.stat().st_size > 0)
    assert {"MANIFEST.json", "upper.core"} <= {p.name for p in files}, tree(gen2)
    rng = random.Random(0xC0FFEE)
    for trial in range(30):
        victim = files[trial % len(files)]
        offset = rng.randrange(victim.stat().st_size)
        bit = rng.randrange(8)
        rel = victim.relative_to(gen2)
        flip_bit(victim, offset, bit)
        try:
            refused(gen2, f"trial {trial}: bit {bit} of byte {offset} of {rel} flipped")
        finally:
            flip_bit(victim, offset, bit)
        good_restart(img, tmp_path / "logs", f"good-{trial}")


def version_key(manifest: dict) -> str:
    keys = [k for k in manifest if "format" in k.lower() and "version" in k.lower()]
    keys = keys or [k for k in manifest if k.lower() in ("version", "image_version")]
    assert len(keys) == 1, f"cannot tell the format version key of MANIFEST.json: {list(manifest)}"
    return keys[0]


def resign(raw: bytes) -> bytes:
    """Recomputes a `manifest_sha256` self-checksum (SHA-256 of the file with the digest replaced
    by 64 zeros) if the manifest has one, so that only the version is wrong."""
    m = re.search(rb'"manifest_sha256"\s*:\s*"([0-9a-f]{64})"', raw)
    if not m:
        return raw
    zeroed = raw[: m.start(1)] + b"0" * 64 + raw[m.end(1) :]
    digest = hashlib.sha256(zeroed).hexdigest().encode()
    return raw[: m.start(1)] + digest + raw[m.end(1) :]


@pytest.mark.parametrize("value", [999, 0])
def test_wrong_format_version(image, tmp_path, value):
    """An image of another format version (e.g. written by a newer crac) is refused, naming the
    version, whether or not the manifest's own checksum still holds."""
    import json

    img = image.copy(tmp_path / "ckpt")
    path = img.gen2.gen / "MANIFEST.json"
    raw = path.read_bytes()
    key = version_key(json.loads(raw))
    pattern = rb'("' + re.escape(key.encode()) + rb'"\s*:\s*)("?)[^,}\n"]*("?)'
    changed, n = re.subn(pattern, rb"\g<1>\g<2>" + str(value).encode() + rb"\g<3>", raw, count=1)
    assert n == 1 and changed != raw
    path.write_bytes(resign(changed))
    line = refused(img.gen2.gen, f"format version {value}")
    assert re.search(r"version|format", line, re.I), (
        f"the message does not name the version: {line}"
    )
    path.write_bytes(changed)
    refused(img.gen2.gen, f"format version {value}, manifest checksum not updated")
    good_restart(img, tmp_path / "logs", "good")


# ---------------------------------------------------------------------------------------------
# The program changed


def test_changed_program(ckpt_apps, tmp_path):
    """The program binary changed after the checkpoint (a byte, or appended data) or is gone:
    refused (--force: restarted or refused, never a crash); with the very same file back the
    image restarts normally."""
    bindir, ckptdir, logs = tmp_path / "bin", tmp_path / "ckpt", tmp_path / "logs"
    bindir.mkdir()
    ckptdir.mkdir()
    app = bindir / "ckpt_counter_copy"
    shutil.copy2(ckpt_apps["ckpt_counter"], app)
    original = app.read_bytes()
    original_times = (app.stat().st_atime_ns, app.stat().st_mtime_ns)
    proc = launch(app, [COUNTER_STEPS, 20], ckptdir, out_dir=logs)
    try:
        wait_for_step(proc, 70)
        before = proc.last_step()
        gen = checkpoint(proc, ckptdir)
        at = proc.last_step()
        wait_for_step(proc, at + 2)
        kill9(proc)
    finally:
        proc.stop()
    seg = Segment("launch", proc.lines(), before, at, gen)
    expected = counter_lines(COUNTER_STEPS)

    data = bytearray(original)
    data[len(data) // 2] ^= 0x01
    app.write_bytes(bytes(data))
    refused(gen, "a byte of the program changed")
    app.write_bytes(original + b"\0appended")
    refused(gen, "data appended to the program")
    # --force may restart it (the code the program runs is in the image) or still refuse
    # cleanly; it must never crash.
    forced = run_restart(gen, "--force", timeout=120)
    if forced.returncode != 0:
        assert_refused(forced, "--force with data appended to the program")
    # the same file, bytes and modification time as at the checkpoint again
    app.write_bytes(original)
    os.utime(app, ns=original_times)
    moved = bindir / "moved-away"
    app.rename(moved)
    refused(gen, "the program is gone")
    moved.rename(app)
    finish_restart(gen, expected, seg, out_dir=logs, label="restored")


def test_program_changed_between_checkpoints_gets_its_new_digest(ckpt_apps, tmp_path):
    """The loader hashes the program once and remembers it while the file stays the same: data
    appended to the program file between two checkpoints (the same file, a new size and
    modification time) gives the second generation the new file's digest, not the first's."""
    bindir, ckptdir, logs = tmp_path / "bin", tmp_path / "ckpt", tmp_path / "logs"
    bindir.mkdir()
    app = bindir / "ckpt_counter_copy"
    shutil.copy2(ckpt_apps["ckpt_counter"], app)
    original = app.read_bytes()
    proc = launch(app, [COUNTER_STEPS, 20], ckptdir, out_dir=logs)
    try:
        wait_for_step(proc, 5)
        first = checkpoint(proc, ckptdir)
        with app.open("ab") as f:  # the running code is not touched
            f.write(b"\0appended")
        second = checkpoint(proc, ckptdir)
    finally:
        proc.stop()

    def digest_of(gen: Path) -> str:
        return json.loads((gen / "MANIFEST.json").read_text())["process"]["program_sha256"]

    assert digest_of(first) == hashlib.sha256(original).hexdigest()
    assert digest_of(second) == hashlib.sha256(app.read_bytes()).hexdigest()


# ---------------------------------------------------------------------------------------------
# Unwritable checkpoint directories (the tests run as root, which ignores permission bits)


@contextlib.contextmanager
def unwritable(path: Path):
    """PATH (a directory) made unwritable for this user: mode 0500, or for root (who ignores
    modes) the immutable attribute; skips the test where neither works."""
    if os.geteuid() != 0:
        path.chmod(0o500)
        try:
            yield
        finally:
            path.chmod(0o700)
        return
    chattr = shutil.which("chattr")
    if chattr is None:
        pytest.skip("running as root without chattr: cannot make a directory unwritable")
    res = subprocess.run([chattr, "+i", str(path)], capture_output=True, text=True, timeout=30)
    if res.returncode != 0:
        pytest.skip(f"root cannot make a directory unwritable here: {res.stderr.strip()}")
    try:
        probe = path / "probe"
        try:
            probe.mkdir()
        except OSError:
            pass
        else:
            probe.rmdir()
            pytest.skip("chattr +i does not stop root writing here")
        yield
    finally:
        subprocess.run([chattr, "-i", str(path)], capture_output=True, timeout=30)


@pytest.mark.parametrize("form", ["regular-file", "under-a-file", "proc", "unwritable"])
def test_launch_unwritable_ckpt_dir(ckpt_apps, tmp_path, form):
    """`crac launch -c DIR` where no checkpoint can ever be written: refused before the program
    starts."""
    a_file = tmp_path / "a_file"
    a_file.write_text("x\n")
    ro = tmp_path / "ro"
    ro.mkdir()
    target = {
        "regular-file": a_file,
        "under-a-file": a_file / "sub",
        "proc": Path("/proc/crac-test-ckpt-dir"),
        "unwritable": ro,
    }[form]
    argv = crac_launch_argv(ckpt_apps["ckpt_counter"], ["5", "1"], target)
    ctx = unwritable(ro) if form == "unwritable" else contextlib.nullcontext()
    with ctx:
        cp = subprocess.run(
            argv,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            env=base_env(),
            cwd=tmp_path,
            timeout=60,
        )
    assert_refused(cp, f"checkpoint directory: {form}")
    assert b"step" not in cp.stdout, "the program ran"


def test_checkpoint_into_unwritable_dir(ckpt_apps, tmp_path):
    """A checkpoint that cannot be written (the process directory became unwritable) is given
    up: the program runs on undisturbed to its normal end, `latest` still names the previous
    generation, and that generation restarts."""
    ckptdir, logs = tmp_path / "ckpt", tmp_path / "logs"
    ckptdir.mkdir()
    steps = 150
    proc = launch(ckpt_apps["ckpt_counter"], [steps, 20], ckptdir, out_dir=logs)
    try:
        wait_for_step(proc, 20)
        before = proc.last_step()
        gen1 = checkpoint(proc, ckptdir)
        at = proc.last_step()
        (procdir,) = process_dirs(ckptdir)
        with unwritable(procdir):
            wait_for_step(proc, at + 2)
            os.kill(proc.pid, signal.SIGUSR2)
            status = wait_exit(proc)
            listing = tree(ckptdir)
    finally:
        proc.stop()
    if status != 0:
        fail(f"the program ended with status {status} after a failed checkpoint", proc)
    assert proc.lines() == counter_lines(steps), "the program's output was disturbed"
    assert latest_complete(procdir) == gen1, listing
    assert [g.name for g in generations(procdir)] == ["gen-000001"], listing
    seg = Segment("launch", proc.lines(), before, at, gen1)
    finish_restart(procdir, counter_lines(steps), seg, out_dir=logs, label="restart")


def test_restart_into_unwritable_dir(image, tmp_path):
    """`crac restart` of an image whose process directory (where the restarted program's next
    checkpoints go) is not writable: refused, and fine again once it is writable."""
    img = image.copy(tmp_path / "ckpt")
    with unwritable(img.procdir):
        refused(img.gen1.gen, "an unwritable process directory")
    good_restart(img, tmp_path / "logs", "good")


# ---------------------------------------------------------------------------------------------
# SIGKILL while a checkpoint is being written


def test_kill_during_checkpoint(ckpt_apps, tmp_path):
    """20 seeded trials: checkpoint signal, SIGKILL after a random delay within the time a whole
    checkpoint takes (the image holds ~200 MiB of written memory), then `crac restart latest`:
    `latest` always names a complete generation, and the restarted program (which re-checks
    all its memory after a restart) runs on."""
    ckptdir, logs = tmp_path / "ckpt", tmp_path / "logs"
    ckptdir.mkdir()
    # runs until killed: 192 MiB of patterned memory, a 64 MiB sparse region, 20 ms steps
    args = [1000000, 192, 20, 64]
    rng = random.Random(20)
    proc = launch(ckpt_apps["ckpt_sparse"], args, ckptdir, out_dir=logs)
    try:
        wait_for_step(proc, 3)
        t0 = time.monotonic()
        checkpoint(proc, ckptdir)
        full = time.monotonic() - t0
        (procdir,) = process_dirs(ckptdir)
        for trial in range(20):
            wait_for_step(proc, proc.last_step() + 1)
            os.kill(proc.pid, signal.SIGUSR2)
            time.sleep(rng.uniform(0, 1.2 * full))
            kill9(proc)
            printed = proc.last_step()
            latest = latest_complete(procdir)
            if latest is None:
                pytest.fail(
                    f"trial {trial}: `latest` names no complete generation\n{tree(ckptdir)}"
                )
            proc = restart(procdir / "latest", out_dir=logs, label=f"restart{trial}")
            wait_for_step(proc, 1)
            first = proc.steps()[0]
            assert first <= printed + 1, (
                f"trial {trial}: restarted at step {first}, but the killed process had only "
                f"printed up to {printed}"
            )
            wait_for_step(proc, first + 1)
    finally:
        proc.stop()
