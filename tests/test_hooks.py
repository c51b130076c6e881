"""Named, ordered upper-half hooks (include/crac_hooks.h, docs/DECISIONS.md "Hooks"): a test
library registers hooks at every event out of order; through two checkpoint -> SIGKILL -> restart
cycles each event's hooks run once per checkpoint (or restart), by order, ties by registration."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

import pytest
from ckpt_harness import (
    WAIT_TIMEOUT,
    base_env,
    checkpoint,
    complete_generations,
    kill9,
    launch,
    run_cycles,
    wait_for_step,
)
from conftest import APPS_DIR, CFLAGS

CHECKPOINT_BLOCK = [
    "PRE_SUSPEND ps.a",
    "PRE_SUSPEND ps.c",
    "PRE_SUSPEND ps.b",
    "PARKED pk.early",
    "PARKED pk.late",
    "PRE_RESUME pr.y",
    "PRE_RESUME pr.x",
]
RESTART_BLOCK = ["RESTART rs.1", "RESTART rs.2"]


@pytest.fixture(scope="module")
def hooks_app(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    out = tmp_path_factory.mktemp("hooks_app")
    lib, app = out / "libhooks_lib.so", out / "ckpt_hooks"
    for cmd in (
        ["gcc", *CFLAGS, "-shared", "-fPIC", "-o", str(lib), str(APPS_DIR / "hooks_lib.c")],
        ["gcc", *CFLAGS, "-o", str(app), str(APPS_DIR / "ckpt_hooks.c"), "-ldl"],
    ):
        res = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
        if res.returncode != 0:
            pytest.fail(f"cannot build:\n{' '.join(cmd)}\n{res.stderr}")
    return app, lib


def test_hooks_every_event_in_order_two_cycles(
    hooks_app: tuple[Path, Path], tmp_path: Path
) -> None:
    app, lib = hooks_app
    run_cycles(app, [str(lib), "{work}/hooks.log", "60", "25"], tmp_path)
    log = (tmp_path / "work" / "hooks.log").read_text().splitlines()
    assert log == (CHECKPOINT_BLOCK + RESTART_BLOCK) * 2, "\n".join(log)


def test_hooks_named_in_debug_log(hooks_app: tuple[Path, Path], tmp_path: Path) -> None:
    """CRAC_DEBUG=1 names each hook call with its event and order, in the order they ran."""
    app, lib = hooks_app
    work = tmp_path / "work"
    work.mkdir()
    ckptdir = tmp_path / "ckpt"
    ckptdir.mkdir()
    proc = launch(
        app,
        [str(lib), str(work / "hooks.log"), "100000", "25"],
        ckptdir,
        out_dir=tmp_path / "logs",
        env=base_env({"CRAC_DEBUG": "1"}),
    )
    try:
        wait_for_step(proc, 3)
        checkpoint(proc, ckptdir)
    finally:
        kill9(proc)
    calls = [
        line.removeprefix("crac: debug: hook ")
        for line in proc.stderr_text().splitlines()
        if line.startswith("crac: debug: hook ") and line.endswith("-> 0")
    ]
    assert calls == [
        "PRE_SUSPEND ps.a (order 10) -> 0",
        "PRE_SUSPEND ps.c (order 10) -> 0",
        "PRE_SUSPEND ps.b (order 20) -> 0",
        "PARKED pk.early (order -5) -> 0",
        "PARKED pk.late (order 5) -> 0",
        "PRE_RESUME pr.y (order 0) -> 0",
        "PRE_RESUME pr.x (order 1) -> 0",
    ], proc.stderr_text()


@pytest.mark.parametrize(
    ("failing", "why", "expected"),
    [
        (
            "ps.c",
            "a PRE_SUSPEND hook failed",
            ["PRE_SUSPEND ps.a", "PRE_SUSPEND ps.c"],
        ),
        (
            "pk.early",
            "a PARKED hook failed",
            [*CHECKPOINT_BLOCK[:4], "PRE_RESUME pr.y", "PRE_RESUME pr.x"],
        ),
    ],
)
def test_failing_hook_abandons_the_checkpoint(
    hooks_app: tuple[Path, Path], tmp_path: Path, failing: str, why: str, expected: list[str]
) -> None:
    """A failing PRE_SUSPEND or PARKED hook abandons the checkpoint (no generation, one error
    line) and stops its event's list; once PARKED began, PRE_RESUME still runs; the program goes
    on."""
    app, lib = hooks_app
    work = tmp_path / "work"
    work.mkdir()
    ckptdir = tmp_path / "ckpt"
    ckptdir.mkdir()
    proc = launch(
        app,
        [str(lib), str(work / "hooks.log"), "100000", "25"],
        ckptdir,
        out_dir=tmp_path / "logs",
        env=base_env({"HOOKS_FAIL": failing}),
    )
    try:
        wait_for_step(proc, 3)
        os.kill(proc.pid, signal.SIGUSR2)
        deadline = time.monotonic() + WAIT_TIMEOUT
        while "abandoned" not in proc.stderr_text():
            if time.monotonic() > deadline or proc.poll() is not None:
                pytest.fail(f"the checkpoint was not abandoned\n{proc.report()}")
            time.sleep(0.05)
        wait_for_step(proc, proc.last_step() + 2)  # the program goes on
    finally:
        kill9(proc)
    errors = [line for line in proc.stderr_text().splitlines() if "abandoned" in line]
    assert len(errors) == 1 and why in errors[0], proc.stderr_text()
    assert complete_generations(ckptdir) == {}
    assert (work / "hooks.log").read_text().splitlines() == expected
