"""`crac restart --lazy` (docs/DECISIONS.md "Lazy restart"): anonymous memory comes back on first
touch and by a prefetcher. Two checkpoint/restart cycles give the uninterrupted run's results
(plain and compressed images, threads, a program that forks while pages are still missing, a
checkpoint taken while the prefetcher runs), the userfaultfd goes once every page is back, and an
image truncated or damaged during a lazy restart ends the program with one clear line, never a
hang.

CRAC_LAZY_PREFETCH_DELAY_MS (a test knob) makes the prefetcher wait between its 1 MiB steps, so
the program runs, forks and is checkpointed while pages are missing."""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path

import pytest
from ckpt_harness import (
    RUN_TIMEOUT,
    WAIT_TIMEOUT,
    CracProc,
    build_ckpt_apps,
    checkpoint,
    kill9,
    launch_image,
    native_reference,
    restart,
    run_cycles,
    wait_exit,
    wait_for_step,
)
from conftest import CFLAGS, crac_cmd, describe

APPS = Path(__file__).parent / "apps"


def _build(tmp_path_factory: pytest.TempPathFactory, name: str) -> Path:
    out = tmp_path_factory.mktemp(name) / name
    cmd = ["gcc", *CFLAGS, "-o", str(out), str(APPS / f"{name}.c")]
    res = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr
    return out


@pytest.fixture(scope="module")
def apps(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    built = build_ckpt_apps(tmp_path_factory)
    for name in ("ckpt_compress", "ckpt_lazy_fork"):
        built[name] = _build(tmp_path_factory, name)
    return built


@pytest.mark.parametrize("compress", ["none", "zstd"])
def test_two_cycles(
    apps: dict[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch, compress: str
) -> None:
    """Every page checked every 25 steps, the holey region included (pages of no extent, or of
    no chunk, read as zeros); the prefetcher slowed so the program runs while pages are missing."""
    monkeypatch.setenv("CRAC_LAZY_PREFETCH_DELAY_MS", "50")
    run_cycles(
        apps["ckpt_compress"],
        ["600", "8", "20"],
        tmp_path,
        launch_opts=["--compress", compress],
        restart_opts=["--lazy", "--compress", compress],
    )


def test_threads_env(
    apps: dict[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A multithreaded program, lazy through CRAC_LAZY_RESTART=1."""
    monkeypatch.setenv("CRAC_LAZY_RESTART", "1")
    monkeypatch.setenv("CRAC_LAZY_PREFETCH_DELAY_MS", "20")
    run_cycles(apps["ckpt_threads"], [], tmp_path)


def _image(app: Path, args: list[str], tmp_path: Path) -> tuple[Path, Path]:
    """A generation of app (checkpointed at step 5, then SIGKILLed); (ckptdir, gen)."""
    ckptdir = tmp_path / "ckpt"
    ckptdir.mkdir()
    return ckptdir, launch_image(app, args, ckptdir, out_dir=tmp_path, label="first")


def _lazy(
    ckptdir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, delay_ms: int
) -> CracProc:
    """`crac restart --lazy CKPTDIR`, its prefetcher waiting DELAY_MS between its steps."""
    monkeypatch.setenv("CRAC_LAZY_PREFETCH_DELAY_MS", str(delay_ms))
    return restart(ckptdir, out_dir=tmp_path, label="lazy", opts=["--lazy"])


def _status(proc: CracProc, timeout: float = RUN_TIMEOUT) -> int:
    """PROC's exit status once it ended by itself (it is killed if it did not in TIMEOUT)."""
    try:
        return wait_exit(proc, timeout)
    finally:
        proc.stop()


def _uffd_open(pid: int) -> bool:
    try:
        fds = os.listdir(f"/proc/{pid}/fd")
    except FileNotFoundError:
        return False
    for fd in fds:
        try:
            if "userfaultfd" in os.readlink(f"/proc/{pid}/fd/{fd}"):
                return True
        except OSError:
            continue
    return False


def _wait_closed(pid: int) -> None:
    deadline = time.monotonic() + WAIT_TIMEOUT
    while _uffd_open(pid):
        assert time.monotonic() < deadline, "the prefetcher did not finish"
        time.sleep(0.05)


def test_prefetch_completes(
    apps: dict[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The program runs while the userfaultfd is open, the prefetcher closes it once every page
    is back, and the program then finishes as it should (all 32 MiB checked at its end)."""
    ckptdir, gen = _image(apps["ckpt_compress"], ["400", "8", "20"], tmp_path)
    proc = _lazy(ckptdir, tmp_path, monkeypatch, 100)
    try:
        wait_for_step(proc, 7)
        assert _uffd_open(proc.pid), proc.report()
        _wait_closed(proc.pid)
        assert wait_exit(proc, WAIT_TIMEOUT) == 0, proc.report()
    finally:
        proc.stop()
    assert "DONE" in proc.stdout_text(), proc.report()


def test_fork_while_pages_missing(
    apps: dict[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Checkpointed before it forks (no child to lose); lazily restarted, it forks at each step
    and a child checks all 64 MiB of its copy: the fork waits for the prefetcher, so no child sees
    a page that was still missing as zeros. The result is the uninterrupted run's."""
    args = ["60", "64", "100", "30"]
    ref = native_reference(apps["ckpt_lazy_fork"], args, tmp_path / "ref", tmp_path / "ref_cwd")
    ckptdir, _ = _image(apps["ckpt_lazy_fork"], args, tmp_path)
    proc = _lazy(ckptdir, tmp_path, monkeypatch, 200)
    status = _status(proc)
    assert status == 0, proc.report()
    done = [ln for ln in proc.stdout_text().splitlines() if ln.startswith("DONE")]
    assert done == [ref.lines[-1]], proc.report()


def test_dropped_pages_read_as_zeros(
    apps: dict[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The program drops half its memory (MADV_DONTNEED) while pages are missing: those pages
    read as zeros, not as the image had them (the madvise's REMOVE event marks them)."""
    args = ["40", "64", "20", "1000000", "15"]
    ref = native_reference(apps["ckpt_lazy_fork"], args, tmp_path / "ref", tmp_path / "ref_cwd")
    ckptdir, _ = _image(apps["ckpt_lazy_fork"], args, tmp_path)
    proc = _lazy(ckptdir, tmp_path, monkeypatch, 200)
    status = _status(proc)
    assert status == 0, proc.report()
    assert proc.stdout_text().splitlines()[-1] == ref.done, proc.report()


def test_checkpoint_while_prefetching(
    apps: dict[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A checkpoint asked for while the prefetcher still runs waits for it: the image it writes
    has every page, and restarting it (eagerly) finishes as the uninterrupted run does (every page
    is checked every 25 steps and at the end)."""
    args = ["400", "8", "20"]
    ref = native_reference(apps["ckpt_compress"], args, tmp_path / "ref", tmp_path / "ref_cwd")
    ckptdir, first = _image(apps["ckpt_compress"], args, tmp_path)
    proc = _lazy(ckptdir, tmp_path, monkeypatch, 60)
    try:
        # The first step the restarted program prints: its faults (a few pages a step) cut the
        # prefetcher's pauses short, so a few steps later all 32 MiB may be back already.
        wait_for_step(proc, 6)
        assert _uffd_open(proc.pid), proc.report()
        second = checkpoint(proc, ckptdir)
        kill9(proc)
    finally:
        proc.stop()
    assert second != first
    monkeypatch.delenv("CRAC_LAZY_PREFETCH_DELAY_MS")
    again = restart(second, out_dir=tmp_path, label="again")
    status = _status(again)
    assert status == 0, again.report()
    assert again.stdout_text().splitlines()[-1] == ref.done, again.report()


def test_damaged_page_found_by_prefetcher(
    apps: dict[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A byte of the 64 MiB region changed in upper.core after the program already runs: the
    prefetcher's CRC-32C of the region differs, the program is ended (status 2, one line naming
    the region and the image), it never goes on with that memory."""
    app = apps["ckpt_lazy_fork"]
    ckptdir, gen = _image(app, ["100000", "64", "20", "1000000"], tmp_path)
    cp = subprocess.run(
        [*crac_cmd(), "inspect", "--json", str(gen)], capture_output=True, timeout=120
    )
    assert cp.returncode == 0, describe(cp)
    big = [
        r for r in json.loads(cp.stdout)["notes"]["regions"] if r["end"] - r["start"] == 64 << 20
    ]
    assert len(big) == 1, big
    region = big[0]
    proc = _lazy(ckptdir, tmp_path, monkeypatch, 200)
    try:
        wait_for_step(proc, 7)
        assert _uffd_open(proc.pid), proc.report()
        with open(gen / "upper.core", "r+b") as f:  # a data word of a page near the region's end
            f.seek(region["core_offset"] + (60 << 20))
            word = f.read(8)
            f.seek(region["core_offset"] + (60 << 20))
            f.write(bytes(b ^ 0x5A for b in word))
        status = wait_exit(proc, WAIT_TIMEOUT)
    finally:
        proc.stop()
    assert status == 2, proc.report()
    err = [ln for ln in proc.stderr_text().splitlines() if ln.strip()]
    want = f"crac: error: lazy restart: region {region['start']:#x}-{region['end']:#x}"
    assert len(err) == 1 and err[0].startswith(want), (want, err)
    assert str(gen / "upper.core") in err[0] and "checksum" in err[0], err


def test_image_truncated_mid_way(
    apps: dict[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """upper.core cut short while the program already runs: it ends with status 2 and one
    `crac: error:` line naming the region and the image, never hangs on a missing page."""
    ckptdir, gen = _image(apps["ckpt_compress"], ["2000", "16", "20"], tmp_path)
    proc = _lazy(ckptdir, tmp_path, monkeypatch, 200)
    try:
        wait_for_step(proc, 7)
        assert _uffd_open(proc.pid), proc.report()
        os.truncate(gen / "upper.core", 8192)
        status = wait_exit(proc, WAIT_TIMEOUT)
    finally:
        proc.stop()
    assert status == 2, proc.report()
    err = [ln for ln in proc.stderr_text().splitlines() if ln.strip()]
    assert len(err) == 1 and err[0].startswith("crac: error: lazy restart: region 0x"), err
    assert str(gen / "upper.core") in err[0] and "truncated" in err[0], err
    assert "DONE" not in proc.stdout_text()


@pytest.fixture(scope="module")
def storm_app(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _build(tmp_path_factory, "ckpt_lazy_storm")


@pytest.mark.parametrize("prefetchers", ["1", "2", "3"])
def test_fault_storm_with_prefetch_threads(
    storm_app: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, prefetchers: str
) -> None:
    """Eight threads check and rewrite random pages of 128 MiB at full speed while one, two or
    three prefetch threads fill it (no delay): every page is as written, and each region's CRC,
    combined from blocks checked out of order, matches (else status 2)."""
    monkeypatch.setenv("CRAC_LAZY_PREFETCH_THREADS", prefetchers)
    run_cycles(storm_app, ["300", "128", "8", "0"], tmp_path, restart_opts=["--lazy"])


def test_drops_race_the_prefetchers(
    storm_app: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The same storm, each thread also dropping pages (MADV_DONTNEED) while two prefetchers copy
    (no delay): a copy made while a REMOVE event is unread fails with EAGAIN until the event is
    read. Before the separate fault server, the one thread that both copied and read events
    retried such a copy forever and the program hung in madvise; a dropped page must read as
    zeros at once, never as the image had it."""
    monkeypatch.setenv("CRAC_LAZY_PREFETCH_THREADS", "2")
    run_cycles(storm_app, ["300", "128", "8", "1"], tmp_path, restart_opts=["--lazy"])


def test_prefetch_threads_knob_checked(storm_app: Path, tmp_path: Path) -> None:
    """CRAC_LAZY_PREFETCH_THREADS out of range: one clear error line, no restart."""
    ckptdir, _ = _image(storm_app, ["1000000", "8", "2", "0"], tmp_path)
    env = {**os.environ, "CRAC_LAZY_PREFETCH_THREADS": "0"}
    cp = subprocess.run(
        [*crac_cmd(), "restart", "--lazy", str(ckptdir)],
        capture_output=True,
        text=True,
        env=env,
        timeout=WAIT_TIMEOUT,
    )
    assert cp.returncode != 0, describe(cp)
    err = [ln for ln in cp.stderr.splitlines() if ln.strip()]
    assert err and err[-1].startswith("crac: error: ") and "PREFETCH_THREADS" in err[-1], err
