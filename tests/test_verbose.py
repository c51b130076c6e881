"""`crac launch -v` and `crac restart -v`: one line per checkpoint on stderr (generation, size,
where, pause, total time), and nothing more."""

from __future__ import annotations

import re
import time

from ckpt_harness import (
    WAIT_TIMEOUT,
    build_ckpt_apps,
    checkpoint,
    kill9,
    launch,
    restart,
    wait_for_step,
)

LINE = re.compile(
    r"^crac: checkpoint (\d+): [0-9.]+ MiB in (\S+), program paused \d+ ms, \d+ ms in all$"
)


def lines(text: str) -> list[re.Match[str]]:
    out = [LINE.match(ln) for ln in text.splitlines() if ln.startswith("crac: checkpoint")]
    assert all(out), text
    return out  # type: ignore[return-value]


def wait_lines(proc, n: int) -> list[re.Match[str]]:
    """The line is printed just after the generation is published: wait for it."""
    deadline = time.monotonic() + WAIT_TIMEOUT
    while len(lines(proc.stderr_text())) < n and time.monotonic() < deadline:
        time.sleep(0.05)
    return lines(proc.stderr_text())


def test_one_line_per_checkpoint(tmp_path_factory, tmp_path):
    counter = build_ckpt_apps(tmp_path_factory)["ckpt_counter"]
    ckptdir, logs = tmp_path / "ckpt", tmp_path / "logs"
    proc = launch(counter, ["100000", "10"], ckptdir, out_dir=logs, opts=["-v"])
    try:
        wait_for_step(proc, 2)
        gens = [checkpoint(proc, ckptdir), checkpoint(proc, ckptdir)]
        seen = wait_lines(proc, 2)
        kill9(proc)
        assert [(int(m[1]), m[2]) for m in seen] == [(1, str(gens[0])), (2, str(gens[1]))]
        proc = restart(ckptdir, out_dir=logs, label="restart", opts=["-v"])
        wait_for_step(proc, 1)
        gen3 = checkpoint(proc, ckptdir)
        assert [(int(m[1]), m[2]) for m in wait_lines(proc, 1)] == [(3, str(gen3))]
        kill9(proc)
    finally:
        proc.stop()
