"""The multi-process tests' wait (tests/job_harness.py `wait_past`, docs/DECISIONS.md "Test
robustness (branch tidy)"): every process is waited for until it is N steps past its own step,
not past the fastest one's, on output as a job under load leaves it (one process far ahead and
already ended). Stitching the outputs of a restart chain (ckpt_harness.py `stitch`)."""

from __future__ import annotations

from pathlib import Path

import pytest
from ckpt_harness import Segment, stitch
from job_harness import Output, wait_past

pytestmark = pytest.mark.unit


def drifted_apart(tmp_path: Path) -> Output:
    """A ran to its end (step 300 and its DONE line) while B, slowed down, printed 12 steps."""
    lines = [f"A step {k}" for k in range(1, 301)] + ["A DONE 300"]
    lines += [f"B step {k}" for k in range(1, 13)]
    path = tmp_path / "job.out"
    path.write_text("\n".join(lines) + "\n")
    return Output(path, "job")


def test_each_process_past_its_own_step(tmp_path: Path) -> None:
    out = drifted_apart(tmp_path)
    assert wait_past(out, ["A", "B"], {"A": 298, "B": 10}, 2) == {"A": 300, "B": 12}


def test_a_process_short_of_its_own_target_fails(tmp_path: Path) -> None:
    out = drifted_apart(tmp_path)  # B would need step 13: nothing more comes
    with pytest.raises(pytest.fail.Exception, match="not every process reached"):
        wait_past(out, ["A", "B"], {"A": 298, "B": 10}, 3, timeout=0.5)


def test_a_restart_that_ends_its_predecessors_line_is_stitched() -> None:
    """The checkpoint came between the two write()s of Python's `print` under
    PYTHONUNBUFFERED=1: the restart's output begins with the newline of `step 41` (CI saw it)."""
    launch = Segment("launch", [f"step {k}" for k in range(1, 44)], 40, 41)
    restart = Segment("restart1", ["", *(f"step {k}" for k in range(42, 51))])
    assert stitch([launch, restart]) == [f"step {k}" for k in range(1, 51)]


def test_a_restart_that_begins_with_another_line_fails() -> None:
    launch = Segment("launch", [f"step {k}" for k in range(1, 44)], 40, 41)
    restart = Segment("restart1", ["step 4x", *(f"step {k}" for k in range(42, 51))])
    with pytest.raises(pytest.fail.Exception, match="does not begin with a step line"):
        stitch([launch, restart])
