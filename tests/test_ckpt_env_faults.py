"""Faults from the environment: the disk fills up during a checkpoint (the checkpoint is
abandoned with a clear message, the program goes on, the previous generation stays the one a
restart finds), and the upper window is already taken when crac starts (clear refusal, exit 2)."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

import pytest
from conftest import CFLAGS, DEFAULT_TIMEOUT, crac_cmd, require_native

REPO = Path(__file__).resolve().parent.parent
COUNTER = REPO / "tests" / "apps" / "ckpt_counter.c"


def build(tmp_path: Path, src: Path, name: str, *extra: str) -> Path:
    out = tmp_path / name
    subprocess.run(["gcc", *CFLAGS, *extra, "-o", str(out), str(src)], check=True, timeout=120)
    return out


def wait_latest(proc_dir_parent: Path, gen: str, timeout: float = 60) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for p in proc_dir_parent.glob(f"ckpt_*/{gen}/MANIFEST.json"):
            return True
        time.sleep(0.02)
    return False


@pytest.fixture
def tiny_fs(tmp_path: Path):
    """A 4 MiB tmpfs (the tests run as root, as CI does)."""
    mnt = tmp_path / "tiny"
    mnt.mkdir()
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=4m", "tmpfs", str(mnt)],
                       capture_output=True, text=True)  # fmt: skip
    if r.returncode != 0:
        pytest.skip(f"cannot mount a small tmpfs to fill up here: {r.stderr.strip()}")
    yield mnt
    subprocess.run(["umount", "-l", str(mnt)], check=False)


def test_disk_full_during_checkpoint(tmp_path, tiny_fs):
    require_native()
    app = build(tmp_path, COUNTER, "ckpt_counter")
    cmd = [*crac_cmd(), "launch", "-c", str(tiny_fs), "--", str(app), "150", "30"]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    time.sleep(1.0)
    os.kill(proc.pid, signal.SIGUSR2)
    assert wait_latest(tiny_fs, "gen-000001"), "the first checkpoint fits and is written"
    filler = tiny_fs / "filler"
    with filler.open("wb") as fh:  # fill the file system up
        try:
            while True:
                fh.write(b"\1" * 65536)
                fh.flush()
        except OSError:
            pass
    os.kill(proc.pid, signal.SIGUSR2)
    out, err = proc.communicate(timeout=DEFAULT_TIMEOUT)
    assert proc.returncode == 0, err
    assert out.splitlines()[-1].startswith("DONE"), "the program went on to the end"
    assert "No space left on device" in err and "previous one stays valid" in err
    assert "Traceback" not in err
    filler.unlink()
    again = subprocess.run([*crac_cmd(), "restart", str(tiny_fs)], capture_output=True,
                           text=True, timeout=DEFAULT_TIMEOUT)  # fmt: skip
    assert again.returncode == 0, again.stderr
    assert again.stdout.splitlines()[-1] == out.splitlines()[-1]


WINDOW_SQUATTER = r"""
#include <sys/mman.h>
__attribute__((constructor)) static void squat(void)
{
    mmap((void *)0x200000000000UL, 1 << 20, PROT_NONE,
         MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
}
"""


def test_window_already_taken(tmp_path):
    require_native()
    src = tmp_path / "squat.c"
    src.write_text(WINDOW_SQUATTER)
    lib = tmp_path / "libsquat.so"
    subprocess.run(["gcc", "-shared", "-fPIC", "-o", str(lib), str(src)], check=True, timeout=120)
    env = dict(os.environ, LD_PRELOAD=str(lib))  # loaded into the loader before its main()
    cp = subprocess.run([*crac_cmd(), "launch", "--", "/bin/true"], capture_output=True,
                        text=True, env=env, timeout=DEFAULT_TIMEOUT)  # fmt: skip
    assert cp.returncode == 2, cp.stderr
    assert cp.stderr.startswith("crac: error: cannot reserve the upper window W"), cp.stderr
    assert "0x200000000000" in cp.stderr
    assert "Traceback" not in cp.stderr
