"""DMTCP's dmtcp.h API under crac (docs/DMTCP_API.md): a program written against its weak symbols
finds every function under crac (none natively), through two checkpoint -> SIGKILL -> restart
cycles, and a checkpoint asked for inside dmtcp_disable_ckpt() waits for dmtcp_enable_ckpt()."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from ckpt_harness import base_env, run_cycles
from conftest import APPS_DIR, CFLAGS, DEFAULT_TIMEOUT, crac_cmd, require_native
from coord_harness import Coordinator


@pytest.fixture(scope="module")
def app(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("dmtcp_api") / "dmtcp_api"
    subprocess.run(
        # -fPIC, as dmtcp.h asks of programs that use it.
        ["gcc", *CFLAGS, "-fPIC", "-o", str(out), str(APPS_DIR / "dmtcp_api.c"), "-ldl"],
        check=True,
        timeout=120,
    )
    return out


def test_every_function_through_two_cycles(app: Path, tmp_path: Path) -> None:
    require_native()
    result = run_cycles(app, ["cycles", "{work}/api.log", "60"], tmp_path, cycles=2)
    # Natively every symbol was NULL and the program said so.
    assert (tmp_path / "ref_work" / "api.log").read_text() == "not under DMTCP\n"
    log = (tmp_path / "work" / "api.log").read_text().splitlines()
    assert "not under DMTCP" not in log
    # The generation and restart counts it saw grew with the cycles; the last process came
    # from the second image, restarted twice.
    assert "generation 1 restarts 0" in log
    assert "generation 1 restarts 1" in log
    assert "generation 2 restarts 1" in log
    assert "generation 2 restarts 2" in log
    assert log[-1] == "final generation 2 restarts 2"
    assert [g.name for g in result.gens] == ["gen-000001", "gen-000002"]


def test_checkpoint_waits_for_the_section(app: Path, tmp_path: Path) -> None:
    require_native()
    ckpt = tmp_path / "ckpt"
    ckpt.mkdir()
    log = tmp_path / "api.log"
    cp = subprocess.run(
        [*crac_cmd(), "launch", "-c", str(ckpt), "--", str(app), "defer", str(log)],
        capture_output=True,
        text=True,
        timeout=DEFAULT_TIMEOUT,
        env=base_env(),
        cwd=tmp_path,
    )
    assert cp.returncode == 0, cp.stderr
    lines = log.read_text().splitlines()
    assert lines[0] == "deferred at generation 0", lines
    after = lines[1].split()
    assert after[:3] == ["after", "the", "section:"] and int(after[-1]) >= 1, lines
    (proc,) = ckpt.glob("ckpt_dmtcp_api_*")
    assert (proc / "gen-000001" / "upper.core").is_file()


def test_program_ending_after_the_section_waits_for_the_checkpoint(
    app: Path, tmp_path: Path
) -> None:
    """A checkpoint waits for the program's section; the program leaves it and ends at once: the
    end waits for the checkpoint, whose generation is published (it was left as gen-000001.tmp
    when the end came before the threads were parked). Its restart ends as the program did."""
    require_native()
    ckpt = tmp_path / "ckpt"
    ckpt.mkdir()
    log = tmp_path / "api.log"
    run = [*crac_cmd(), "launch", "-c", str(ckpt), "--", str(app), "exit", str(log)]
    opts = {"capture_output": True, "text": True, "timeout": DEFAULT_TIMEOUT, "cwd": tmp_path}
    cp = subprocess.run(run, env=base_env(), **opts)
    assert cp.returncode == 0, cp.stderr
    assert log.read_text() == "leaving the section at generation 0\n"
    (proc,) = ckpt.glob("ckpt_dmtcp_api_*")
    assert sorted(g.name for g in proc.iterdir() if g.name.startswith("gen-")) == ["gen-000001"]
    assert (proc / "gen-000001" / "MANIFEST.json").is_file()
    again = subprocess.run([*crac_cmd(), "restart", str(proc)], env=base_env(), **opts)
    assert again.returncode == 0, again.stderr
    assert log.read_text() == "leaving the section at generation 0\n"


def test_coordinator_status_counts_the_job(app: Path, tmp_path: Path) -> None:
    require_native()
    coord = Coordinator(tmp_path / "coord")
    ckpt = tmp_path / "ckpt"
    ckpt.mkdir()
    log = tmp_path / "api.log"
    argv = [*crac_cmd(), "launch", "-j", "-p", str(coord.port), "-c", str(ckpt), "--"]
    procs = [
        subprocess.Popen(
            [*argv, str(app), "coord", str(log), "2"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=base_env(),
            cwd=tmp_path,
        )
        for _ in range(2)
    ]
    try:
        for p in procs:
            _, err = p.communicate(timeout=DEFAULT_TIMEOUT * 2)
            assert p.returncode == 0, err.decode()
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
        coord.stop()
    assert log.read_text().splitlines() == ["peers 2 running 1"] * 2
