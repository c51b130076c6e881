"""`crac restart` without Python's start-up (docs/DECISIONS.md "Restart without Python"): the
`crac` command hands a restart of one process to `crac-loader --fast-restart`, which makes the
Python CLI's checks and execs the loader itself. CRAC_DEBUG_PATH=1 makes the command say which
path ran. What the native path cannot be sure of (bad input included) goes to the Python CLI,
so its refusals are the Python path's, word for word: compared here with `python -m crac_py`."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from ckpt_harness import (
    assert_refused,
    base_env,
    build_ckpt_apps,
    check_finished,
    counter_lines,
    launch_checkpoint_kill,
    restart,
    wait_for_step,
)
from conftest import crac_cmd, require_native

REPO = Path(__file__).resolve().parent.parent
NATIVE = "crac: debug: restart path: native"
PYTHON = "crac: debug: restart path: Python"
STEPS = 300


@pytest.fixture(scope="module")
def image(tmp_path_factory) -> tuple[Path, Path]:
    """(app, checkpoint directory): ckpt_counter checkpointed once, then SIGKILLed."""
    app = build_ckpt_apps(tmp_path_factory)["ckpt_counter"]
    base = tmp_path_factory.mktemp("fast_restart")
    launch_checkpoint_kill(app, [str(STEPS), "20"], base / "ckpt", out_dir=base, at_step=5)
    return app, base / "ckpt"


def _run(cmd: list[str], path: Path | str, *opts: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [*cmd, "restart", str(path), *opts],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        env=base_env({"CRAC_DEBUG_PATH": "1"}),
        cwd=tempfile.gettempdir(),
        timeout=120,
    )


def _debug_lines(cp: subprocess.CompletedProcess) -> list[str]:
    return [ln for ln in cp.stderr.decode().splitlines() if ln.startswith("crac: debug:")]


def _without_debug(cp: subprocess.CompletedProcess) -> subprocess.CompletedProcess:
    err = b"".join(
        ln for ln in cp.stderr.splitlines(keepends=True) if not ln.startswith(b"crac: debug:")
    )
    return subprocess.CompletedProcess(cp.args, cp.returncode, cp.stdout, err)


def test_restart_runs_without_python(image, tmp_path):
    """The restart of one process takes the native path, and the program goes on as it would;
    CRAC_TIMING (the benchmarks' phase timings, read by the loader) and CRAC_DIRECT_WRITE (the
    loader's writer at later checkpoints) keep it there."""
    app, ckptdir = image
    work = tmp_path / "copy"
    subprocess.run(["cp", "-a", str(ckptdir), str(work)], check=True)
    from ckpt_harness import Segment

    first = (ckptdir.parent / "launch.out").read_text().splitlines()
    steps = [ln for ln in first if ln.startswith("step ")]
    proc = restart(
        work,
        out_dir=tmp_path,
        label="restart",
        env=base_env({"CRAC_DEBUG_PATH": "1", "CRAC_TIMING": "1", "CRAC_DIRECT_WRITE": "1"}),
        opts=["--no-truncate"],
    )
    wait_for_step(proc, 1)
    seg = check_finished(proc, counter_lines(STEPS), Segment("launch", steps))
    assert seg.lines[-1].startswith("DONE")
    err = (tmp_path / "restart.err").read_text()
    assert NATIVE in err, err
    assert PYTHON not in err, err
    assert "crac: timing: restart memory:" in err, err


def test_python_only_options_take_the_python_path(image, tmp_path):
    """An option the native path does not handle (--keep) goes to the Python CLI; so does a
    setting in the environment (a coordinator's port, an MPI launcher's rank of each kind:
    include/crac_launcher.h), but not a variable that merely begins like one."""
    _, ckptdir = image
    cp = _run([*crac_cmd()], tmp_path / "missing", "--keep", "3")
    assert any(PYTHON in ln and "option" in ln for ln in _debug_lines(cp)), cp.stderr
    for var in ("CRAC_COORD_PORT", "OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK", "SLURM_PROCID"):
        cp = subprocess.run(
            [*crac_cmd(), "restart", str(tmp_path / "missing")],
            capture_output=True,
            env=base_env({"CRAC_DEBUG_PATH": "1", var: "1"}),
            timeout=120,
        )
        assert any(PYTHON in ln and "environment" in ln for ln in _debug_lines(cp)), (var, cp)
    cp = subprocess.run(
        [*crac_cmd(), "restart", str(tmp_path / "missing")],
        capture_output=True,
        env=base_env({"CRAC_DEBUG_PATH": "1", "PMI_RANKING": "1"}),
        timeout=120,
    )
    assert not any("environment" in ln for ln in _debug_lines(cp)), cp.stderr


def _copy(ckptdir: Path, dest: Path) -> Path:
    subprocess.run(["cp", "-a", str(ckptdir), str(dest)], check=True)
    return next(dest.glob("ckpt_*/gen-*"))


def _damage(gen: Path) -> None:
    raw = bytearray((gen / "MANIFEST.json").read_bytes())
    at = raw.index(b'"argv"')
    raw[at + 2] ^= 0x20  # "aRgv": the checksum no longer matches
    (gen / "MANIFEST.json").write_bytes(bytes(raw))


def _newer_format(gen: Path) -> None:
    _resigned(gen, format_version=99)


def _bad_incremental(gen: Path) -> None:
    _resigned(gen, incremental={"full_every": 8, "parent": "1", "parent_header_crc32c": 0})


def _resigned(gen: Path, **fields: object) -> None:
    """GEN's manifest with FIELDS replaced, its checksum made again (valid, but wrong)."""
    m = json.loads((gen / "MANIFEST.json").read_text())
    m.update(fields)
    m["manifest_sha256"] = "0" * 64
    raw = json.dumps(m, indent=2).encode()
    sig = hashlib.sha256(raw).hexdigest().encode()
    raw = raw.replace(b'"' + b"0" * 64 + b'"', b'"' + sig + b'"', 1)
    (gen / "MANIFEST.json").write_bytes(raw)


def _fifo(gen: Path) -> None:
    os.mkfifo(gen / "planted", 0o600)


def _program_changed(gen: Path) -> None:
    m = json.loads((gen / "MANIFEST.json").read_text())
    program = Path(m["process"]["program"])
    data = program.read_bytes()
    program.write_bytes(data + b"\0")  # the program's own file: the image is unchanged


@pytest.mark.parametrize(
    "spoil",
    [None, _damage, _newer_format, _bad_incremental, _fifo],
    ids=["missing", "damaged-manifest", "newer-format", "bad-incremental", "fifo"],
)
def test_bad_input_same_message_as_python(image, tmp_path, spoil):
    """Bad input given to the native path ends with the Python path's message (the native path
    declines, the Python CLI refuses): exit status 2, one line, the same line."""
    require_native()
    _, ckptdir = image
    if spoil is None:
        target: Path = tmp_path / "no-such-checkpoint"
    else:
        target = _copy(ckptdir, tmp_path / "c")
        spoil(target)
    fast = _run([*crac_cmd()], target)
    assert any(PYTHON in ln for ln in _debug_lines(fast)), fast.stderr
    assert not any(NATIVE in ln for ln in _debug_lines(fast)), fast.stderr
    line = assert_refused(_without_debug(fast), f"crac restart, {spoil}")
    slow = _run([sys.executable, "-m", "crac_py"], target)
    assert assert_refused(slow, f"python -m crac_py restart, {spoil}") == line


def test_changed_program_refused_like_python(tmp_path_factory, tmp_path):
    """A program rebuilt since the checkpoint: the native path checks its digest too."""
    app = build_ckpt_apps(tmp_path_factory)["ckpt_counter"]
    own = tmp_path / "ckpt_counter"
    own.write_bytes(app.read_bytes())
    own.chmod(0o755)
    launch_checkpoint_kill(own, [str(STEPS), "20"], tmp_path / "ckpt", out_dir=tmp_path)
    gen = next((tmp_path / "ckpt").glob("ckpt_*/gen-*"))
    _program_changed(gen)
    fast = _run([*crac_cmd()], tmp_path / "ckpt")
    assert any(PYTHON in ln for ln in _debug_lines(fast)), fast.stderr
    line = assert_refused(_without_debug(fast), "changed program")
    assert "changed since the checkpoint" in line, line
    slow = _run([sys.executable, "-m", "crac_py"], tmp_path / "ckpt")
    assert assert_refused(slow, "python -m crac_py restart") == line
