"""Mappings a program makes outside crac's window W (MAP_FIXED and MAP_FIXED_NOREPLACE ones here;
MAP_32BIT and io_uring's rings are the others) are saved and mapped back at their addresses, also
where the restart's fresh lower half would place its own memory: the restart holds their addresses
before the lower half loads (restart_memory.c restart_hold_outside). `setarch -R` makes the
restarted lower half's layout the same every time, so a test can ask for an address it uses."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest
from ckpt_harness import (
    CracProc,
    build_app,
    kill9,
    launch_checkpoint_kill,
    run_cycles,
    wait_exit,
    wait_for_step,
)
from conftest import APPS_DIR, crac_cmd

D_END = 0x340000000000
STEPS = 40
MAPS_LINE = re.compile(r"([0-9a-f]+)-([0-9a-f]+) (\S+) \S+ \S+ \S+\s*(.*)")


@pytest.fixture(scope="module")
def app(tmp_path_factory: pytest.TempPathFactory) -> Path:
    try:
        res = subprocess.run(["setarch", "-R", "true"], capture_output=True, timeout=30)
    except FileNotFoundError:
        pytest.skip("setarch (util-linux) is not installed: the lower half cannot be held still")
    if res.returncode != 0:
        pytest.skip(f"setarch -R cannot turn address randomization off here: {res.stderr!r}")
    return build_app(tmp_path_factory, APPS_DIR / "ckpt_outside_w.c")


def restart_fixed_layout(ckptdir: Path, out_dir: Path, label: str) -> CracProc:
    """`crac restart` without address randomization: its lower half maps where it did last time."""
    argv = ["setarch", "-R", *crac_cmd(), "restart", str(ckptdir)]
    return CracProc(argv, out_dir=out_dir, label=label, cwd=out_dir)


def lower_half_stack(maps: str) -> int:
    """The highest thread stack above the windows (an anonymous read-write mapping of 1 MiB or
    more right above a one-page guard): one of the lower half's, made after the image was read
    (its heap, mapped before, has no guard page)."""
    found = []
    lines = [MAPS_LINE.match(line) for line in maps.splitlines()]
    for guard, m in zip(lines, lines[1:]):
        if not (guard and m) or m.group(4) or not m.group(3).startswith("rw"):
            continue
        start, end = int(m.group(1), 16), int(m.group(2), 16)
        guarded = guard.group(3).startswith("---") and int(guard.group(2), 16) == start
        guarded = guarded and start - int(guard.group(1), 16) == 0x1000
        if guarded and start >= D_END and end - start >= 1 << 20:
            found.append((start, end))
    assert found, f"no lower-half thread stack in the restarted process's maps:\n{maps}"
    start, end = max(found)
    return (start + (end - start) // 2) & ~0xFFF


def loader_break(maps: str) -> int:
    """Where the restarted loader's kernel break starts: under setarch -R right after its data,
    the end of the anonymous mapping that follows its last file mapping."""
    lines = [MAPS_LINE.match(line) for line in maps.splitlines()]
    for before, after in zip(lines, lines[1:]):
        if before and after and before.group(4).endswith("/crac-loader") and not after.group(4):
            return int(after.group(2), 16)
    raise AssertionError(f"no crac-loader data mapping in the restarted process's maps:\n{maps}")


@pytest.fixture(scope="module")
def lower_half_addresses(app: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, int]:
    """Addresses the restarted lower half uses (its layout fixed by setarch -R), read from the
    maps a restarted program without a mapping of its own outside W copies every step: one of
    its thread stacks, and the start of the loader's kernel break."""
    work = tmp_path_factory.mktemp("outside_w_probe")
    maps = work / "maps.txt"
    launch_checkpoint_kill(app, [str(maps), "0", "1000"], work / "ckpt", out_dir=work)
    proc = restart_fixed_layout(work / "ckpt", work, "probe")
    try:
        wait_for_step(proc, proc.last_step() + 2)
        text = maps.read_text()
        return {"stack": lower_half_stack(text), "break": loader_break(text)}
    finally:
        kill9(proc)


@pytest.mark.parametrize(
    ("where", "how"), [("stack", "fixed"), ("stack", "noreplace"), ("break", "noreplace")]
)
def test_a_mapping_outside_w_comes_back_where_the_lower_half_would_be(
    app: Path, lower_half_addresses: dict[str, int], tmp_path: Path, where: str, how: str
) -> None:
    """Two pages mapped outside W (MAP_FIXED, or MAP_FIXED_NOREPLACE, which used to be left out
    of the image) at an address the restarted lower half uses: the restart holds it before the
    lower half loads (it used to stop: "something of the new lower half is there"), and the
    program's count in those pages goes on from where the checkpoint left it. At the start of
    the loader's kernel break (the range MAP_32BIT mappings come from, where the break starts
    anywhere in a 1 GiB), the lower half's heap used to be there before the hold ("this
    loader's own code, stack or heap is there"): the break is never grown now."""
    lower_half_address = lower_half_addresses[where]
    args = [str(tmp_path / "maps.txt"), f"{lower_half_address:x}", str(STEPS), how]
    native = subprocess.run([str(app), *args], capture_output=True, text=True, timeout=120)
    if native.returncode == 3:
        pytest.skip(f"{lower_half_address:#x} is taken in a native run: {native.stdout.strip()}")
    assert native.returncode == 0, native.stderr
    killed = launch_checkpoint_kill(app, args, tmp_path / "ckpt", out_dir=tmp_path)
    proc = restart_fixed_layout(tmp_path / "ckpt", tmp_path, "restart")
    try:
        assert wait_exit(proc) == 0, killed.report() + proc.report()
    finally:
        proc.stop()
    done = [line for line in proc.lines() if line.startswith("DONE")]
    assert done == [native.stdout.splitlines()[-1]], proc.report()
    assert proc.steps()[0] > 1, proc.report()


def test_the_lower_half_is_not_the_programs_to_move(tmp_path_factory: pytest.TempPathFactory):
    """mremap outside W moves only the program's own mappings: the lower half's libc stays where
    it is (EFAULT; the old build moved it and the process crashed), a mapping of the program's
    own is not moved over it (ENOMEM: MREMAP_FIXED unmaps what is at its destination), and one
    moved to free space still moves."""
    app = build_app(tmp_path_factory, APPS_DIR / "lower_half_guard.c")
    cp = subprocess.run(
        [*crac_cmd(), "launch", str(app)], capture_output=True, text=True, timeout=120
    )
    assert cp.returncode == 0, cp.stdout + cp.stderr
    assert cp.stdout.splitlines() == [
        "mremap of the lower half: EFAULT",
        "mremap over the lower half: ENOMEM",
        "mremap of its own: moved",
        "still running: yes",
    ], cp.stdout + cp.stderr


def test_many_mappings_outside_w_are_all_saved(tmp_path_factory, tmp_path):
    """120 MAP_32BIT mappings, every other one with a hole after it: 120 mappings outside W,
    where crac's table of the program's ranges held 64, one a mapping, and the rest were left
    out of every image (the restarted program faulted on them). Two checkpoint/restart cycles,
    compared with a native run. (A first CI run with 600 mappings met a restarted loader whose
    heap lay in the MAP_32BIT range: the loader's kernel break is never grown now.)"""
    app = build_app(tmp_path_factory, APPS_DIR / "ckpt_map32.c")
    run_cycles(app, ["120", "60"], tmp_path)
