"""Restart fill through the huge-page staging buffer (loader/restart/restart_stage.c, used by the
eager fill and the lazy prefetch): ckpt_huge's regions start a page past a 2 MiB boundary and end
3 pages past one, hold data only beside huge-page boundaries, or are all zero though written;
two cycles, eager and lazy, with CRAC_RESTART_STAGE=1 (the staging buffer, off by default) and
without, give the uninterrupted run's output (every page checked every 25
steps and at the end). Under --lazy, upper.core unlinked mid-way is still read (the restart keeps
it open); emptied and unlinked, the program ends with one clear line, never a hang."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from ckpt_harness import (
    RUN_TIMEOUT,
    WAIT_TIMEOUT,
    CracProc,
    build_app,
    launch_image,
    native_reference,
    restart,
    run_cycles,
    wait_exit,
    wait_for_step,
)

APPS = Path(__file__).parent / "apps"
# STEPS MIB MS: 24 MiB (12 huge pages, the dense region's last one partly) of each kind.
ARGS = ["300", "24", "20"]


@pytest.fixture(scope="module")
def app(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_app(tmp_path_factory, APPS / "ckpt_huge.c")


@pytest.fixture(params=["0", "1"], ids=["in-place", "staged"])
def stage(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """CRAC_RESTART_STAGE: the fill through the staging buffer and UFFDIO_MOVE, or without."""
    monkeypatch.setenv("CRAC_RESTART_STAGE", request.param)
    return request.param


def test_two_cycles_eager(app: Path, tmp_path: Path, stage: str) -> None:
    run_cycles(app, ARGS, tmp_path)


def test_two_cycles_lazy(
    app: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, stage: str
) -> None:
    """The prefetcher slowed so the program runs (and faults) while huge pages are missing."""
    monkeypatch.setenv("CRAC_LAZY_PREFETCH_DELAY_MS", "20")
    run_cycles(app, ARGS, tmp_path, restart_opts=["--lazy"])


def _lazy_restart(
    app: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> tuple[CracProc, Path]:
    ckptdir = tmp_path / "ckpt"
    ckptdir.mkdir()
    gen = launch_image(app, ["2000", "24", "20"], ckptdir, out_dir=tmp_path, label="first")
    monkeypatch.setenv("CRAC_LAZY_PREFETCH_DELAY_MS", "300")
    return restart(ckptdir, out_dir=tmp_path, label="lazy", opts=["--lazy"]), gen


def test_image_unlinked_mid_way_lazy(
    app: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, stage: str
) -> None:
    """upper.core unlinked while pages are missing: the restart holds it open and finishes."""
    args = ["60", "24", "20"]
    ref = native_reference(app, args, tmp_path / "ref", tmp_path / "ref_cwd")
    ckptdir = tmp_path / "ckpt"
    ckptdir.mkdir()
    gen = launch_image(app, args, ckptdir, out_dir=tmp_path, label="first")
    monkeypatch.setenv("CRAC_LAZY_PREFETCH_DELAY_MS", "100")
    proc = restart(ckptdir, out_dir=tmp_path, label="lazy", opts=["--lazy"])
    try:
        wait_for_step(proc, 8)
        (gen / "upper.core").unlink()
        status = wait_exit(proc, RUN_TIMEOUT)
    finally:
        proc.stop()
    assert status == 0, proc.report()
    assert proc.stdout_text().splitlines()[-1] == ref.done, proc.report()


def test_image_emptied_and_removed_lazy(
    app: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, stage: str
) -> None:
    """upper.core emptied then unlinked while pages are missing: status 2 and one `crac: error:`
    line naming the region and the image, never a hang on a missing page."""
    proc, gen = _lazy_restart(app, tmp_path, monkeypatch)
    try:
        wait_for_step(proc, 3)
        core = gen / "upper.core"
        os.truncate(core, 0)
        core.unlink()
        status = wait_exit(proc, WAIT_TIMEOUT)
    finally:
        proc.stop()
    assert status == 2, proc.report()
    err = [ln for ln in proc.stderr_text().splitlines() if ln.strip()]
    assert len(err) == 1 and err[0].startswith("crac: error: lazy restart: region 0x"), err
    assert str(gen / "upper.core") in err[0] and "truncated" in err[0], err
    assert "DONE" not in proc.stdout_text()
