"""Device state across checkpoint and restart: every example on the sim, checkpointed at
random moments while kernels are queued and threads wait on streams and events, restarted on
another sim version, finishes with the uninterrupted run's verified result; two cycles switching
sim versions 1 -> 2 -> 1; a corrupted device image is refused."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import time
from pathlib import Path

import pytest
from ckpt_harness import check_inspect
from conftest import crac_cmd, require_native

# Arguments that make each example run for about a second natively.
ARGS = {
    "vector_add": ["262144", "2000"],
    "multistream": ["4194304"],
    "jacobi": ["128", "15000"],
    "threads": ["262144", "500"],
}
CHECKPOINTS = 10
TIMEOUT = 180


def native(exe: Path, args: list[str]) -> str:
    cp = subprocess.run([str(exe), *args], capture_output=True, text=True, timeout=TIMEOUT)
    assert cp.returncode == 0, cp.stderr
    return cp.stdout


def generations(ckpt: Path) -> list[Path]:
    return sorted(
        g
        for g in ckpt.glob("ckpt_*/gen-[0-9][0-9][0-9][0-9][0-9][0-9]")
        if (g / "MANIFEST.json").exists()
    )


def wait_generations(ckpt: Path, n: int, proc: subprocess.Popen, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while len(generations(ckpt)) < n and time.monotonic() < deadline:
        if proc.poll() is not None and len(generations(ckpt)) < n:
            time.sleep(0.1)  # an exiting program waits for its last checkpoint to publish
            return
        time.sleep(0.02)


def wait_exec(proc: subprocess.Popen, timeout: float = 30) -> None:
    """Until the process is crac's loader (crac's Python start-up is over)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and proc.poll() is None:
        try:
            # The loader takes the program's name (comm); its executable stays crac-loader.
            if Path(os.readlink(f"/proc/{proc.pid}/exe")).name == "crac-loader":
                return
        except OSError:
            return
        time.sleep(0.01)


def launch(exe: Path, args: list[str], ckpt: Path, version: int) -> subprocess.Popen:
    cmd = [*crac_cmd(), "launch", "--device", "sim", "--sim-version", str(version)]
    cmd += ["-c", str(ckpt), "--keep", "100", "--", str(exe), *args]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    wait_exec(proc)
    return proc


def restart(gen: Path, version: int) -> subprocess.CompletedProcess[str]:
    cmd = [*crac_cmd(), "restart", "--device", "sim", "--sim-version", str(version), str(gen)]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=TIMEOUT)


def checkpoint_at_random(
    proc: subprocess.Popen, ckpt: Path, rng: random.Random, count: int, gap: tuple[float, float]
) -> None:
    """Up to COUNT checkpoints of PROC, each GAP seconds (uniform) after the last one ended, until
    PROC ends."""
    taken = 0
    while taken < count and proc.poll() is None:
        time.sleep(rng.uniform(*gap))
        try:
            os.kill(proc.pid, signal.SIGUSR2)
        except ProcessLookupError:
            break
        taken += 1
        wait_generations(ckpt, taken, proc)


@pytest.mark.parametrize("name", sorted(ARGS))
def test_checkpoints_at_random_moments_restart_on_other_version(name, examples, tmp_path):
    require_native()
    exe, args = examples[name], ARGS[name]
    expected = native(exe, args)
    ckpt = tmp_path / "ckpt"
    ckpt.mkdir()
    proc = launch(exe, args, ckpt, 1)
    checkpoint_at_random(
        proc, ckpt, random.Random(f"{name}-device-state"), CHECKPOINTS, (0.02, 0.12)
    )
    out, err = proc.communicate(timeout=TIMEOUT)
    assert proc.returncode == 0, err
    assert out == expected, "the checkpointed run itself must not change the result"
    gens = generations(ckpt)
    assert gens, f"no checkpoint completed while {name} ran ({err[-2000:]})"
    for gen in gens:
        check_inspect(gen)  # crac inspect --json reads it, device.img's index included
        version = 2 if int(gen.name[4:]) % 2 else 1
        cp = restart(gen, version)
        assert cp.returncode == 0, f"{gen.name} on sim{version}: {cp.stderr[-2000:]}"
        assert cp.stdout == expected, f"{gen.name} on sim{version} finished differently"


def test_allocations_and_frees_at_random_checkpoints(sim_apps, tmp_path):
    """tests/apps/sim_malloc_churn.c: four threads allocating, checking and freeing device,
    managed and pinned memory without pause, checkpointed 30 times at random moments. A
    checkpoint must never see an address range the shim has recorded but the backend has not
    mapped yet (or has unmapped already): the writer read device memory there and the process
    died with SIGSEGV (shim_mem.c holds the gate over both). The run's output is unchanged, and
    every fifth generation restarts on the other sim version to the same output."""
    require_native()
    exe, args = sim_apps["sim_malloc_churn"], ["3000"]
    expected = native(exe, args)
    ckpt = tmp_path / "ckpt"
    ckpt.mkdir()
    proc = launch(exe, args, ckpt, 1)
    checkpoint_at_random(proc, ckpt, random.Random("malloc-churn"), 30, (0.01, 0.05))
    out, err = proc.communicate(timeout=TIMEOUT)
    assert proc.returncode == 0, f"status {proc.returncode}: {err[-2000:]}"
    assert out == expected, "the checkpointed run itself must not change the result"
    gens = generations(ckpt)
    assert len(gens) >= 5, f"only {len(gens)} checkpoints completed ({err[-2000:]})"
    for gen in gens[::5]:
        cp = restart(gen, 2)
        assert cp.returncode == 0, f"{gen.name} on sim2: {cp.stderr[-2000:]}"
        assert cp.stdout == expected, f"{gen.name} on sim2 finished differently"


@pytest.mark.parametrize("name", sorted(ARGS))
def test_two_cycles_switching_sim_versions(name, examples, tmp_path):
    """launch on sim1 -> checkpoint -> kill -> restart on sim2 -> checkpoint -> kill -> restart on
    sim1 -> same result as uninterrupted."""
    require_native()
    exe, args = examples[name], ARGS[name]
    expected = native(exe, args)
    ckpt = tmp_path / "ckpt"
    ckpt.mkdir()
    proc = launch(exe, args, ckpt, 1)
    time.sleep(0.05)  # multistream runs well under a second: signal it early
    os.kill(proc.pid, signal.SIGUSR2)
    wait_generations(ckpt, 1, proc)
    proc.kill()
    proc.wait(timeout=TIMEOUT)
    (first,) = generations(ckpt)
    cmd = [*crac_cmd(), "restart", "--device", "sim", "--sim-version", "2", str(first)]
    second = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    wait_exec(second)
    time.sleep(0.05)
    second.send_signal(signal.SIGUSR2)
    wait_generations(ckpt, 2, second)
    second.kill()
    second.communicate(timeout=TIMEOUT)
    gens = generations(ckpt)
    for gen in gens:
        check_inspect(gen)
    manifest = (gens[-1] / "MANIFEST.json").read_text()
    cp = restart(gens[-1], 1)
    assert cp.returncode == 0, cp.stderr[-2000:]
    assert cp.stdout == expected
    if len(gens) == 2:  # the second checkpoint was taken under sim2, and says so
        assert '"version": "sim2"' in manifest


def test_corrupted_device_image_is_refused(examples, tmp_path):
    require_native()
    exe, args = examples["jacobi"], ARGS["jacobi"]
    ckpt = tmp_path / "ckpt"
    ckpt.mkdir()
    proc = launch(exe, args, ckpt, 1)
    time.sleep(0.4)
    os.kill(proc.pid, signal.SIGUSR2)
    wait_generations(ckpt, 1, proc)
    proc.kill()
    proc.wait(timeout=TIMEOUT)
    (gen,) = generations(ckpt)
    dev = gen / "device.img"
    assert dev.exists(), "jacobi's managed memory must be in device.img"
    assert check_inspect(gen)["device_image"]["allocations"], "device.img's index is empty"
    good = dev.read_bytes()
    rng = random.Random(5)
    cases = {"truncated": good[: len(good) // 2]}
    for i in range(3):
        flipped = bytearray(good)
        at = rng.randrange(len(flipped))
        flipped[at] ^= 1 << rng.randrange(8)
        cases[f"bit flipped at {at}"] = bytes(flipped)
    for what, data in cases.items():
        dev.write_bytes(data)
        cp = restart(gen, 2)
        assert cp.returncode == 2, f"{what}: {cp.returncode} {cp.stderr[-500:]}"
        assert cp.stderr.startswith("crac: error:"), f"{what}: {cp.stderr[-500:]}"
        assert "Traceback" not in cp.stderr
    dev.write_bytes(good)
    cp = restart(gen, 2)
    assert cp.returncode == 0, cp.stderr[-2000:]


@pytest.mark.parametrize("version", [1, 2])
def test_pointers_events_handles_and_new_allocations_after_restart(sim_apps, tmp_path, version):
    """Device pointers kept in device memory (a list a kernel walks) and in managed memory,
    cudaEventElapsedTime of events recorded before the checkpoint (the same value), destroyed
    streams and events stay destroyed, new allocations never overlap restored ones."""
    require_native()
    exe = sim_apps["sim_restore"]
    ckpt = tmp_path / "ckpt"
    ckpt.mkdir()
    cmd = [*crac_cmd(), "launch", "--device", "sim", "--sim-version", "1", "-c", str(ckpt)]
    first = subprocess.run([*cmd, "--", str(exe)], capture_output=True, text=True, timeout=TIMEOUT)
    assert first.returncode == 0, first.stderr
    assert first.stdout == "checkpointed\n"
    cp = restart(ckpt, version)
    assert cp.returncode == 0, cp.stderr[-2000:]
    assert cp.stdout == "restored after restart OK\n"
