"""`crac verify` and the checks of upper.core (docs/IMAGE.md, "Checksums": format 2, the header's
and each region's CRC-32C, no whole-file digest) on a sparse image spanning several 64 MiB: the
image the loader wrote passes; a copy with the holes filled in passes; a changed byte in a data
page or in a hole fails."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest
from ckpt_harness import base_env, build_ckpt_apps, checkpoint, kill9, launch, wait_for_step
from conftest import crac_cmd

PAGE = 4096


@pytest.fixture(scope="module")
def sparse_gen(tmp_path_factory) -> Path:
    """A generation of ckpt_sparse with a 256 MiB region (16 pattern pages) and 4 MiB written:
    upper.core spans five chunks, most of it holes."""
    apps = build_ckpt_apps(tmp_path_factory)
    work = tmp_path_factory.mktemp("sparse")
    ckptdir = work / "ckpt"
    ckptdir.mkdir()
    proc = launch(apps["ckpt_sparse"], ["100000", "4", "20", "256"], ckptdir, out_dir=work)
    try:
        wait_for_step(proc, 3)
        gen = checkpoint(proc, ckptdir)
    finally:
        kill9(proc)
    return gen


def verify(path: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [*crac_cmd(), "verify", "--json", str(path)],
        capture_output=True,
        text=True,
        env=base_env(),
        timeout=120,
    )


def core_check(cp: subprocess.CompletedProcess) -> dict:
    reports = json.loads(cp.stdout)
    (check,) = [c for c in reports[0]["checks"] if c["name"] == "upper.core"]
    return check


def test_loader_and_verify_agree(sparse_gen):
    manifest = json.loads((sparse_gen / "MANIFEST.json").read_text())
    entry = manifest["files"]["upper.core"]
    assert entry == {"size": entry["size"], "crc32c_regions": True}, entry
    core = sparse_gen / "upper.core"
    assert core.stat().st_size > 4 * 64 << 20, "the image should span several chunks"
    assert core.stat().st_blocks * 512 < 64 << 20, "the image should be sparse"
    cp = verify(sparse_gen)
    assert cp.returncode == 0, cp.stdout + cp.stderr
    assert core_check(cp)["status"] == "OK"


def copy_filled(gen: Path, dest: Path) -> Path:
    shutil.copytree(gen, dest)
    core = dest / "upper.core"
    core.unlink()
    subprocess.run(["cp", "--sparse=never", str(gen / "upper.core"), str(core)], check=True)
    assert core.stat().st_blocks * 512 >= core.stat().st_size - PAGE
    return dest


def test_holes_filled_in_keep_the_digest(sparse_gen, tmp_path):
    cp = verify(copy_filled(sparse_gen, tmp_path / "filled"))
    assert cp.returncode == 0, cp.stdout + cp.stderr


def extents(core: Path) -> list[tuple[int, int]]:
    """The data extents of the file, as (start, end)."""
    out = []
    with core.open("rb") as fh:
        fd = fh.fileno()
        size = os.fstat(fd).st_size
        pos = 0
        while pos < size:
            try:
                start = os.lseek(fd, pos, os.SEEK_DATA)
            except OSError:  # ENXIO: only a hole is left
                break
            pos = os.lseek(fd, start, os.SEEK_HOLE)
            out.append((start, pos))
    return out


def data_and_hole_offsets(core: Path) -> tuple[int, int]:
    """A byte of region data (the start of the extent after the largest hole) and the byte in
    the middle of that hole. Where zero pages fall varies from run to run (a 4 KiB hole can sit
    in the first region), so the largest hole is taken, not the first."""
    ext = extents(core)
    assert len(ext) >= 2, ext
    gaps = [(ext[i + 1][0] - ext[i][1], i) for i in range(len(ext) - 1)]
    _, i = max(gaps)
    hole_start, hole_end = ext[i][1], ext[i + 1][0]
    return ext[i + 1][0] + 100, (hole_start + hole_end) // 2


@pytest.mark.parametrize("where", ["data", "hole"])
def test_a_changed_byte_breaks_the_digest(sparse_gen, tmp_path, where):
    gen = copy_filled(sparse_gen, tmp_path / "changed")
    data_off, hole_off = data_and_hole_offsets(sparse_gen / "upper.core")
    offset = data_off if where == "data" else hole_off
    with (gen / "upper.core").open("r+b") as fh:
        fh.seek(offset)
        byte = fh.read(1)[0]
        fh.seek(offset)
        fh.write(bytes([byte ^ 0x40]))
    cp = verify(gen)
    assert cp.returncode == 2, cp.stdout + cp.stderr
    check = core_check(cp)
    assert check["status"] == "FAIL" and "checksum" in check["detail"], check
