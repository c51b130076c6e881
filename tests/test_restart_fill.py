"""The eager restart's fill of large anonymous regions (loader/restart/restart_memory.c fill_anon):
from 64 MiB a region is filled by two threads, one half each, their CRC-32Cs joined by
crc32c_combine into the region's. Two cycles with a large written region and a large sparse one;
a byte changed in either half of a large region, or in its last page, is refused with one line
naming the region."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from ckpt_harness import (
    assert_refused,
    build_ckpt_apps,
    checkpoint,
    kill9,
    launch,
    restart,
    run_cycles,
    run_restart,
    wait_for_step,
)
from conftest import crac_cmd, describe

# ckpt_sparse STEPS DIRTY_MIB MS REGION_MIB: 96 MiB written (every page data) and a 128 MiB
# region of 16 pattern pages, the rest holes: both above the split size, one dense, one sparse.
# 400 steps of 20 ms (as test_ckpt_programs runs it): the program runs on while a checkpoint is
# written, so on a loaded machine a short run can end before the second cycle.
DIRTY_MIB, SPARSE_MIB = 96, 128


@pytest.fixture(scope="module")
def apps(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    return build_ckpt_apps(tmp_path_factory)


def test_large_regions_two_cycles(apps: dict[str, Path], tmp_path: Path) -> None:
    run_cycles(
        apps["ckpt_sparse"], ["400", str(DIRTY_MIB), "20", str(SPARSE_MIB)], tmp_path, cycles=2
    )


@pytest.fixture(scope="module")
def dense_gen(apps: dict[str, Path], tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict]:
    """A generation of ckpt_sparse and the record of its written region."""
    work = tmp_path_factory.mktemp("fill")
    ckptdir = work / "ckpt"
    ckptdir.mkdir()
    args = ["100000", str(DIRTY_MIB), "20", str(SPARSE_MIB)]
    proc = launch(apps["ckpt_sparse"], args, ckptdir, out_dir=work)
    try:
        wait_for_step(proc, 3)
        gen = checkpoint(proc, ckptdir)
    finally:
        kill9(proc)
    cp = subprocess.run(
        [*crac_cmd(), "inspect", "--json", str(gen)], capture_output=True, timeout=120
    )
    assert cp.returncode == 0, describe(cp)
    regions = json.loads(cp.stdout)["notes"]["regions"]
    dense = [r for r in regions if r["end"] - r["start"] == DIRTY_MIB << 20]
    assert len(dense) == 1, regions
    return gen, dense[0]


@pytest.mark.parametrize("where", ["first half", "second half", "last page"])
def test_changed_byte_in_a_large_region_is_refused(
    dense_gen: tuple[Path, dict], where: str
) -> None:
    gen, region = dense_gen
    size = region["end"] - region["start"]
    at = (
        region["core_offset"]
        + {
            "first half": size // 4 + 100,
            "second half": size * 3 // 4 + 100,
            "last page": size - 8,
        }[where]
    )
    core = gen / "upper.core"
    with core.open("r+b") as fh:
        fh.seek(at)
        byte = fh.read(1)[0]
        fh.seek(at)
        fh.write(bytes([byte ^ 0x10]))
    try:
        line = assert_refused(run_restart(gen), where)
    finally:  # the next case changes another byte of the same image
        with core.open("r+b") as fh:
            fh.seek(at)
            fh.write(bytes([byte]))
    want = f"image corrupted: region {region['start']:#x}-{region['end']:#x}"
    assert want in line and "fails its checksum" in line, line


def test_image_restored_restarts(dense_gen: tuple[Path, dict], tmp_path: Path) -> None:
    """The same image, every byte as written, is not refused: the refusals above come from the
    changed byte (the restarted program then runs on; it is stopped once past its first step)."""
    gen, _ = dense_gen
    proc = restart(gen, out_dir=tmp_path, label="intact")
    try:
        wait_for_step(proc, 5)
    finally:
        kill9(proc)
