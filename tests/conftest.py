"""Shared fixtures: build the C test programs in tests/apps/, find and run crac.

Tests that need crac's native parts FAIL (not skip) when they are missing: a missing loader is a
build bug, not a reason to pass.
"""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from sim_build import examples, sim_apps  # noqa: F401  (fixtures for the CUDA programs)

W_START = 0x200000000000
W_END = 0x300000000000
D_START = 0x300000000000
D_END = 0x340000000000

APPS_DIR = Path(__file__).resolve().parent / "apps"
CFLAGS = ["-O2", "-Wall", "-Wextra", "-Werror", "-pthread"]
# Built as a shared library (libdlopen_lib.so), everything else as an executable.
SHARED_LIBS = {"dlopen_lib": "libdlopen_lib.so", "hooks_lib": "libhooks_lib.so"}
DEFAULT_TIMEOUT = 60


def in_w(addr: int) -> bool:
    return W_START <= addr < W_END


def native_dir() -> Path:
    """Where crac keeps its native parts (same search as the CLI: env, source tree, installed)."""
    from crac_py import paths

    return paths.native_dir()


def loader_path() -> Path:
    return native_dir() / "crac-loader"


def require_native() -> Path:
    """The loader's path; fails the calling test when the native parts are not built."""
    try:
        path = loader_path()
    except ImportError as exc:
        pytest.fail(f"crac_py is not importable ({exc}); install it with `pip install .`")
    if not (path.is_file() and os.access(path, os.X_OK)):
        pytest.fail(
            f"crac's native loader is not built: {path} is missing. This is a build bug; "
            "run `pip install .` (or `python build_native.py`)."
        )
    return path


@functools.cache
def crac_cmd() -> tuple[str, ...]:
    """Command prefix that runs the `crac` CLI of the Python running the tests."""
    script = Path(sys.executable).parent / "crac"
    found = shutil.which("crac")
    if found and Path(found).resolve() == script.resolve():
        return (found,)
    if script.is_file() and os.access(script, os.X_OK):
        return (str(script),)
    # No console script: use `python -m crac_py`, which only works from an arbitrary cwd when the
    # package is installed. Otherwise (running from a source tree) put that tree on sys.path from
    # inside the interpreter, so the program's environment is not changed (no PYTHONPATH).
    probe = subprocess.run(
        [sys.executable, "-c", "import crac_py"],
        cwd="/",
        capture_output=True,
        timeout=DEFAULT_TIMEOUT,
    )
    if probe.returncode == 0:
        return (sys.executable, "-m", "crac_py")
    import crac_py

    root = str(Path(crac_py.__file__).resolve().parent.parent)
    boot = f"import sys; sys.path.insert(0, {root!r}); from crac_py.cli.main import main; main()"
    return (sys.executable, "-c", boot)


def crac_launch_cmd(argv: list[str], device: str = "sim") -> list[str]:
    return [*crac_cmd(), "launch", "--device", device, "--", *argv]


def _run(argv: list[str], *, input: bytes | None, env, cwd, timeout: float):
    return subprocess.run(
        argv,
        input=input,
        stdin=subprocess.DEVNULL if input is None else None,
        capture_output=True,
        env=env,
        cwd=cwd,
        timeout=timeout,
    )


def run_native(argv, *, input=None, env=None, cwd=None, timeout=DEFAULT_TIMEOUT):
    return _run(list(map(str, argv)), input=input, env=env, cwd=cwd, timeout=timeout)


def run_crac(argv, *, input=None, env=None, cwd=None, timeout=DEFAULT_TIMEOUT, device="sim"):
    require_native()
    cmd = crac_launch_cmd(list(map(str, argv)), device)
    return _run(cmd, input=input, env=env, cwd=cwd, timeout=timeout)


def run_both(argv, *, input=None, env=None, cwd=None, timeout=DEFAULT_TIMEOUT):
    """Runs argv natively and under `crac launch`; returns (native, crac) CompletedProcess."""
    require_native()
    native = run_native(argv, input=input, env=env, cwd=cwd, timeout=timeout)
    crac = run_crac(argv, input=input, env=env, cwd=cwd, timeout=timeout)
    return native, crac


def describe(cp: subprocess.CompletedProcess) -> str:
    """A short human-readable account of a run, for assertion messages."""

    def tail(b: bytes) -> str:
        text = b.decode(errors="replace")
        return text if len(text) < 2000 else "..." + text[-2000:]

    return (
        f"command: {cp.args!r}\nreturncode: {cp.returncode}\n"
        f"--- stdout ---\n{tail(cp.stdout)}\n--- stderr ---\n{tail(cp.stderr)}"
    )


def assert_same(native: subprocess.CompletedProcess, crac: subprocess.CompletedProcess) -> None:
    """Same exit status, stdout and stderr, byte for byte."""
    ctx = f"\n=== native ===\n{describe(native)}\n=== crac ===\n{describe(crac)}"
    assert crac.returncode == native.returncode, "exit status differs" + ctx
    assert crac.stdout == native.stdout, "stdout differs" + ctx
    assert crac.stderr == native.stderr, "stderr differs" + ctx


def _build(src: Path, out_dir: Path) -> Path:
    name = src.stem
    if name in SHARED_LIBS:
        out = out_dir / SHARED_LIBS[name]
        cmd = ["gcc", *CFLAGS, "-shared", "-fPIC", "-o", str(out), str(src)]
    else:
        out = out_dir / name
        cmd = ["gcc", *CFLAGS, "-o", str(out), str(src), "-ldl"]
    res = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    if res.returncode != 0:
        raise RuntimeError(f"cannot build {src.name}:\n{' '.join(cmd)}\n{res.stderr}")
    return out


@pytest.fixture(scope="session")
def apps(tmp_path_factory) -> dict[str, Path]:
    """Every program in tests/apps/ compiled into a temporary directory, by source stem
    (`apps["maps_check"]`, `apps["dlopen_lib"]` -> .../libdlopen_lib.so)."""
    out_dir = tmp_path_factory.mktemp("apps")
    return {
        src.stem: _build(src, out_dir)
        for src in sorted(APPS_DIR.glob("*.c"))
        # CUDA programs: the sim_apps fixture (sim_build.py), test_cuda_backend.py's own build
        if not src.stem.startswith(("sim_", "cuda_"))
    }


# ---------------------------------------------------------------------------------------------
# Test tiers (tests/README.md): `unit` (no crac process, well under a second each), `slow` (the
# long loops; at least ~10 s each in a `pytest -n 3` run on the 2-core CI machine), everything
# else is integration. Assigned here by name, so the test files stay as they are; a new module
# can instead say `pytestmark = pytest.mark.unit` (tests/test_c_units.py does).

UNIT_TESTS = {
    "test_ckpt_basic.py": {"test_harness_continuity_checks_can_fail"},
    "test_ckpt_programs.py": {"test_every_program_is_listed"},
    "test_coordinator.py": {"test_peer_uid_lookup"},
    "test_sim_codegen.py": {"test_spec_covers_required_functions",
                           "test_shim_and_native_match_real_libcudart"},
}  # fmt: skip

# By function name (every parameter) or by full name with its parameter id.
SLOW_TESTS = {
    "test_ckpt_basic.py": {"test_checkpoint_every_100ms", "test_sparse_image"},
    "test_ckpt_faults.py": {"test_bit_flips", "test_kill_during_checkpoint",
                            "test_truncated[upper.core]"},
    "test_ckpt_libraries.py": {"test_numpy", "test_numpy_with_python_and_openblas_threads"},
    "test_ckpt_programs.py": {"test_two_cycles[ckpt_sparse]"},
    "test_compact.py": {"test_compact_restarts_as_native", "test_keep_one_then_restart",
                        "test_bad_input_refused", "test_killed_mid_compact"},
    "test_device_state.py": {"test_checkpoints_at_random_moments_restart_on_other_version"},
    "test_hostile_names.py": {"test_hostile_program_path_arguments_and_directory"},
    "test_job.py": {"test_process_killed_mid_checkpoint", "test_process_hangs_during_checkpoint",
                    "test_four_processes_bc_kill_restart_twice"},
    "test_sim_examples.py": {"test_demo_script"},
}  # fmt: skip


def pytest_collection_modifyitems(config, items) -> None:
    for item in items:
        module = item.path.name
        names = {item.name, getattr(item, "originalname", item.name)}
        if names & UNIT_TESTS.get(module, set()):
            item.add_marker(pytest.mark.unit)
        if names & SLOW_TESTS.get(module, set()):
            item.add_marker(pytest.mark.slow)
