"""`--incremental` (docs/IMAGE.md "Incremental generations"): generations that hold only the
pages written since the one before restart with the program's results unchanged, from the end
or the middle of a chain, through two checkpoint/SIGKILL/restart cycles; a chain with a missing
or damaged link is refused in one line, by restart and by verify, and nothing is removed; --keep
never removes a generation a kept one builds on."""

from __future__ import annotations

import json
import shutil
import struct
import subprocess
import sys
import time
from pathlib import Path

import pytest
from ckpt_harness import (
    CracProc,
    Segment,
    assert_refused,
    assert_same_output,
    base_env,
    build_app,
    check_finished,
    check_resume_point,
    check_steps_contiguous,
    checkpoint,
    crac,
    inspect_images,
    kill9,
    kill_tree,
    launch,
    native_reference,
    restart,
    run_restart,
    stitch,
    wait_exit,
    wait_for_step,
)
from conftest import crac_cmd, describe, require_native
from coord_harness import Coordinator
from job_harness import (
    Output,
    ScriptRun,
    bcheckpoint,
    segments_of,
    wait_every_done,
    wait_past,
    wait_steps,
)
from job_harness import check_chain as check_tag_chain

from crac_py.coord.restart_script import listed_generations
from crac_py.image import format as image_format

APP = Path(__file__).parent / "apps" / "ckpt_incr.c"
ARGS = ["2400", "16", "5"]  # steps, MiB dirtied at random (2 % a step), ms a step
PER_CYCLE = 4  # checkpoints a cycle: one full, then incremental ones
OPTS = ["--incremental", "--full-every", "8"]


@pytest.fixture(scope="module")
def app(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_app(tmp_path_factory, APP)


def manifest(gen: Path) -> dict:
    return json.loads((gen / "MANIFEST.json").read_text())


def incremental_regions(gen: Path) -> int:
    cp = subprocess.run(
        [*crac_cmd(), "inspect", "--json", str(gen)], capture_output=True, timeout=120
    )
    assert cp.returncode == 0, describe(cp)
    regs = json.loads(cp.stdout)["notes"]["regions"]
    return sum(1 for r in regs if r["flags"] & image_format.REGION_INCREMENTAL)


def take_chain(proc, ckptdir: Path, first: int, n: int) -> list[Segment]:
    """N checkpoints of PROC, each some steps after the one before; a Segment per checkpoint
    (without lines) saying where it was taken."""
    taken = []
    for i in range(n):
        before = proc.last_step()
        gen = checkpoint(proc, ckptdir)
        at = proc.last_step()
        assert gen.name == f"gen-{first + i:06d}", f"checkpoint {first + i} wrote {gen.name}"
        taken.append(Segment(proc.label, [], before, at, gen))
        wait_for_step(proc, at + 8)  # pages written between two checkpoints
    return taken


def launch_chain(
    app: Path, ckptdir: Path, logs: Path, opts: list[str]
) -> tuple[CracProc, list[Segment]]:
    """Launches APP with OPTS, takes PER_CYCLE checkpoints (gen-1 full, the others incremental)
    from step 40 on and SIGKILLs it: the killed process and where each checkpoint was taken."""
    proc = launch(app, ARGS, ckptdir, out_dir=logs, opts=opts)
    try:
        wait_for_step(proc, 40)
        taken = take_chain(proc, ckptdir, 1, PER_CYCLE)
        kill9(proc)
    except BaseException:
        proc.stop()
        raise
    return proc, taken


def check_chain(taken: list[Segment], full: int, compressed: bool = False) -> None:
    """The first generation of TAKEN is full (COMPRESSED: with --compress), the others
    incremental, each on the one before, their regions stored as chunks."""
    for k, seg in enumerate(taken):
        assert seg.gen is not None
        inc = manifest(seg.gen)["incremental"]
        assert inc["full_every"] == 8, inc
        if k == 0:
            assert inc["parent"] == 0 and inc["base"] == full, inc
            assert manifest(seg.gen)["format_version"] == (
                image_format.CRAC_IMAGE_FORMAT_COMPRESSED
                if compressed
                else image_format.CRAC_IMAGE_FORMAT
            )
            continue
        assert inc["parent"] == full + k - 1 and inc["base"] == full, inc
        assert manifest(seg.gen)["format_version"] == image_format.CRAC_IMAGE_FORMAT_INCREMENTAL
        assert incremental_regions(seg.gen) > 0, f"{seg.gen.name} saved every region whole"
        # An incremental generation's regions are chunks, stored RAW without --compress.
        layers = anon_layers(seg.gen).values()
        assert all(r["flags"] & image_format.REGION_COMPRESSED for r, _ in layers), layers
        core = (seg.gen / "upper.core").read_bytes()
        for r, _ in layers:  # each chunk list walks to its end (gaps of direct chunks included)
            region_chunks(core, r)


@pytest.mark.parametrize(
    "writer,compress,mib",
    [
        ("forked", "none", 16),
        ("paused", "none", 16),
        ("forked", "zstd", 16),
        ("paused", "zstd", 16),
        # A region from 64 MiB (RESTART_SPLIT_MIN) is filled by two threads: the full base's
        # pages, then each newer generation's chunks, split by the page they start at.
        ("forked", "none", 96),
        ("forked", "zstd", 96),
    ],
)
def test_two_cycles_through_chains(
    app: Path, tmp_path: Path, writer: str, compress: str, mib: int
) -> None:
    """Launch, a chain of one full and three incremental generations, SIGKILL, restart from the
    newest (the whole chain is read), again (the restarted process goes on with --incremental:
    a full generation, then three incremental ones), and the stitched output equals an
    uninterrupted run's. With --compress zstd, every generation's regions are chunks (the
    incremental ones' only their own pages) and verify checks every link."""
    args = [ARGS[0], str(mib), ARGS[2]]
    ref = native_reference(app, args, tmp_path / "ref_work", tmp_path / "ref_cwd")
    ckptdir, logs = tmp_path / "ckpt", tmp_path / "logs"
    opts = [*OPTS, "--keep", "2", "--compress", compress]
    opts += ["--no-fork-writer"] if writer == "paused" else []
    proc = launch(app, args, ckptdir, out_dir=logs, opts=opts)
    segments: list[Segment] = []
    try:
        for cycle in range(2):
            wait_for_step(proc, proc.last_step() + 20 if cycle else 40)
            taken = take_chain(proc, ckptdir, 1 + cycle * PER_CYCLE, PER_CYCLE)
            check_chain(taken, 1 + cycle * PER_CYCLE, compressed=compress != "none")
            kill9(proc)
            last = taken[-1]
            seg = Segment(proc.label, proc.lines(), last.before_signal, last.at_complete, last.gen)
            check_steps_contiguous(seg.lines, seg.label)
            segments.append(seg)
            assert last.gen is not None
            # --keep 2 keeps the chain the newest generation builds on (all of this cycle's),
            # and the first cycle's went once the second's full generation was there.
            wait_gens(last.gen.parent, list(range(1 + cycle * PER_CYCLE, 1 + (cycle + 1) * 4)))
            cp = crac("verify", str(last.gen), cwd=tmp_path)
            assert cp.returncode == 0 and b"chain" in cp.stdout, describe(cp)
            proc = restart(
                last.gen, out_dir=logs, label=f"restart{cycle + 1}", opts=["--compress", compress]
            )
            wait_for_step(proc, 1)
            check_resume_point(Segment(proc.label, proc.lines()), seg)
        status = wait_exit(proc)
        segments.append(Segment(proc.label, proc.lines()))
        assert status == 0, f"{proc.label} exited with {status}: {proc.stderr_text()[-2000:]}"
        assert_same_output(stitch(segments), ref.lines, "the stitched output")
        inspect_images(ckptdir)
    except BaseException:
        proc.stop()
        raise


@pytest.fixture
def chain(app: Path, tmp_path: Path) -> tuple[list[Segment], list[str]]:
    """A process checkpointed four times (gen-1 full, gen-2..4 incremental) and killed: the
    checkpoints, and the uninterrupted run's output."""
    ref = native_reference(app, ARGS, tmp_path / "ref_work", tmp_path / "ref_cwd")
    ckptdir, logs = tmp_path / "ckpt", tmp_path / "logs"
    proc, taken = launch_chain(app, ckptdir, logs, OPTS)
    check_chain(taken, 1)
    lines = proc.lines()
    return [
        Segment(s.label, lines, s.before_signal, s.at_complete, s.gen) for s in taken
    ], ref.lines


@pytest.mark.parametrize("lazy", [[], ["--lazy"]], ids=["eager", "lazy"])
def test_restart_from_the_middle(
    chain: tuple[list[Segment], list[str]], tmp_path: Path, lazy: list[str]
) -> None:
    """gen-3 of the chain gen-1..4: it reads gen-1 and gen-2 under it, never gen-4 (with
    --lazy too: the chain's regions are filled eagerly)."""
    taken, expected = chain
    middle = taken[2]
    assert middle.gen is not None
    proc = restart(
        middle.gen,
        out_dir=tmp_path / "logs",
        label="restart_middle",
        opts=lazy,
        env=base_env({"CRAC_DEBUG_PATH": "1"}),
    )
    check_finished(proc, expected, middle)
    # A chain restarts without Python's start-up too (docs/DECISIONS.md "Restart without Python").
    assert "restart path: native" in proc.stderr_text(), proc.stderr_text()[-2000:]


def test_replaced_parent_refused_like_python(
    chain: tuple[list[Segment], list[str]], tmp_path: Path
) -> None:
    """gen-2 replaced by a copy of gen-1 (a whole, valid generation, but not the one gen-3 was
    built on): `crac restart` of gen-4 declines the native path and refuses with the Python
    path's line, naming gen-2; nothing is removed."""
    taken, _ = chain
    gen4, gen2, gen1 = taken[3].gen, taken[1].gen, taken[0].gen
    assert gen4 is not None and gen2 is not None and gen1 is not None
    shutil.rmtree(gen2)
    shutil.copytree(gen1, gen2)
    fast = subprocess.run(
        [*crac_cmd(), "restart", str(gen4)],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        env=base_env({"CRAC_DEBUG_PATH": "1"}),
        timeout=120,
    )
    debug = [ln for ln in fast.stderr.decode().splitlines() if ln.startswith("crac: debug:")]
    assert any("restart path: Python (chain)" in ln for ln in debug), fast.stderr
    msg = assert_refused(run_restart(gen4), "a restart of gen-4 over a replaced gen-2")
    assert "gen-000002 is not the generation gen-000003 was built on" in msg, msg
    slow = subprocess.run(
        [sys.executable, "-m", "crac_py", "restart", str(gen4)],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        env=base_env(),
        timeout=120,
    )
    assert assert_refused(slow, "python -m crac_py restart") == msg
    assert all(seg.gen is not None and seg.gen.is_dir() for seg in taken)


def test_missing_parent_refused(chain: tuple[list[Segment], list[str]], tmp_path: Path) -> None:
    """gen-2 gone: restarting or verifying gen-4 says which link is missing, in one line, and
    leaves every generation in place; gen-1, complete, still restarts."""
    taken, expected = chain
    gen4, gen2 = taken[3].gen, taken[1].gen
    assert gen4 is not None and gen2 is not None
    aside = tmp_path / "gen-2-aside"
    shutil.move(gen2, aside)
    before = sorted(p.name for p in gen4.parent.iterdir())
    msg = assert_refused(run_restart(gen4), "a restart of gen-4 without gen-2")
    assert "gen-000002" in msg and "missing" in msg, msg
    cp = crac("verify", str(gen4), cwd=tmp_path)
    assert cp.returncode != 0, describe(cp)
    assert b"gen-000002" in cp.stdout + cp.stderr and b"missing" in cp.stdout, describe(cp)
    assert sorted(p.name for p in gen4.parent.iterdir()) == before
    assert crac("verify", str(taken[0].gen), cwd=tmp_path).returncode == 0
    first = taken[0]
    proc = restart(first.gen, out_dir=tmp_path / "logs", label="restart_first")  # type: ignore[arg-type]
    check_finished(proc, expected, first)


REGIONS_NOTE = next(n.type for n in image_format.NOTES if n.cname == "CRAC_NT_REGIONS")
ANON = next(e for e in image_format.ENUMS if e.name == "crac_region_kind").value("CRAC_REGION_ANON")


def anon_layers(gen: Path) -> dict[tuple[int, int], tuple[dict, bytes]]:
    """GEN's saved ANON regions by (start, end): the record and its bitmap (empty for a region
    saved whole)."""
    from crac_py.image.inspect import _crac_notes

    blob = _crac_notes(gen / "upper.core")[REGIONS_NOTE]
    rec, out, off = image_format.RECORD["crac_region_rec"], {}, 0
    while off < len(blob):
        r = rec.unpack(blob, off)
        at = off + rec.size + r["path_len"]
        if r["kind"] == ANON and r["core_offset"]:
            out[(r["start"], r["end"])] = (r, blob[at : at + r["bitmap_bytes"]])
        off += r["size"]
    return out


def marked(bitmap: bytes, i: int) -> bool:
    return bool(bitmap) and bool(bitmap[i // 8] >> (i % 8) & 1)


CHUNK = struct.Struct("<IIQIIII")  # struct crac_chunk_hdr (docs/IMAGE.md)


def region_chunks(data: bytes, r: dict) -> list[tuple[int, int, int, int]]:
    """(first page, pages, method, file offset of its stored bytes) of each chunk of region R
    (an incremental generation's regions are chunks, stored RAW without --compress; a chunk
    written O_DIRECT has its bytes on a page, GAP zero bytes after its header)."""
    out, pos = [], r["core_offset"]
    while True:
        magic, method, first, n, stored, _crc, gap = CHUNK.unpack_from(data, pos)
        assert magic == image_format.CHUNK_MAGIC, (r, pos)
        if n == 0:
            return out
        out.append((first, n, method, pos + CHUNK.size + gap))
        pos += CHUNK.size + gap + (stored + 7) // 8 * 8


def page_offset(data: bytes, r: dict, i: int) -> int | None:
    """Where page I of region R is stored in its upper.core DATA; None when it is not (a hole of
    a chunked region) or not as its bytes (a compressed chunk)."""
    if not r["flags"] & image_format.REGION_COMPRESSED:
        return r["core_offset"] + i * 4096
    for first, n, method, at in region_chunks(data, r):
        if first <= i < first + n:
            return at + (i - first) * 4096 if method == image_format.CHUNK_RAW else None
    return None


def first_inherited_byte(parent: Path, newer: list[Path], data: bytes) -> int | None:
    """Where in PARENT's upper.core DATA the first non-zero byte is of an incremental region's
    own pages that every generation of NEWER takes from it (a restart of the last reads it from
    PARENT); None when there is none."""
    layers = [anon_layers(g) for g in newer]
    return next(
        (
            off + b
            for key, (r, bits) in anon_layers(parent).items()
            if r["flags"] & image_format.REGION_INCREMENTAL and r["saved_pages"]
            for i in range((r["end"] - r["start"]) // 4096)
            if not marked(bits, i) and all(key in n and marked(n[key][1], i) for n in layers)
            if (off := page_offset(data, r, i)) is not None
            for b in range(0, 4096, 8)
            if any(data[off + b : off + b + 8])
        ),
        None,
    )


def test_damaged_parent_refused(chain: tuple[list[Segment], list[str]], tmp_path: Path) -> None:
    """A byte of gen-2's saved pages changed (its manifest intact), in a page gen-3 and gen-4
    take from it: the loader, filling gen-4's regions from the chain, refuses it and names
    gen-2; verify of gen-4 names it too. Under load the program may run hundreds of steps
    between two checkpoints and rewrite every page gen-2 saved before gen-4: then the page is
    one gen-3 takes, and gen-3 is restarted and verified."""
    taken, _ = chain
    gen4, gen3, gen2 = taken[3].gen, taken[2].gen, taken[1].gen
    assert gen4 is not None and gen3 is not None and gen2 is not None
    core = gen2 / "upper.core"
    data = bytearray(core.read_bytes())
    target, at = gen4, first_inherited_byte(gen2, [gen3, gen4], data)
    if at is None:
        target, at = gen3, first_inherited_byte(gen2, [gen3], data)
    assert at is not None, "gen-3 rewrote every page gen-2 saved: no damage a restart would read"
    data[at] ^= 0x40
    core.write_bytes(bytes(data))
    msg = assert_refused(run_restart(target), f"a restart of {target.name} over a damaged gen-2")
    assert "gen-000002" in msg and "checksum" in msg, msg
    cp = crac("verify", str(target), cwd=tmp_path)
    assert cp.returncode != 0 and b"gen-000002" in cp.stdout, describe(cp)


def test_damage_a_restart_does_not_read_is_found_by_verify(
    chain: tuple[list[Segment], list[str]], tmp_path: Path
) -> None:
    """A byte changed in a page of gen-1 that gen-2 rewrote: a restart of gen-4 never reads it
    (the program's memory is right), verify of gen-4 still checks every stored byte and names
    gen-1."""
    taken, expected = chain
    gen4, gen2, gen1 = taken[3].gen, taken[1].gen, taken[0].gen
    assert gen4 is not None and gen2 is not None and gen1 is not None
    newer = anon_layers(gen2)
    data = bytearray((gen1 / "upper.core").read_bytes())
    at = next(
        r["core_offset"] + i * 4096
        for key, (r, _) in anon_layers(gen1).items()
        if key in newer and newer[key][0]["flags"] & image_format.REGION_INCREMENTAL
        for i in range((r["end"] - r["start"]) // 4096)
        if not marked(newer[key][1], i)
        and any(data[r["core_offset"] + i * 4096 : r["core_offset"] + (i + 1) * 4096])
    )
    data[at + 100] ^= 0x40
    (gen1 / "upper.core").write_bytes(bytes(data))
    cp = crac("verify", str(gen4), cwd=tmp_path)
    assert cp.returncode != 0 and b"gen-000001" in cp.stdout, describe(cp)
    proc = restart(gen4, out_dir=tmp_path / "logs", label="restart_over_unread_damage")
    check_finished(proc, expected, taken[3])


def test_chain_restart_reads_each_page_once(
    chain: tuple[list[Segment], list[str]], tmp_path: Path
) -> None:
    """A restart of gen-4 (chain gen-1..4) reads only what it needs of the incremental regions:
    the newest generation's chunks, an older generation's chunk only when a page of it is not
    held by a newer one (whole, being checked by one CRC-32C), and the full base's pages once each,
    only those no newer generation holds: fewer than the layers hold together. The loader says how
    many pages it read with CRAC_TIMING=1."""
    taken, expected = chain
    gens = [s.gen for s in reversed(taken)]  # newest first
    assert all(g is not None for g in gens)
    layers = [anon_layers(g) for g in gens]  # type: ignore[arg-type]
    cores = [(g / "upper.core").read_bytes() for g in gens]  # type: ignore[operator]
    want = stored = 0
    for key, (top, _) in layers[0].items():
        if not top["flags"] & image_format.REGION_INCREMENTAL:
            continue
        depth = next(k for k, layer in enumerate(layers) if not layer[key][1]) + 1
        held: set[int] = set()  # pages a newer generation holds (saved or zero)
        for k, (layer, core) in enumerate(zip(layers[:depth], cores)):
            r, bits = layer[key]
            own = {i for i in range((key[1] - key[0]) // 4096) if not marked(bits, i)}
            if r["flags"] & image_format.REGION_COMPRESSED:
                # A chunk is read whole when one of its pages is wanted; the newest's all are.
                for first, n, _, _ in region_chunks(core, r):
                    if k == 0 or any(i not in held for i in range(first, first + n)):
                        want += n
            else:  # the base: each wanted page holding data, once
                for i in own - held:
                    off = r["core_offset"] + i * 4096
                    want += any(core[off : off + 4096])
            held |= own
        stored += sum(layer[key][0]["saved_pages"] for layer in layers[:depth])
    assert 0 < want < stored, (want, stored)
    proc = restart(
        gens[0],  # type: ignore[arg-type]
        out_dir=tmp_path / "logs",
        label="restart_counted",
        env=base_env({"CRAC_TIMING": "1"}),
    )
    check_finished(proc, expected, taken[3])
    said = [ln for ln in proc.stderr_text().splitlines() if "a chain of 4 generations" in ln]
    assert said, proc.stderr_text()[-2000:]
    assert said[0].endswith(f": {want} pages read"), (said, want, stored)


def damageable_chunk(taken: list[Segment]) -> int | None:
    """The offset, in gen-2's upper.core, of the middle of a stored chunk of an incremental
    region holding a page gen-3 and gen-4 both take from gen-2; None when the program rewrote
    every such page since (its dirtying is random, and under load many steps pass between two
    checkpoints)."""
    gen4, gen3, gen2 = taken[3].gen, taken[2].gen, taken[1].gen
    assert gen4 is not None and gen3 is not None and gen2 is not None
    newer = [anon_layers(gen3), anon_layers(gen4)]
    chunk = image_format.RECORD["crac_chunk_hdr"].struct
    data = (gen2 / "upper.core").read_bytes()
    for key, (r, _) in anon_layers(gen2).items():
        if not r["flags"] & image_format.REGION_INCREMENTAL:
            continue
        pos = r["core_offset"]
        while True:
            _, _, first, n, stored, _, _ = chunk.unpack_from(data, pos)
            if n == 0:
                break
            if any(
                all(key in m and marked(m[key][1], i) for m in newer)
                for i in range(first, first + n)
            ):
                return pos + chunk.size + stored // 2
            pos += chunk.size + (stored + 7) // 8 * 8
    return None


def test_compressed_chain_damaged_parent_refused(app: Path, tmp_path: Path) -> None:
    """--compress zstd: a byte changed in a chunk of gen-2 holding a page gen-3 and gen-4 take
    from it: restart and verify of gen-4 refuse it and name gen-2. A chain where the program
    happened to rewrite all of gen-2's pages before gen-3 and gen-4 is taken again (3 tries)."""
    for attempt in range(3):
        ckptdir = tmp_path / f"ckpt{attempt}"
        _, taken = launch_chain(
            app, ckptdir, tmp_path / f"logs{attempt}", [*OPTS, "--compress", "zstd"]
        )
        check_chain(taken, 1, compressed=True)
        gen4, gen2 = taken[3].gen, taken[1].gen
        assert gen4 is not None and gen2 is not None
        assert crac("verify", str(gen4), cwd=tmp_path).returncode == 0
        at = damageable_chunk(taken)
        if at is not None:
            break
    assert at is not None, "3 chains, none with a chunk of gen-2 that gen-3 and gen-4 read"
    data = bytearray((gen2 / "upper.core").read_bytes())
    data[at] ^= 0x40
    (gen2 / "upper.core").write_bytes(bytes(data))
    msg = assert_refused(run_restart(gen4), "a restart of gen-4 over a damaged gen-2 chunk")
    assert "gen-000002" in msg and "checksum" in msg, msg
    cp = crac("verify", str(gen4), cwd=tmp_path)
    assert cp.returncode != 0 and b"gen-000002" in cp.stdout, describe(cp)


def wait_gens(procdir: Path, want: list[int], timeout: float = 120) -> None:
    """Pruning runs once `latest` names the new generation: wait until it is done."""
    names = [f"gen-{g:06d}" for g in want]
    deadline = time.monotonic() + timeout
    while True:
        have = sorted(p.name for p in procdir.glob("gen-*") if not p.name.endswith(".tmp"))
        if have == names:
            return
        if time.monotonic() > deadline:
            pytest.fail(f"{procdir}: {have}, expected {names}")
        time.sleep(0.1)


def test_keep_with_chains(app: Path, tmp_path: Path) -> None:
    """--keep 1 --full-every 3: gen-1 full, gen-2 and gen-3 on it, gen-4 full, gen-5 on it. A
    kept generation's chain stays whole; a new full generation lets the old chain go."""
    ckptdir, logs = tmp_path / "ckpt", tmp_path / "logs"
    opts = ["--incremental", "--full-every", "3", "--keep", "1"]
    proc = launch(app, ["100000", "16", "10"], ckptdir, out_dir=logs, opts=opts)
    try:
        wait_for_step(proc, 20)
        kept = {1: [1], 2: [1, 2], 3: [1, 2, 3], 4: [4], 5: [4, 5]}
        for g in range(1, 6):
            gen = checkpoint(proc, ckptdir)
            assert gen.name == f"gen-{g:06d}"
            assert manifest(gen)["incremental"]["parent"] == (0 if g in (1, 4) else g - 1)
            wait_gens(gen.parent, kept[g])
            wait_for_step(proc, proc.last_step() + 5)
        kill9(proc)
    except BaseException:
        proc.stop()
        raise
    assert crac("verify", str(gen), cwd=tmp_path).returncode == 0


def test_tree_each_process_its_own_chain(apps: dict[str, Path], tmp_path: Path) -> None:
    """A forked child (a process of the job) keeps its own chain: three job checkpoints (`-bc`)
    make gen-1 full and gen-2, gen-3 incremental in each process's directory, each on its own
    gen before; the job restarted from them (the chains) finishes as an uninterrupted run."""
    require_native()
    steps, tags, ckptdir, logs = 600, ["T.p", "T.c"], tmp_path / "ckpt", tmp_path / "logs"
    coord = Coordinator(tmp_path / "coord")
    port = coord.port
    argv = [*crac_cmd(), "launch", *OPTS, "--join-coordinator", "-p", str(port), "-c", str(ckptdir)]
    root = CracProc(
        [*argv, "--", str(apps["tree_counter"]), "T", str(steps), "20"],
        out_dir=logs,
        label="launch",
        env=base_env(),
    )
    out = Output(root.out_path, "launch")
    run = None
    try:
        coord.wait_peers(2)  # the root and its forked child
        wait_steps(out, tags, 30, root)
        for k in range(3):
            before = {t: out.last_step(t) for t in tags}
            script = bcheckpoint(port)
            after = {t: out.last_step(t) for t in tags}
            gens = listed_generations(script)
            assert len(gens) == 2 and all(g.name == f"gen-{k + 1:06d}" for g in gens), gens
            for g in gens:
                assert manifest(g)["incremental"]["parent"] == k, manifest(g)["incremental"]
            wait_past(out, tags, after, 5, root)
        kill_tree(ckptdir, b"tree_counter")  # the tree (its pids name the directories)
        wait_exit(root)
        coord.stop()
        chains = {t: [s] for t, s in segments_of(out, tags, before, after).items()}
        run = ScriptRun(script, logs, "restart1", "-p", str(port))
        assert run.wait() == 0, run.report()
        wait_every_done(run, tags)
        for t, seg in segments_of(run.out, tags, None, None).items():
            chains[t].append(seg)
        check_tag_chain(chains, steps, ckptdir)
    except BaseException:
        print(root.report(), coord.log_text(), run.report() if run else "", sep="\n")
        raise
    finally:
        if run is not None:
            run.kill()
        root.stop()
        coord.stop()


def test_restart_of_a_full_generation_goes_on_incrementally(
    chain: tuple[list[Segment], list[str]], tmp_path: Path
) -> None:
    """gen-1 (full, format 2) of an --incremental run, restarted without options on the fast
    restart path (without Python, which passes the recorded --full-every on): the restarted
    program's checkpoints are still incremental after its first (full) one."""
    taken, _ = chain
    first = taken[0].gen
    assert first is not None
    for seg in taken[1:]:  # the new run's generations go on from gen-2
        assert seg.gen is not None
        shutil.rmtree(seg.gen)
    proc = restart(
        first,
        out_dir=tmp_path / "logs",
        label="restart_full",
        env=base_env({"CRAC_DEBUG_PATH": "1"}),
    )
    try:
        wait_for_step(proc, 1)
        assert "restart path: native" in proc.stderr_text(), proc.stderr_text()[-2000:]
        gens = [checkpoint(proc, first.parent.parent)]
        wait_for_step(proc, proc.last_step() + 5)
        gens.append(checkpoint(proc, first.parent.parent))
        kill9(proc)
    except BaseException:
        proc.stop()
        raise
    incs = [manifest(g)["incremental"] for g in gens]
    assert incs[0]["full_every"] == 8 and incs[0]["parent"] == 0, incs
    assert incs[1]["parent"] == int(gens[0].name[4:]), incs
