"""Another crac process's program's SIGUSR2 (the checkpoint signal's number) to this one's handler
(docs/DECISIONS.md "A program's checkpoint-numbered signal to another process") when it comes
while a checkpoint holds this program's threads: the image has it, not yet given to the handler,
and the restarted program's handler gets it, once; the program the checkpoint let run on gets it
too. The signal is sent by procps's kill(1) under crac at the moment the checkpoint has parked the
threads and not yet taken their state (CRAC_TEST_PARKED_HOLD, docs/CLI.md "Environment"): the
image lost it, and the restarted parent of tests/apps/share_signal.c waited for its child's
answer forever."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys

import pytest
from ckpt_harness import (
    WAIT_TIMEOUT,
    base_env,
    build_app,
    complete_generations,
    kill9,
    launch,
    restart,
    wait_for_step,
    wait_new_generation,
)
from conftest import APPS_DIR, crac_cmd, require_native
from coord_harness import wait_until

APP = APPS_DIR / "py" / "usr2_count.py"


def _send_marked_usr2(kill: str, pid: int, tmp_path) -> None:
    """SIGUSR2 to PID from a program under crac (procps's kill): the program's, not a request."""
    sender = subprocess.run(
        [*crac_cmd(), "launch", "-c", str(tmp_path / "sender"), "--", kill, "-USR2", str(pid)],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        env=base_env(),
        cwd=tmp_path,
        timeout=WAIT_TIMEOUT,
    )
    assert sender.returncode == 0, sender.stderr.decode(errors="replace")


def test_signal_sent_while_the_threads_are_parked_reaches_the_restarted_handler(tmp_path):
    require_native()
    kill = shutil.which("kill")
    if kill is None:
        pytest.skip("no kill(1) on this machine (Debian package procps)")
    ckptdir, logs, hold = tmp_path / "ckpt", tmp_path / "logs", tmp_path / "hold"
    parked = tmp_path / "hold.parked"
    env = base_env({"CRAC_TEST_PARKED_HOLD": str(hold)})
    proc = launch(sys.executable, [str(APP)], ckptdir, out_dir=logs, env=env)
    restarted = None
    try:
        wait_for_step(proc, 3)
        before = complete_generations(ckptdir)
        os.kill(proc.pid, signal.SIGUSR2)  # from outside crac: a checkpoint
        wait_until(parked.exists, "the checkpoint to park the threads", WAIT_TIMEOUT)
        _send_marked_usr2(kill, proc.pid, tmp_path)
        hold.touch()
        gen = wait_new_generation(ckptdir, before, proc)
        wait_until(lambda: "usr2 1" in proc.lines(), "the handler in the program run on")
        kill9(proc)
        assert "usr2 2" not in proc.lines(), proc.report()
        restarted = restart(gen.parent, out_dir=logs, label="restart")
        # Its first step after the restart, then a few more: the handler ran at the restart
        # (the thread's first instructions), once.
        first = wait_for_step(restarted, 1)
        wait_for_step(restarted, first + 10)
        lines = restarted.lines()
        assert lines.count("usr2 1") == 1 and "usr2 2" not in lines, restarted.report()
        assert lines.index("usr2 1") <= 2, restarted.report()
    except BaseException:
        print(proc.report(), restarted.report() if restarted else "", sep="\n")
        raise
    finally:
        proc.stop()
        if restarted is not None:
            restarted.stop()


def test_group_signal_reaches_every_handler_and_takes_no_checkpoint(tmp_path):
    """kill(0) and killpg() of SIGUSR2 from a program under crac (GNU timeout signals its group
    this way): each process of the group, itself included, runs its handler; none checkpoints."""
    require_native()
    ckptdir, logs = tmp_path / "ckpt", tmp_path / "logs"
    proc = launch(sys.executable, [str(APPS_DIR / "py" / "usr2_group.py")], ckptdir, out_dir=logs)
    try:
        assert proc.wait(timeout=WAIT_TIMEOUT) == 0, proc.report()
        lines = proc.lines()
        for who in ("parent", "child"):
            assert lines.count(f"{who} usr2 2") == 1, proc.report()
        assert lines[-1] == "DONE", proc.report()
        assert complete_generations(ckptdir) == {}, proc.report()
    except BaseException:
        print(proc.report())
        raise
    finally:
        proc.stop()


def test_signal_after_a_restart_inside_the_handler_reaches_the_handler(tmp_path, tmp_path_factory):
    """A checkpoint taken while the program's SIGUSR2 handler runs (crac runs it inside its own
    handler, where a thread can be suspended), restarted: the handler ends, and the next SIGUSR2
    reaches it again. Before, the handler's end restored the per-thread mask of the thread id the
    handler began under, and the restarted thread has another: its SIGUSR2 stayed blocked in
    crac's books, and every later one waited for an unblock that never came (the lost signal of
    share_signal after a restart)."""
    require_native()
    kill = shutil.which("kill")
    if kill is None:
        pytest.skip("no kill(1) on this machine (Debian package procps)")
    app = build_app(tmp_path_factory, APPS_DIR / "usr2_gate_handler.c")
    ckptdir, logs, gate = tmp_path / "ckpt", tmp_path / "logs", tmp_path / "gate"
    proc = launch(app, [str(gate)], ckptdir, out_dir=logs)
    restarted = None
    try:
        wait_for_step(proc, 3)
        _send_marked_usr2(kill, proc.pid, tmp_path)
        wait_until(lambda: "in handler 1" in proc.lines(), "the handler to start")
        before = complete_generations(ckptdir)
        os.kill(proc.pid, signal.SIGUSR2)  # from outside crac: a checkpoint
        gen = wait_new_generation(ckptdir, before, proc)
        kill9(proc)
        assert "handler done 1" not in proc.lines(), proc.report()
        restarted = restart(gen.parent, out_dir=logs, label="restart")
        gate.touch()
        wait_until(lambda: "handler done 1" in restarted.lines(), "the handler to end")
        first = wait_for_step(restarted, 1)
        _send_marked_usr2(kill, restarted.pid, tmp_path)
        wait_until(lambda: "in handler 2" in restarted.lines(), "the second SIGUSR2's handler")
        wait_for_step(restarted, first + 3)
        assert restarted.lines().count("in handler 2") == 1, restarted.report()
    except BaseException:
        print(proc.report(), restarted.report() if restarted else "", sep="\n")
        raise
    finally:
        proc.stop()
        if restarted is not None:
            restarted.stop()


RECEIVER = """import signal
signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGUSR1})
print("ready", flush=True)
while True:
    si = signal.sigwaitinfo({signal.SIGUSR1})
    print(si.si_pid, si.si_code, flush=True)
"""


def test_sigqueue_after_a_restart_names_the_sender_by_its_kernel_pid(tmp_path, tmp_path_factory):
    """sigqueue() puts the caller's getpid() in the siginfo, which the kernel passes on as given:
    after a restart that was the pid the program knows, its old one, and a receiver outside crac
    (which answers with kill(si_pid), as a server does) would have named a process that no longer
    exists, or another one. Now the receiver sees the restarted process's kernel pid."""
    require_native()
    app = build_app(tmp_path_factory, APPS_DIR / "sigqueue_out.c")
    ckptdir, logs = tmp_path / "ckpt", tmp_path / "logs"
    logs.mkdir()
    with open(logs / "receiver.out", "wb") as out:
        receiver = subprocess.Popen([sys.executable, "-c", RECEIVER], stdout=out)
    proc = restarted = None
    try:
        got = lambda: (logs / "receiver.out").read_text().split("\n")[:-1]  # noqa: E731
        wait_until(lambda: got()[:1] == ["ready"], "the receiver to start", WAIT_TIMEOUT)
        proc = launch(app, [str(receiver.pid), "200", "20"], ckptdir, out_dir=logs)
        wait_for_step(proc, 5)
        before = complete_generations(ckptdir)
        os.kill(proc.pid, signal.SIGUSR2)
        gen = wait_new_generation(ckptdir, before, proc)
        kill9(proc)
        restarted = restart(gen.parent, out_dir=logs, label="restart")
        first = wait_for_step(restarted, 1)
        wait_for_step(restarted, first + 5)
        wait_until(
            lambda: len(got()) > 1 and got()[-1].split()[0] == str(restarted.pid),
            "a signal from the restarted process, by its kernel pid",
            30,
        )
        senders = [int(line.split()[0]) for line in got()[1:]]
        assert set(senders) == {proc.pid, restarted.pid}, (senders, proc.pid, restarted.pid)
        # the launched process's, then the restarted one's: none of the old pid after the restart
        switch = senders.index(restarted.pid)
        assert set(senders[switch:]) == {restarted.pid}, (senders, proc.pid, restarted.pid)
        assert all(line.split()[1] == str(-1) for line in got()[1:]), got()  # SI_QUEUE
    except BaseException:
        print(proc.report() if proc else "", restarted.report() if restarted else "", sep="\n")
        raise
    finally:
        receiver.kill()
        receiver.wait()
        for p in (proc, restarted):
            if p is not None:
                p.stop()
