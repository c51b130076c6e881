"""The crossing into the lower half switches fs to a per-thread lower TCB (docs/ARCHITECTURE.md
"Crossing"), and the negative control shows why: without the switch the lower half's TLS write
silently lands in the upper half's TLS (docs/ARCHITECTURE.md "Traps", the first)."""

from __future__ import annotations

import re

from conftest import describe, run_crac, run_native

NO_RUNTIME = 77


def test_crossing_switches_fs(apps):
    cp = run_crac([apps["crossing"]], timeout=120)
    assert cp.returncode != NO_RUNTIME, "the upper runtime's self-test is missing\n" + describe(cp)
    assert cp.returncode == 0, describe(cp)
    assert b"crossing ok threads=8 calls=10000" in cp.stdout, describe(cp)


def test_missing_fs_switch_corrupts_upper_tls(apps):
    cp = run_crac([apps["crossing"], "negative"], timeout=60)
    assert cp.returncode != NO_RUNTIME, "the upper runtime's self-test is missing\n" + describe(cp)
    assert cp.returncode == 0, describe(cp)
    out = cp.stdout.decode(errors="replace")
    corrupted = re.search(r"^CORRUPTED (\d+) bytes$", out, re.M)
    control = re.search(r"^CONTROL_AT_ADDR (\d+) bytes$", out, re.M)
    assert corrupted and control, describe(cp)
    # Without the switch, the lower half's fs-relative write hit upper memory (inside W) ...
    assert re.search(r"^negative: address 0x[0-9a-f]+ inside W$", out, re.M), describe(cp)
    assert "negative: value written there: yes" in out, describe(cp)
    # ... and changed bytes of the upper thread's TLS that a proper crossing leaves alone.
    assert int(corrupted.group(1)) > 0, describe(cp)
    assert int(control.group(1)) == 0, describe(cp)


def test_native_control_has_no_runtime(apps):
    """Natively there is no upper runtime: the program says so and exits 77, so the tests above
    cannot pass without crac."""
    for args in ([], ["negative"]):
        cp = run_native([apps["crossing"], *args])
        assert cp.returncode == NO_RUNTIME, describe(cp)
        assert cp.stdout == b"no crac runtime\n", describe(cp)
