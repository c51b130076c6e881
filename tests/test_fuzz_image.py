"""The structure-aware image fuzzer (bench/fuzz_image.py, docs/TRUST.md "Fuzzing") for a bounded
number of cases: every mutated image, checksums recomputed, is refused cleanly or restarts; no
death of crac-loader by a signal, no Python traceback, no hang. The 10,000-case run is recorded in
docs/TRUST.md."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from conftest import require_native

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "bench"))
import fuzz_image  # noqa: E402

pytestmark = pytest.mark.slow

CASES = 300


def test_fuzz_image(tmp_path):
    require_native()
    seed = fuzz_image.make_seed(tmp_path)
    s = fuzz_image.fuzz(CASES, 2, seed, 11, tmp_path)
    bad = [r for r in s.bad if r.outcome in ("crash", "hang", "python-error")]
    report = "\n".join(f"case {r.case}: {r.outcome}: {r.what}: {r.detail[-400:]}" for r in bad)
    assert not bad, f"{len(bad)} of {s.cases} cases crashed or hung:\n{report}"
    assert s.cases == CASES
    # The fuzzer reaches both sides: images refused and images the checks let through.
    assert s.outcomes["refused"] > 0 and s.outcomes["restarted"] > 0, dict(s.outcomes)
