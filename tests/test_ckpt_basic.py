"""Checkpoint images and the checkpoint/restart options (docs/ARCHITECTURE.md "Checkpoint", "Image",
"Restart"): the image layout (process and generation directories, modes, `latest`, MANIFEST.json,
upper.core as an ELF core file),
--keep rotation, interval checkpoints, --exit-after-checkpoint, the CRAC_/DMTCP_ environment
spellings, the checkpoint signal, every form of the restart path, crac_restart_script.sh, sparse
images, and a checkpoint every 100 ms for about 30 s."""

from __future__ import annotations

import json
import os
import re
import signal
import stat
import sys
import time
from pathlib import Path

import pytest
from ckpt_harness import (
    CracProc,
    Segment,
    assert_same_output,
    base_env,
    build_ckpt_apps,
    check_finished,
    check_resume_point,
    check_steps_contiguous,
    checkpoint,
    complete_generations,
    counter_lines,
    fail,
    finish_restart,
    gen_number,
    generations,
    kill9,
    latest_complete,
    launch,
    native_reference,
    process_dirs,
    restart,
    stitch,
    tree,
    wait_exit,
    wait_for_step,
)
from conftest import W_END, in_w

PAGE = 4096


@pytest.fixture(scope="session")
def ckpt_apps(tmp_path_factory):
    return build_ckpt_apps(tmp_path_factory)


def dirs(tmp_path: Path) -> tuple[Path, Path, Path]:
    """(checkpoint dir, log dir, working dir) under tmp_path, created."""
    out = tmp_path / "ckpt", tmp_path / "logs", tmp_path / "cwd"
    for d in out:
        d.mkdir(parents=True, exist_ok=True)
    return out


def take_checkpoint(proc: CracProc, ckptdir: Path, sig: int = signal.SIGUSR2) -> Segment:
    """Checkpoints PROC, lets it print two more steps, SIGKILLs it; its Segment."""
    before = proc.last_step()
    gen = checkpoint(proc, ckptdir, sig=sig)
    at_complete = proc.last_step()
    wait_for_step(proc, at_complete + 2)
    kill9(proc)
    lines = proc.lines()
    check_steps_contiguous(lines, proc.label)
    return Segment(proc.label, lines, before, at_complete, gen)


def mode(path: Path) -> int:
    return stat.S_IMODE(path.lstat().st_mode)


# ---------------------------------------------------------------------------------------------
# The image


def check_core(path: Path, min_threads: int) -> None:
    """upper.core is an x86-64 ELF core file: PT_LOADs at page-aligned offsets and addresses,
    inside the file and inside W, not overlapping; a PT_NOTE with an NT_PRSTATUS per thread."""
    from elftools.elf.elffile import ELFFile

    size = path.stat().st_size
    with path.open("rb") as fh:
        elf = ELFFile(fh)
        assert elf["e_type"] == "ET_CORE", f"{path}: e_type {elf['e_type']}"
        assert elf["e_machine"] == "EM_X86_64", f"{path}: e_machine {elf['e_machine']}"
        segs = list(elf.iter_segments())
        loads = [s for s in segs if s["p_type"] == "PT_LOAD"]
        notes = [s for s in segs if s["p_type"] == "PT_NOTE"]
        assert loads, f"{path} has no PT_LOAD segment"
        for s in loads:
            where = f"{path}: PT_LOAD at {s['p_vaddr']:#x}"
            assert s["p_offset"] % PAGE == 0, f"{where}: file offset {s['p_offset']:#x}"
            assert s["p_vaddr"] % PAGE == 0, f"{where}: address not page-aligned"
            assert s["p_filesz"] <= s["p_memsz"], f"{where}: p_filesz > p_memsz"
            assert s["p_offset"] + s["p_filesz"] <= size, f"{where}: beyond the end of the file"
            assert in_w(s["p_vaddr"]) and s["p_vaddr"] + s["p_memsz"] <= W_END, (
                f"{where}: outside the window W (the program makes no MAP_FIXED mapping)"
            )
        ranges = sorted((s["p_vaddr"], s["p_vaddr"] + s["p_memsz"]) for s in loads)
        for (_, end), (start, _) in zip(ranges, ranges[1:]):
            assert end <= start, f"{path}: PT_LOAD segments overlap at {start:#x}"
        assert notes, f"{path} has no PT_NOTE segment"
        prstatus = sum(1 for s in notes for n in s.iter_notes() if n["n_type"] == "NT_PRSTATUS")
        assert prstatus >= min_threads, (
            f"{path}: {prstatus} NT_PRSTATUS notes for a program with {min_threads} threads"
        )
        # crac's notes, once each and in this order (docs/IMAGE.md; the order of
        # loader/state/kinds.c's table after process, regions and threads), with the fixed sizes
        # of the fixed-size ones: the image format does not depend on how the loader is split.
        crac = [
            (n["n_type"], n["n_descsz"])
            for s in notes
            for n in s.iter_notes()
            if n["n_name"] == "CRAC"
        ]
        # Notes added later are optional and come after these (docs/IMAGE.md).
        assert [t for t, _ in crac][:8] == list(range(0x43520001, 0x43520009)), (
            f"{path}: crac notes {[hex(t) for t, _ in crac]}"
        )
        from crac_py.image import format as image_format

        optional = {n.type for n in image_format.NOTES if n.optional}
        extra = [t for t, _ in crac][8:]
        assert len(set(extra)) == len(extra) and set(extra) <= optional, (
            f"{path}: crac notes {[hex(t) for t, _ in crac]}"
        )
        sizes = dict(crac)
        assert sizes[0x43520005] == 65 * 32, f"{path}: signals note of {sizes[0x43520005]} bytes"
        assert sizes[0x43520008] == 16 * 16, f"{path}: rlimits note of {sizes[0x43520008]} bytes"
        assert sizes[0x43520006] >= 104, f"{path}: timers note of {sizes[0x43520006]} bytes"


def test_image_layout(ckpt_apps, tmp_path):
    """ckpt_threads (main + 8 threads) checkpointed once: names, modes, link, manifest, core;
    the image then restarts and the program finishes exactly as an uninterrupted run."""
    app = ckpt_apps["ckpt_threads"]
    ref = native_reference(app, [], tmp_path / "ref_work", tmp_path / "ref_cwd")
    ckptdir, logs, cwd = dirs(tmp_path)
    proc = launch(app, [], ckptdir, out_dir=logs, cwd=cwd)
    try:
        wait_for_step(proc, 10)
        seg = take_checkpoint(proc, ckptdir)
    finally:
        proc.stop()
    gen = seg.gen
    procdir = gen.parent
    listing = tree(ckptdir)

    assert process_dirs(ckptdir) == [procdir], listing
    m = re.fullmatch(rf"ckpt_{re.escape(app.name)}_(.+)-{proc.pid}", procdir.name)
    assert m, f"process directory {procdir.name!r} is not ckpt_<prog>_<hostid>-<pid>\n{listing}"
    assert gen.name == "gen-000001", listing
    link = procdir / "latest"
    assert link.is_symlink(), f"{link} is not a symbolic link\n{listing}"
    assert link.resolve() == gen, listing

    assert mode(procdir) == 0o700, f"{procdir} has mode {mode(procdir):o}\n{listing}"
    for root, subdirs, files in os.walk(gen):
        assert mode(Path(root)) == 0o700, f"{root} has mode {mode(Path(root)):o}\n{listing}"
        for name in files:
            f = Path(root) / name
            assert mode(f) == 0o600, f"{f} has mode {mode(f):o}\n{listing}"
            with f.open("rb") as fh:
                head = fh.read(32)
            assert not head.startswith(b"DMTCP_CHECKPOINT_IMAGE"), f"{f} has DMTCP's magic"
    assert (gen / "MANIFEST.json").is_file() and (gen / "upper.core").is_file(), listing

    script = ckptdir / "crac_restart_script.sh"
    assert script.is_file(), f"no crac_restart_script.sh\n{listing}"
    smode = mode(script)
    assert smode & 0o700 == 0o700 and smode & 0o022 == 0, f"{script} has mode {smode:o}"

    manifest = json.loads((gen / "MANIFEST.json").read_text())
    assert isinstance(manifest, dict), "MANIFEST.json is not a JSON object"
    check_core(gen / "upper.core", min_threads=9)

    finish_restart(gen, ref.lines, seg, out_dir=logs, label="restart", cwd=cwd)


def test_sparse_image(ckpt_apps, tmp_path):
    """A 1 GiB region with 16 touched pages: the image takes little disk space (never-touched
    pages are skipped) and restarts with its patterns intact and its holes zero."""
    app, args = ckpt_apps["ckpt_sparse"], ["400"]
    ref = native_reference(app, args, tmp_path / "ref_work", tmp_path / "ref_cwd")
    ckptdir, logs, cwd = dirs(tmp_path)
    proc = launch(app, args, ckptdir, out_dir=logs, cwd=cwd)
    try:
        wait_for_step(proc, 10)
        seg = take_checkpoint(proc, ckptdir)
    finally:
        proc.stop()
    used = sum(f.stat().st_blocks * 512 for f in seg.gen.rglob("*") if f.is_file())
    assert used < 128 << 20, f"the image of a 1 GiB sparse region uses {used >> 20} MiB of disk"
    finish_restart(seg.gen, ref.lines, seg, out_dir=logs, label="restart", cwd=cwd)


# ---------------------------------------------------------------------------------------------
# Generations and rotation


@pytest.mark.parametrize("keep", [None, 1, 3], ids=["default", "keep1", "keep3"])
def test_keep_rotation(ckpt_apps, tmp_path, keep):
    """Four checkpoints: once the program has ended (so any clean-up is over) only the newest
    --keep generations (default 2) remain, `latest` names the newest, and it restarts."""
    steps = 200
    ckptdir, logs, cwd = dirs(tmp_path)
    opts = [] if keep is None else ["--keep", str(keep)]
    proc = launch(ckpt_apps["ckpt_counter"], [steps, 15], ckptdir, out_dir=logs, opts=opts, cwd=cwd)
    try:
        wait_for_step(proc, 60)
        for _ in range(3):
            checkpoint(proc, ckptdir)
            wait_for_step(proc, proc.last_step() + 1)
        before = proc.last_step()
        gen = checkpoint(proc, ckptdir)
        at_complete = proc.last_step()
        status = wait_exit(proc)
    finally:
        proc.stop()
    if status != 0:
        fail(f"the program ended with status {status}", proc)
    assert proc.lines() == counter_lines(steps), "checkpoints disturbed the program's output"
    procdir = gen.parent
    kept = min(keep or 2, 4)
    expected = [f"gen-{n:06d}" for n in range(5 - kept, 5)]
    assert [g.name for g in generations(procdir)] == expected, tree(ckptdir)
    assert latest_complete(procdir) == gen and gen.name == "gen-000004", tree(ckptdir)
    seg = Segment(proc.label, proc.lines(), before, at_complete, gen)
    finish_restart(
        procdir / "latest", counter_lines(steps), seg, out_dir=logs, label="restart", cwd=cwd
    )


@pytest.mark.parametrize("how", ["-i", "CRAC_CHECKPOINT_INTERVAL", "DMTCP_CHECKPOINT_INTERVAL"])
def test_interval_checkpoints(ckpt_apps, tmp_path, how):
    """An interval of 1 s writes generations without any signal; the latest one restarts."""
    steps = 300
    ckptdir, logs, cwd = dirs(tmp_path)
    opts = ["-i", "1"] if how == "-i" else []
    env = base_env({} if how == "-i" else {how: "1"})
    app = ckpt_apps["ckpt_counter"]
    proc = launch(app, [steps, 15], ckptdir, out_dir=logs, opts=opts, env=env, cwd=cwd)
    try:
        deadline = time.monotonic() + 60
        while max(complete_generations(ckptdir).values(), default=0) < 2:
            if proc.poll() is not None or time.monotonic() > deadline:
                fail(f"no second interval checkpoint appeared\n{tree(ckptdir)}", proc)
            time.sleep(0.02)
        wait_for_step(proc, proc.last_step() + 2)
        kill9(proc)
    finally:
        proc.stop()
    seg = Segment(proc.label, proc.lines())
    check_steps_contiguous(seg.lines, seg.label)
    (procdir,) = process_dirs(ckptdir)
    # No resume-point check (the moment of an interval checkpoint is not known), but the
    # stitched output must still be exact.
    check_finished(
        restart(procdir, out_dir=logs, label="restart", env=env, cwd=cwd),
        counter_lines(steps),
        seg,
    )


def test_exit_after_checkpoint(ckpt_apps, tmp_path):
    """--exit-after-checkpoint: the process exits with status 0 once the image is written, and
    the image continues from there."""
    steps = 150
    ckptdir, logs, cwd = dirs(tmp_path)
    app = ckpt_apps["ckpt_counter"]
    opts = ["--exit-after-checkpoint"]
    proc = launch(app, [steps, 20], ckptdir, out_dir=logs, opts=opts, cwd=cwd)
    try:
        wait_for_step(proc, 20)
        before = proc.last_step()
        gen = checkpoint(proc, ckptdir)
        try:
            status = proc.wait(timeout=60)
        except Exception:
            fail("the process did not exit after its checkpoint", proc)
    finally:
        proc.stop()
    if status != 0:
        fail(f"exit after checkpoint: status {status}, expected 0", proc)
    lines = proc.lines()
    assert proc.last_step() < steps, "the program ran to its end instead of exiting"
    seg = Segment(proc.label, lines, before, proc.last_step(), gen)
    seg2 = finish_restart(gen, counter_lines(steps), seg, out_dir=logs, label="restart", cwd=cwd)
    first = int(seg2.lines[0].split()[1])
    assert first == proc.last_step() + 1, (
        f"the process exited after step {proc.last_step()} but the image resumes at {first}: "
        "it went on running after the checkpoint"
    )


# ---------------------------------------------------------------------------------------------
# Environment spellings and the checkpoint signal

DIR_CASES = {
    # id: (use -c A, environment with A/B placeholders) -> the image must land in A
    "CRAC_CHECKPOINT_DIR": (False, {"CRAC_CHECKPOINT_DIR": "A"}),
    "DMTCP_CHECKPOINT_DIR": (False, {"DMTCP_CHECKPOINT_DIR": "A"}),
    "flag-beats-env": (True, {"CRAC_CHECKPOINT_DIR": "B", "DMTCP_CHECKPOINT_DIR": "B"}),
    "CRAC-beats-DMTCP": (False, {"CRAC_CHECKPOINT_DIR": "A", "DMTCP_CHECKPOINT_DIR": "B"}),
}


@pytest.mark.parametrize("case", list(DIR_CASES))
def test_checkpoint_dir_spellings(ckpt_apps, tmp_path, case):
    use_flag, env_spec = DIR_CASES[case]
    a, b = tmp_path / "A", tmp_path / "B"
    logs, cwd = tmp_path / "logs", tmp_path / "cwd"
    for d in (a, b, logs, cwd):
        d.mkdir()
    env = base_env({k: str(a if v == "A" else b) for k, v in env_spec.items()})
    app = ckpt_apps["ckpt_counter"]
    proc = launch(app, [150, 20], a if use_flag else None, out_dir=logs, env=env, cwd=cwd)
    try:
        wait_for_step(proc, 5)
        gen = checkpoint(proc, a)
        kill9(proc)
    finally:
        proc.stop()
    assert gen.parent.parent == a
    assert process_dirs(b) == [] and process_dirs(cwd) == [], f"{tree(b)}\n{tree(cwd)}"


@pytest.mark.parametrize("how", ["--ckpt-signal", "CRAC_SIGCKPT", "DMTCP_SIGCKPT"])
def test_checkpoint_signal(ckpt_apps, tmp_path, how):
    """SIGUSR1 (10) as the checkpoint signal: it checkpoints the launched process, and the
    restarted process too (the image keeps the signal); generations continue in one directory."""
    steps = 200
    ckptdir, logs, cwd = dirs(tmp_path)
    sig = signal.SIGUSR1
    opts = ["--ckpt-signal", str(int(sig))] if how == "--ckpt-signal" else []
    env = base_env({} if opts else {how: str(int(sig))})
    app = ckpt_apps["ckpt_counter"]
    proc = launch(app, [steps, 15], ckptdir, out_dir=logs, opts=opts, env=env, cwd=cwd)
    try:
        wait_for_step(proc, 10)
        seg1 = take_checkpoint(proc, ckptdir, sig=sig)
    finally:
        proc.stop()
    proc = restart(ckptdir, out_dir=logs, label="restart1", cwd=cwd)
    try:
        wait_for_step(proc, seg1.at_complete + 20)
        check_resume_point(Segment(proc.label, proc.lines()), seg1)
        seg2 = take_checkpoint(proc, ckptdir, sig=sig)
    finally:
        proc.stop()
    assert seg2.gen.parent == seg1.gen.parent and seg2.gen.name == "gen-000002", tree(ckptdir)
    expected = counter_lines(steps)
    # what the first two processes printed, stitched, then the last restart
    first_two = Segment(
        "launch+restart1",
        stitch([seg1, Segment(seg2.label, seg2.lines)]),
        seg2.before_signal,
        seg2.at_complete,
        seg2.gen,
    )
    finish_restart(seg2.gen, expected, first_two, out_dir=logs, label="restart2", cwd=cwd)


# ---------------------------------------------------------------------------------------------
# Restarting


def test_restart_path_forms(ckpt_apps, tmp_path):
    """`crac restart` takes the checkpoint directory, the process directory, the generation or
    the `latest` link; each restarts the same image and runs to the end."""
    steps = 150
    ckptdir, logs, cwd = dirs(tmp_path)
    proc = launch(ckpt_apps["ckpt_counter"], [steps, 20], ckptdir, out_dir=logs, cwd=cwd)
    try:
        # Early enough that the program still runs when the image is published: the writer
        # works while the program goes on (a loaded machine may take a second or two).
        wait_for_step(proc, 60)
        seg = take_checkpoint(proc, ckptdir)
    finally:
        proc.stop()
    procdir = seg.gen.parent
    forms = {
        "ckptdir": ckptdir,
        "procdir": procdir,
        "gen": seg.gen,
        "latest": procdir / "latest",
        "relative-gen": os.path.relpath(seg.gen, cwd),
    }
    for name, path in forms.items():
        finish_restart(
            path, counter_lines(steps), seg, out_dir=logs, label=f"restart-{name}", cwd=cwd
        )
    # restarting changes nothing in the image directory
    assert [g.name for g in generations(procdir)] == ["gen-000001"], tree(ckptdir)


def test_restart_script(ckpt_apps, tmp_path):
    """DIR/crac_restart_script.sh restarts the job, from any working directory, without
    Python's start-up (the `--` it writes before the checkpoint is no option of the Python CLI's
    alone: docs/DECISIONS.md "Restart without Python")."""
    steps = 150
    ckptdir, logs, cwd = dirs(tmp_path)
    proc = launch(ckpt_apps["ckpt_counter"], [steps, 20], ckptdir, out_dir=logs, cwd=cwd)
    try:
        wait_for_step(proc, 50)  # as in test_restart_path_forms
        seg = take_checkpoint(proc, ckptdir)
    finally:
        proc.stop()
    script = ckptdir / "crac_restart_script.sh"
    assert script.is_file(), tree(ckptdir)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    path = os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")])
    env = base_env({"PATH": path, "CRAC_DEBUG_PATH": "1"})
    runner = CracProc([str(script)], out_dir=logs, label="script", env=env, cwd=elsewhere)
    check_finished(runner, counter_lines(steps), seg)
    err = (logs / "script.err").read_text()
    assert "crac: debug: restart path: native" in err, err


# ---------------------------------------------------------------------------------------------
# Many checkpoints


def test_checkpoint_every_100ms(ckpt_apps, tmp_path):
    """The checkpoint signal every 100 ms for about 30 s: the program runs on undisturbed (its
    output stays contiguous), at most --keep generations remain, and the last complete one
    restarts and finishes."""
    steps, ms = 3000, 10
    ckptdir, logs, cwd = dirs(tmp_path)
    proc = launch(ckpt_apps["ckpt_counter"], [steps, ms], ckptdir, out_dir=logs, cwd=cwd)
    try:
        wait_for_step(proc, 5)
        sent = 0
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and proc.last_step() < steps - 100:
            if proc.poll() is not None:
                fail(f"the program ended after {sent} checkpoint signals", proc)
            os.kill(proc.pid, signal.SIGUSR2)
            sent += 1
            time.sleep(0.1)
        wait_for_step(proc, proc.last_step() + 2)
        kill9(proc)
    finally:
        proc.stop()
    seg = Segment(proc.label, proc.lines())
    check_steps_contiguous(seg.lines, "the output while checkpointing every 100 ms")
    (procdir,) = process_dirs(ckptdir)
    latest = latest_complete(procdir)
    assert latest is not None, tree(ckptdir)
    assert gen_number(latest) >= 2, f"{sent} signals gave {gen_number(latest)} generation(s)"
    assert len(generations(procdir)) <= 2, tree(ckptdir)
    check_finished(
        restart(procdir / "latest", out_dir=logs, label="restart", cwd=cwd),
        counter_lines(steps),
        seg,
    )


# ---------------------------------------------------------------------------------------------
# The harness's own checks (no crac): they must be able to fail


def test_harness_continuity_checks_can_fail():
    """A restart that starts over, skips ahead of the checkpoint, loses or repeats a line, or
    resumes from a step its predecessor never printed is caught."""
    expected = [f"step {k}" for k in range(1, 51)] + ["DONE x"]
    # checkpoint requested after step 20, complete by step 25; killed after step 30
    prev = Segment("launch", expected[:30], before_signal=20, at_complete=25)

    def seg(lines):
        return Segment("restart", list(lines))

    good = seg(expected[23:])  # resumes at step 24
    assert check_resume_point(good, prev) == 24
    assert stitch([prev, good]) == expected
    for bad in (seg(expected), seg(expected[30:]), seg(expected[19:])):  # 1, 31, 20
        with pytest.raises(AssertionError):
            check_resume_point(bad, prev)
    lossy = seg(expected[23:39] + expected[40:])
    repeated = seg(expected[23:39] + expected[38:])
    for bad in (lossy, repeated):
        with pytest.raises(pytest.fail.Exception):
            assert_same_output(stitch([prev, bad]), expected, "bad")
    with pytest.raises(pytest.fail.Exception):
        stitch([Segment("launch", expected[:10]), good])
    with pytest.raises(pytest.fail.Exception):
        stitch([prev, seg(["hello"] + expected[23:])])
