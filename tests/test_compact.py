"""`crac compact` (docs/IMAGE.md "Compaction"): an `--incremental` run checkpointed four times
with pages dirtied at random between, killed; its chain compacted into one full generation,
which restarts to the same output as an uninterrupted run, also once --keep 1 has removed every
older generation; a live run, a directory that is no checkpoint and a damaged chain are refused
in one line with the chain untouched, as is a process of a tree; a compaction killed midway
leaves the old chain restartable."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest
from ckpt_harness import (
    Segment,
    assert_refused,
    base_env,
    build_app,
    check_finished,
    checkpoint,
    crac,
    kill9,
    kill_tree,
    launch,
    native_reference,
    restart,
    wait_for_step,
)
from conftest import crac_cmd, describe
from test_incremental import anon_layers, marked, page_offset

from crac_py.image import format as image_format

APP = Path(__file__).parent / "apps" / "ckpt_incr.c"
ARGS = ["2400", "16", "5"]  # steps, MiB dirtied at random (2 % a step), ms a step
OPTS = ["--incremental", "--full-every", "8", "--keep", "8"]
CHAIN = 4  # gen-1 full, gen-2..4 incremental


@pytest.fixture(scope="module")
def app(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_app(tmp_path_factory, APP)


def manifest(gen: Path) -> dict:
    return json.loads((gen / "MANIFEST.json").read_text())


def entries(procdir: Path) -> list[str]:
    """The process directory's generations and where `latest` points."""
    return sorted(p.name for p in procdir.iterdir()) + [os.readlink(procdir / "latest")]


def compact(*args: str, cwd: Path, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [*crac_cmd(), "compact", *args],
        capture_output=True,
        stdin=subprocess.DEVNULL,
        env=env or base_env(),
        cwd=cwd,
        timeout=600,
    )


@pytest.fixture
def chain(app: Path, tmp_path: Path) -> tuple[Path, Segment, list[str]]:
    """The killed run's process directory, where its newest checkpoint (gen-4) was taken, and
    the uninterrupted run's output. While the run was alive, compacting it was refused."""
    ref = native_reference(app, ARGS, tmp_path / "ref_work", tmp_path / "ref_cwd")
    ckptdir, logs = tmp_path / "ckpt", tmp_path / "logs"
    proc = launch(app, ARGS, ckptdir, out_dir=logs, opts=OPTS)
    try:
        wait_for_step(proc, 40)
        for i in range(CHAIN):
            before = proc.last_step()
            gen = checkpoint(proc, ckptdir)
            at = proc.last_step()
            assert gen.name == f"gen-{i + 1:06d}", gen
            wait_for_step(proc, at + 8)  # pages written between two checkpoints
        procdir = gen.parent
        before_live = entries(procdir)
        msg = assert_refused(compact(str(procdir), cwd=tmp_path), "compacting a live run")
        assert "running process" in msg, msg
        assert entries(procdir) == before_live
        kill9(proc)
    except BaseException:
        proc.stop()
        raise
    assert manifest(gen)["incremental"]["parent"] == CHAIN - 1
    return procdir, Segment(proc.label, proc.lines(), before, at, gen), ref.lines


def test_compact_restarts_as_native(chain: tuple[Path, Segment, list[str]], tmp_path: Path) -> None:
    """gen-1..4 compacted (the checkpoint directory named, as `crac restart` takes it): gen-5,
    full, carrying gen-4's program and state; verify says `chain: full`; a restart from it (on
    the native path) ends as an uninterrupted run and goes on with --incremental, and the chain
    it came from is all still there."""
    procdir, last, expected = chain
    cp = compact(str(procdir.parent), cwd=tmp_path)
    assert cp.returncode == 0, describe(cp)
    gen5 = procdir / "gen-000005"
    assert os.readlink(procdir / "latest") == gen5.name
    m, m4 = manifest(gen5), manifest(procdir / "gen-000004")
    assert m["incremental"] == {
        "full_every": 8,
        "parent": 0,
        "base": 5,
        "parent_header_crc32c": 0,
    }, m["incremental"]
    assert m["format_version"] == 2 and m["generation"] == 5
    for key in ("process", "backend", "device", "not_saved", "host"):
        assert m[key] == m4[key], key
    assert sorted(m["files"]) == sorted(m4["files"])
    assert all(procdir.joinpath(f"gen-{g:06d}").is_dir() for g in range(1, 5))
    cp = crac("verify", str(procdir), cwd=tmp_path)
    assert cp.returncode == 0, describe(cp)
    assert any(
        ln.split()[:3] == ["chain", "ok", "full"] or "chain" in ln and "full" in ln
        for ln in cp.stdout.decode().splitlines()
    ), describe(cp)
    # Without Python (the fast path takes a full generation of an --incremental run), and the
    # restarted run goes on with --incremental.
    proc = restart(
        procdir,
        out_dir=tmp_path / "logs",
        label="restart_compacted",
        env=base_env({"CRAC_DEBUG_PATH": "1"}),
    )
    try:
        wait_for_step(proc, last.at_complete + 1)
        gen6 = checkpoint(proc, procdir.parent)
    except BaseException:
        proc.stop()
        raise
    assert gen6.name == "gen-000006", gen6
    assert manifest(gen6)["incremental"]["full_every"] == 8
    check_finished(proc, expected, last)
    assert "restart path: native" in proc.stderr_text(), proc.stderr_text()[-2000:]


def test_keep_one_then_restart(chain: tuple[Path, Segment, list[str]], tmp_path: Path) -> None:
    """--keep 1: the chain's older generations go (gen-5 needs none of them); the restart from
    what is left ends as an uninterrupted run."""
    procdir, last, expected = chain
    cp = compact("--keep", "1", str(procdir / "latest"), cwd=tmp_path)
    assert cp.returncode == 0, describe(cp)
    assert sorted(p.name for p in procdir.glob("gen-*")) == ["gen-000005"]
    assert crac("verify", str(procdir), cwd=tmp_path).returncode == 0
    proc = restart(procdir, out_dir=tmp_path / "logs", label="restart_kept")
    check_finished(proc, expected, last)


def test_bad_input_refused(chain: tuple[Path, Segment, list[str]], tmp_path: Path) -> None:
    """No checkpoint there, a generation that is not the newest, a chain whose gen-2 is gone,
    and one with a byte of its saved pages changed: each refused in one line, every
    generation and `latest` as they were."""
    procdir, _, _ = chain
    empty = tmp_path / "empty"
    empty.mkdir()
    assert_refused(compact(str(empty), cwd=tmp_path), "no checkpoint")
    assert_refused(compact(cwd=empty), "no checkpoint in the working directory")
    before = entries(procdir)
    msg = assert_refused(compact(str(procdir / "gen-000003"), cwd=tmp_path), "an older gen")
    assert "newest" in msg, msg
    assert entries(procdir) == before
    # A byte of a generation's saved pages that every newer one takes from it (gen-2's, or
    # gen-3's when gen-3 and gen-4 rewrote all of gen-2's, else gen-4's own): the loader finds
    # it filling the chain's memory.
    layers = {g: anon_layers(procdir / f"gen-{g:06d}") for g in (2, 3, 4)}
    cores = {g: (procdir / f"gen-{g:06d}" / "upper.core").read_bytes() for g in (2, 3, 4)}

    def inherited_byte(g: int) -> int | None:
        data = cores[g]
        # An incremental region is a stream of chunks: page i is where its chunk stores it.
        return next(
            (
                off + b
                for key, (r, bits) in layers[g].items()
                if r["flags"] & image_format.REGION_INCREMENTAL and r["saved_pages"]
                for i in range((r["end"] - r["start"]) // 4096)
                if not marked(bits, i)
                and all(key in layers[n] and marked(layers[n][key][1], i) for n in range(g + 1, 5))
                if (off := page_offset(data, r, i)) is not None
                for b in range(0, 4096, 8)
                if any(data[off + b : off + b + 8])
            ),
            None,
        )

    damaged, at = next((g, a) for g in (2, 3, 4) if (a := inherited_byte(g)) is not None)
    data = bytearray(cores[damaged])
    data[at] ^= 0x40
    (procdir / f"gen-{damaged:06d}" / "upper.core").write_bytes(bytes(data))
    msg = assert_refused(compact(str(procdir), cwd=tmp_path), f"a damaged gen-{damaged}")
    assert "checksum" in msg and (damaged == 4 or f"gen-{damaged:06d}" in msg), msg
    assert not (procdir / "gen-000005.tmp").exists()
    assert entries(procdir) == before
    (procdir / "gen-000002").rename(tmp_path / "gen-2-aside")
    msg = assert_refused(compact(str(procdir), cwd=tmp_path), "a chain without gen-2")
    assert "gen-000002" in msg and "missing" in msg, msg
    assert entries(procdir) == [n for n in before if n != "gen-000002"]


def test_killed_mid_compact(chain: tuple[Path, Segment, list[str]], tmp_path: Path) -> None:
    """A compaction SIGKILLed once it has written its upper.core, before it publishes: `latest`
    is still gen-4, the leftover gen-5.tmp is ignored, and a restart ends as an uninterrupted
    run; a compaction after it succeeds."""
    procdir, last, expected = chain
    before = entries(procdir)
    hold = tmp_path / "hold"  # never created: the compaction waits for it until killed
    env = base_env({"CRAC_TEST_WRITER_HOLD": str(hold)})
    p = subprocess.Popen(
        [*crac_cmd(), "compact", str(procdir)],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
        cwd=tmp_path,
        start_new_session=True,
    )
    tmp = procdir / "gen-000005.tmp"
    try:
        deadline = time.monotonic() + 600
        while not (tmp / "upper.core").exists() and p.poll() is None:
            assert time.monotonic() < deadline, "the compaction never wrote its upper.core"
            time.sleep(0.05)
        assert p.poll() is None, p.communicate()
    finally:
        if p.returncode is None:  # once reaped, its group's id may be another test's
            os.killpg(p.pid, signal.SIGKILL)
        p.communicate()
    after = entries(procdir)
    assert [n for n in after if not n.endswith(".tmp")] == before, after
    proc = restart(procdir, out_dir=tmp_path / "logs", label="restart_after_kill")
    check_finished(proc, expected, last)
    cp = compact(str(procdir), cwd=tmp_path)
    assert cp.returncode == 0 and (procdir / "gen-000005").is_dir(), describe(cp)


def test_tree_member_refused(apps: dict[str, Path], tmp_path: Path) -> None:
    """A process tree (the root and its forked child, one job): compacting either process's
    directory is refused in one line (each is restarted with the other by its generation),
    nothing changed."""
    ckptdir = tmp_path / "ckpt"
    proc = launch(
        apps["tree_counter"], ["T", "600", "20"], ckptdir, out_dir=tmp_path, opts=["--incremental"]
    )
    try:
        deadline = time.monotonic() + 300
        while len([ln for ln in proc.lines() if "step" in ln]) < 10:  # both running
            assert time.monotonic() < deadline and proc.poll() is None, "the tree never ran"
            time.sleep(0.05)
        while len(list(ckptdir.glob("ckpt_*"))) < 2 or not all(
            (d / "latest").exists() for d in ckptdir.glob("ckpt_*")
        ):
            assert time.monotonic() < deadline, "the tree was never checkpointed whole"
            if not list(ckptdir.glob("ckpt_*/latest")):
                checkpoint(proc, ckptdir)
            time.sleep(0.1)
    finally:
        kill_tree(ckptdir, b"tree_counter")  # the child too (its pid names its directory)
        proc.stop()
    for d in sorted(ckptdir.glob("ckpt_*")):
        before = entries(d)
        msg = assert_refused(compact(str(d), cwd=tmp_path), f"compacting {d.name}")
        assert "job" in msg or "tree" in msg, msg
        assert entries(d) == before


def test_program_mapping_a_file_in_memory_refused(tmp_path_factory, tmp_path: Path) -> None:
    """A program that maps a named POSIX shm object: compacting would map its saved pages back
    into the object in /dev/shm (what only a restart may do), so it is refused in one line,
    nothing changed."""
    app = build_app(tmp_path_factory, Path(__file__).parent / "apps" / "ckpt_shm.c")
    ckptdir = tmp_path / "ckpt"
    proc = launch(app, ["60"], ckptdir, out_dir=tmp_path, opts=["--incremental"])
    try:
        wait_for_step(proc, 5)
        checkpoint(proc, ckptdir)
        wait_for_step(proc, proc.last_step() + 2)
        gen = checkpoint(proc, ckptdir)
        kill9(proc)
    finally:
        proc.stop()
        Path(f"/dev/shm/ckpt_shm-kept-{proc.pid}").unlink(missing_ok=True)
    before = entries(gen.parent)
    msg = assert_refused(compact(str(gen.parent), cwd=tmp_path), "compacting a shm user")
    assert "/dev/shm/ckpt_shm-kept-" in msg and "a file in memory" in msg, msg
    assert entries(gen.parent) == before
