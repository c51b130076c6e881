"""Process state beside memory that a restart must bring back right (docs/DECISIONS.md, "Ids,
clocks, limits and cancellation after a restart"): calls that take the pid or a tid the program
knows, CPU-time clocks, glibc's cancellation and setxid signals, resource limits, each thread's
nice value and scheduling policy (docs/DECISIONS.md "Nice values and scheduling policies"). Each
program
goes through two checkpoint -> SIGKILL -> restart cycles and checks itself at every step."""

from __future__ import annotations

import ctypes
import resource
import subprocess
from pathlib import Path

import pytest
from ckpt_harness import base_env, launch_checkpoint_kill, run_cycles
from conftest import APPS_DIR, CFLAGS, crac_cmd

# name -> its arguments. Each runs ~2-4 s natively.
PROGRAMS: dict[str, list[str]] = {
    "ckpt_cpuclock": [],
    "ckpt_tid_calls": [],
    "ckpt_cancel": [],
    # the same built with -fexceptions: its cleanup handlers run only if the unwinder crosses the
    # signal frame into the blocked read() or open() (docs/DECISIONS.md)
    "ckpt_cancel_unwind": [],
    "ckpt_rlimits": [],
    "ckpt_sched": [],  # per-thread nice values, SCHED_BATCH and SCHED_IDLE
}

# name -> (source, extra compiler flags) where they are not (name, none)
BUILT_AS: dict[str, tuple[str, list[str]]] = {
    "ckpt_cancel_unwind": ("ckpt_cancel", ["-fexceptions"])
}


@pytest.fixture(scope="module")
def apps(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    out_dir = tmp_path_factory.mktemp("process_state_apps")
    built = {}
    for name in PROGRAMS:
        exe = out_dir / name
        source, extra = BUILT_AS.get(name, (name, []))
        cmd = ["gcc", *CFLAGS, *extra, "-o", str(exe), str(APPS_DIR / f"{source}.c")]
        res = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
        if res.returncode != 0:
            pytest.fail(f"cannot build {name}.c:\n{' '.join(cmd)}\n{res.stderr}")
        built[name] = exe
    return built


@pytest.mark.parametrize("name", list(PROGRAMS))
def test_two_cycles(name: str, apps: dict[str, Path], tmp_path: Path) -> None:
    run_cycles(apps[name], PROGRAMS[name], tmp_path, cycles=2)


PR_CAPBSET_DROP = 24
CAP_SYS_RESOURCE = 24
LOW_NOFILE = 200


def _restart_under_low_nofile() -> None:
    """Runs in the restart's child before exec: a hard RLIMIT_NOFILE below the program's, which
    it may not raise (CAP_SYS_RESOURCE leaves the bounding set, so the exec drops it)."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(PR_CAPBSET_DROP, CAP_SYS_RESOURCE, 0, 0, 0)
    resource.setrlimit(resource.RLIMIT_NOFILE, (LOW_NOFILE, LOW_NOFILE))


def test_hard_limit_not_raised_back_is_reported(apps: dict[str, Path], tmp_path: Path) -> None:
    """A restart whose hard RLIMIT_NOFILE is below the checkpointed one cannot raise it: one
    warning line on stderr names it, the soft limit is capped, and the program (which checks its
    limits) sees that and fails on its own, not through a crash."""
    ckptdir, logs = tmp_path / "ckpt", tmp_path / "logs"
    ckptdir.mkdir()
    launch_checkpoint_kill(apps["ckpt_rlimits"], [], ckptdir, out_dir=logs)
    cp = subprocess.run(
        [*crac_cmd(), "restart", str(ckptdir)],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        env=base_env(),
        cwd=tmp_path,
        timeout=120,
        preexec_fn=_restart_under_low_nofile,
    )
    err = cp.stderr.decode(errors="replace")
    warnings = [ln for ln in err.splitlines() if ln.startswith("crac: warning: cannot raise")]
    assert len(warnings) == 1, f"expected one warning line\n{err}"
    assert "NOFILE " in warnings[0] and f"(stays {LOW_NOFILE})" in warnings[0], warnings[0]
    assert cp.returncode == 1, f"status {cp.returncode}\n{err}"
    assert f"RLIMIT_NOFILE is {LOW_NOFILE}/{LOW_NOFILE}" in err, err


def _restart_under_low_soft_nofile() -> None:
    """In the restart's child before exec: the usual soft RLIMIT_NOFILE under a high hard one."""
    hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    resource.setrlimit(resource.RLIMIT_NOFILE, (min(1024, hard), hard))


def test_descriptor_above_the_restarts_soft_nofile(apps: dict[str, Path], tmp_path: Path) -> None:
    """The program raised its soft RLIMIT_NOFILE to the hard one and holds a descriptor near it;
    the restart starts under a soft limit of 1024 and must still put that descriptor back."""
    if resource.getrlimit(resource.RLIMIT_NOFILE)[1] < 2048:
        pytest.skip("needs a hard RLIMIT_NOFILE of at least 2048")
    ckptdir, logs = tmp_path / "ckpt", tmp_path / "logs"
    ckptdir.mkdir()
    launch_checkpoint_kill(apps["ckpt_rlimits"], ["60", "1"], ckptdir, out_dir=logs)
    cp = subprocess.run(
        [*crac_cmd(), "restart", str(ckptdir)],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        env=base_env(),
        cwd=tmp_path,
        timeout=120,
        preexec_fn=_restart_under_low_soft_nofile,
    )
    out = cp.stdout.decode(errors="replace")
    assert cp.returncode == 0, f"status {cp.returncode}\n{cp.stderr.decode(errors='replace')}"
    assert out.splitlines()[-1] == "DONE limits=15", out
