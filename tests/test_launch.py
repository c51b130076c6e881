"""`crac launch` runs real programs exactly as they run natively: same stdout, stderr, exit status
(including death by signal), environment, arguments, working directory and stdin."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import (
    assert_same,
    crac_cmd,
    describe,
    require_native,
    run_both,
    run_native,
)

PY_PROGRAM = "import json, ssl, sqlite3, decimal; print(json.dumps({'a': 1}), decimal.Decimal(1)/3)"


def _python() -> str:
    return "/usr/bin/python3" if os.path.exists("/usr/bin/python3") else sys.executable


def _tool(name: str) -> str:
    path = shutil.which(name)
    assert path, f"{name} not found in PATH"
    return path


# id -> (argv built from the apps dict, expected native exit status, timeout)
CASES = {
    "true": (lambda a: ["/bin/true"], 0, 60),
    "false": (lambda a: ["/bin/false"], 1, 60),
    "echo": (lambda a: ["/bin/echo", "hello", "world"], 0, 60),
    "sh-exit-3": (lambda a: ["sh", "-c", "exit 3"], 3, 60),
    "python-extensions": (lambda a: [_python(), "-c", PY_PROGRAM], 0, 60),
    "threads_mm": (lambda a: [a["threads_mm"]], 0, 120),
    "dlopen_app": (lambda a: [a["dlopen_app"], a["dlopen_lib"]], 0, 60),
    "fork_exec": (lambda a: [a["fork_exec"]], 0, 60),
    "sigsys_spawn": (lambda a: [a["sigsys_spawn"]], 0, 60),
    "mt_fork": (lambda a: [a["mt_fork"]], 0, 120),
}


@pytest.mark.parametrize("case", list(CASES))
def test_same_as_native(case, apps):
    build, expected_rc, timeout = CASES[case]
    argv = [str(x) for x in build(apps)]
    native, crac = run_both(argv, timeout=timeout)
    assert native.returncode == expected_rc, "the native run itself misbehaves\n" + describe(native)
    assert_same(native, crac)


def _without_proc_links(listing: bytes) -> bytes:
    """The link count of /proc is the number of processes on the machine: not ls's to keep."""
    lines = []
    for line in listing.split(b"\n"):
        fields = line.split()
        if fields and fields[-1] == b"proc":
            line = b" ".join(fields[:1] + fields[2:])
        lines.append(line)
    return b"\n".join(lines)


def test_ls_la_root():
    """`ls -la /` may race with other processes touching / (e.g. /tmp's mtime): the crac run must
    match a native run made just before or just after it."""
    require_native()
    argv = ["/bin/ls", "-la", "/"]
    for _ in range(3):
        before, crac = run_both(argv)
        after = run_native(argv)
        for cp in (before, crac, after):
            cp.stdout = _without_proc_links(cp.stdout)
        if crac.stdout in (before.stdout, after.stdout):
            break
    assert before.returncode == 0, describe(before)
    ref = before if crac.stdout == before.stdout else after
    assert_same(ref, crac)


def test_env_identical():
    """crac adds, removes and changes no environment variable of the program."""
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": "/nonexistent-home",
        "LANG": "C",
        "CRAC_TEST_VAR": "value with spaces = and \u00e9",
        "EMPTY": "",
    }
    if "CRAC_NATIVE_DIR" in os.environ:  # a developer's build: crac must find the same one
        env["CRAC_NATIVE_DIR"] = os.environ["CRAC_NATIVE_DIR"]
    native, crac = run_both([_tool("env")], env=env)
    assert native.returncode == 0, describe(native)
    assert_same(native, crac)
    assert sorted(crac.stdout.decode().splitlines()) == sorted(f"{k}={v}" for k, v in env.items())


def test_read_stdin(apps):
    data = os.urandom(1 << 20)
    native, crac = run_both([apps["read_stdin"]], input=data)
    assert native.returncode == 0, describe(native)
    assert native.stdout.startswith(b"bytes=1048576 "), describe(native)
    assert_same(native, crac)


def test_death_by_sigterm(apps):
    native, crac = run_both([apps["sigterm_self"]])
    assert native.returncode == -15, describe(native)
    assert native.stdout == b"about to die by SIGTERM\n", describe(native)
    assert_same(native, crac)


def test_program_options_are_not_crac_options():
    """`crac launch ls -la /`: everything after PROGRAM belongs to the program."""
    require_native()
    env = dict(os.environ, CRAC_DEVICE="sim")
    for _ in range(3):
        before = run_native(["ls", "-la", "/"], env=env)
        crac = subprocess.run(
            [*crac_cmd(), "launch", "ls", "-la", "/"],
            stdin=subprocess.DEVNULL,
            capture_output=True,
            env=env,
            timeout=60,
        )
        after = run_native(["ls", "-la", "/"], env=env)
        if crac.stdout in (before.stdout, after.stdout):
            break
    assert before.returncode == 0, describe(before)
    # `-l` reached ls (not crac): the long listing starts with a "total" line.
    assert crac.stdout.startswith(b"total "), describe(crac)
    ref = before if crac.stdout == before.stdout else after
    assert_same(ref, crac)


def test_cwd_preserved(tmp_path: Path):
    native, crac = run_both(["/bin/pwd"], cwd=tmp_path)
    assert native.returncode == 0, describe(native)
    assert native.stdout.decode().strip() == os.path.realpath(tmp_path)
    assert_same(native, crac)


def test_launcher_rank_variables_agree_with_the_native_side():
    """The launcher rank variables the Python CLI reads (crac_py/launch/mpi.py) are those the
    front and the loader's exec read (include/crac_launcher.h): a name in one list only sent
    that rank's restart, or its exec'd program, another way."""
    import re

    from crac_py.launch import mpi

    header = (Path(__file__).resolve().parent.parent / "include" / "crac_launcher.h").read_text()
    line = re.search(r"#define CRAC_LAUNCHER_RANK_VARS (.*)", header)
    assert line is not None
    assert tuple(re.findall(r'"([A-Z_]+)"', line.group(1))) == mpi.RANK_VARS
