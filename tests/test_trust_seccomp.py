"""The program's own protections across checkpoint -> SIGKILL -> restart (docs/TRUST.md, "The
program's own protections"): its stacked seccomp filters, in order, one thread's filter of its
own, and per-thread prctl state (parent-death signal), besides no_new_privs, undumpable and THP
off. The program checks them itself at every step; two cycles."""

from __future__ import annotations

import json
import signal
import subprocess
from pathlib import Path

import pytest
from ckpt_harness import run_cycles
from conftest import APPS_DIR, CFLAGS, crac_cmd


@pytest.fixture(scope="module")
def seccomp_app(tmp_path_factory) -> Path:
    exe = tmp_path_factory.mktemp("seccomp_app") / "ckpt_seccomp"
    res = subprocess.run(
        ["gcc", *CFLAGS, "-pthread", "-o", str(exe), str(APPS_DIR / "ckpt_seccomp.c")],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert res.returncode == 0, res.stderr
    return exe


@pytest.mark.parametrize("tsync", [0, 1])
def test_seccomp_filters_and_prctl_state_survive(seccomp_app, tmp_path, tsync):
    """uname refused with EACCES (the second filter over the first's EPERM: order kept), sysinfo
    with EPERM, getrusage with ENOTTY in the worker thread only, PDEATHSIG per thread. TSYNC=1:
    the first filter was synchronized onto every thread; of the next two, one is the main thread's
    and one the worker's own, in whichever order they raced."""
    result = run_cycles(seccomp_app, ["60", "25", str(tsync)], tmp_path, cycles=2)
    # The last image says what it holds: the filters in order, then the worker's own.
    infos = [_inspect(gen) for gen in (result.gens[0], result.gens[-1])]
    note = infos[-1]["notes"]["seccomp"]
    assert note["n_filters"] == 3 and note["thp_disable"] == 1, note
    assert [f["flags"] for f in note["filters"]] == [tsync, 0, 0], note  # TSYNC is flag 1
    masks = sorted((t["filters"], t["pdeathsig"]) for t in note["threads"])
    main, worker = 0b011, 0b111
    if tsync:
        # The worker installs its own filter while the main thread installs its second: either
        # may come first (a loaded machine made the worker's the second filter once). Each
        # thread has the shared first filter and the one it installed itself.
        by_sig = {t["pdeathsig"]: t["tid"] for t in note["threads"]}
        owner = [f["tid"] for f in note["filters"]]
        assert sorted(owner[1:]) == sorted(by_sig.values()), note
        main = 0b001 | 1 << owner.index(by_sig[signal.SIGTERM], 1)
        worker = 0b001 | 1 << owner.index(by_sig[signal.SIGHUP], 1)
    assert masks == sorted([(main, signal.SIGTERM), (worker, signal.SIGHUP)]), note
    # crac's own threads have the program's filters only where the program synchronized them
    # onto every thread (TSYNC): without, the checkpoint after a restart still reads the host's
    # name (uname) as the first one did; with, neither does.
    assert infos[-1]["host"] == infos[0]["host"], infos
    assert bool(infos[0]["host"]["hostname"]) == (not tsync), infos


def _inspect(gen: Path) -> dict:
    out = subprocess.run(
        [*crac_cmd(), "inspect", "--json", str(gen)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


def test_seccomp_note_is_decoded_by_inspect():
    """The note's decoder reads back what the loader's record layout says (one filter of five
    instructions, one thread)."""
    from crac_py.image import format as fmt
    from crac_py.image.inspect import DECODERS

    head = fmt.RECORD["crac_seccomp_rec"].struct.pack(1, 1, 1, 0)
    filt = fmt.RECORD["crac_seccomp_filter_rec"].struct.pack(0, 5, 7, 0) + b"\0" * 40
    thread = fmt.RECORD["crac_seccomp_thread_rec"].struct.pack(7, 15, 1, b"w\0".ljust(16, b"\0"))
    got = DECODERS["CRAC_NT_SECCOMP"](head + filt + thread)
    assert got["filters"][0]["n_insns"] == 5 and got["threads"][0]["pdeathsig"] == 15
    json.dumps(got)
