"""Every error of the `crac` command is one `crac: error:` line with exit status 2 (usage errors
included), and Ctrl-C while crac starts is quiet (status 130, or the program's own death by the
signal once it runs), never a Python traceback."""

from __future__ import annotations

import signal
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager

import pytest
from ckpt_harness import base_env, build_ckpt_apps
from conftest import crac_cmd, describe


def run_crac(*args: str, cwd) -> subprocess.CompletedProcess:
    return subprocess.run(
        [*crac_cmd(), *args], capture_output=True, env=base_env(), cwd=cwd, timeout=120
    )


@pytest.mark.parametrize(
    "args",
    [
        ["launch", "-i", "0.5", "--", "true"],
        ["launch", "--keep", "zero", "true"],
        ["launch", "--", "-no-such-program"],
        ["launch"],
        ["restart"],
        ["restart", "/no/such/checkpoint"],
        ["bogus"],
        ["verify", "--no-such-option", "x"],
    ],
)
def test_one_line_errors(args, tmp_path):
    cp = run_crac(*args, cwd=tmp_path)
    err = cp.stderr.decode()
    assert cp.returncode == 2, describe(cp)
    assert len(err.splitlines()) == 1 and err.startswith("crac: error: "), describe(cp)


def test_program_after_dashes_is_not_called_an_option(tmp_path):
    cp = run_crac("launch", "--", "-weird", cwd=tmp_path)
    assert "put the program after '--'" not in cp.stderr.decode(), describe(cp)


@contextmanager
def sigint_not_ignored() -> Iterator[None]:
    """Children started inside get SIGINT at its default, as from an interactive shell. The test
    runner may ignore it (a non-interactive shell's `pytest &` does, as CI's container init
    does): crac then rightly keeps it ignored for the program, and a Ctrl-C does nothing. A
    handled signal is reset to the default by execve, so a handler here is enough."""
    old = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, old)


def test_ctrl_c_while_starting_is_quiet(tmp_path_factory, tmp_path):
    counter = build_ckpt_apps(tmp_path_factory)["ckpt_counter"]
    # Delays spread over the start: in the native command, in Python's start-up, in the CLI's
    # imports, around the exec of the loader. Whatever the moment, nothing is printed.
    for delay in (0.0, 0.005, 0.01, 0.02, 0.04, 0.08, 0.15, 0.3):
        with sigint_not_ignored():
            proc = subprocess.Popen(
                [*crac_cmd(), "launch", "-c", str(tmp_path), "--", str(counter), "2000", "10"],
                stdout=subprocess.DEVNULL,
                stderr=subprocess.PIPE,
                env=base_env(),
                cwd=tmp_path,
            )
        time.sleep(delay)
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=120)
        assert proc.returncode in (130, -signal.SIGINT), (delay, proc.returncode, err)
        assert err == b"", (delay, err.decode(errors="replace"))
