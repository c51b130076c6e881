"""Any argv, any path: a program, its arguments and its checkpoint directory whose names hold
spaces, quotes, `$(...)`, backquotes, a newline and a byte that is not UTF-8 checkpoint, restart
(directly and through the restart script), inspect and verify like any other, and nothing in
them is ever run by a shell."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

from ckpt_harness import base_env, run_cycles
from conftest import APPS_DIR, CFLAGS, crac_cmd, describe

# os.fsdecode(b"\xff") is "\udcff": the str Python uses for that byte in a path or argument.
HOSTILE = "we ird'\"$(touch PWNED)`touch PWNED`\n\udcff;&|*"


def test_hostile_program_path_arguments_and_directory(tmp_path):
    base = tmp_path / f"dir {HOSTILE}"
    base.mkdir()
    app = base / f"prog {HOSTILE}"
    res = subprocess.run(
        ["gcc", *CFLAGS, "-o", str(app), str(APPS_DIR / "ckpt_argv.c")],
        capture_output=True,
        timeout=120,
    )
    assert res.returncode == 0, res.stderr.decode(errors="replace")
    result = run_cycles(app, ["300", "10", HOSTILE, "", "-- --", "\udcfe"], base, cycles=2)

    script = result.ckptdir / "crac_restart_script.sh"
    assert script.is_file(), sorted(os.listdir(result.ckptdir))
    env = base_env()
    for verb in ("inspect", "verify"):
        cp = subprocess.run(
            [*crac_cmd(), verb, str(result.ckptdir)], capture_output=True, env=env, timeout=120
        )
        assert cp.returncode == 0, describe(cp)
        assert b"Traceback" not in cp.stderr, describe(cp)
    # The restart script (what the checkpoint wrote, run by a shell) runs the last generation
    # to its end, with the same argv.
    cwd = tmp_path / "script_cwd"
    cwd.mkdir()
    cp = subprocess.run(["sh", str(script)], capture_output=True, env=env, cwd=cwd, timeout=180)
    assert cp.returncode == 0, describe(cp)
    assert cp.stdout.decode().splitlines()[-1] == result.reference.done, describe(cp)
    pwned = [p for p in (tmp_path, cwd, Path.cwd(), *tmp_path.rglob("*")) if p.name == "PWNED"]
    assert not pwned and not (cwd / "PWNED").exists(), f"a name was run by a shell: {pwned}"
    shutil.rmtree(base)


def test_job_restart_script_quotes_every_path(tmp_path):
    """The coordinator's restart script for a job whose directories have hostile names: every
    path reaches `crac restart` as one argument, byte for byte, and the script lists them."""
    from crac_py.coord.restart_script import ScriptJob, listed_generations, write

    job_dir = tmp_path / f"job {HOSTILE}"
    gens = [job_dir / f"ckpt_p{i} {HOSTILE}-{i}" / "gen-000001" for i in (1, 2)]
    outside = tmp_path / f"elsewhere {HOSTILE}" / "gen-000003"
    for g in (*gens, outside):
        g.mkdir(parents=True)
    # `crac` replaced by a printf that shows each argument it gets, NUL-terminated.
    job = ScriptJob(job_dir, [*gens, outside], 1, 7779, 0, "printf '%s\\0'")
    script = write(job)
    assert listed_generations(script) == [*gens, outside]
    cp = subprocess.run(["sh", str(script)], capture_output=True, cwd=tmp_path, timeout=60)
    assert cp.returncode == 0, describe(cp)
    words = [os.fsdecode(w) for w in cp.stdout.split(b"\0")]
    for g in (*gens, outside):
        assert str(g) in words, f"{g!r} not passed as one argument: {words!r}"
    assert not any(p.name == "PWNED" for p in tmp_path.rglob("*"))
