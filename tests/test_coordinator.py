"""The coordinator at the protocol level (docs/PROTOCOL.md): fake workers (sockets) against a real
`crac coordinator` process. Status and list, the barriers between the phases, abandoning a
checkpoint when a worker disconnects, fails or hangs, tokens, busy ports, two coordinators,
intervals, --exit-on-last, --port-file, --status-file, --daemon, and the restart script."""

from __future__ import annotations

import json
import os
import socket
import stat
import subprocess
import time
from pathlib import Path

import pytest
from conftest import crac_cmd
from coord_harness import (
    TIMEOUT,
    Coordinator,
    FakeWorker,
    answer_all,
    answer_to_publish,
    clean_env,
    command,
    command_bg,
    describe_text,
    finish,
    free_port,
    request_msg,
    status_lines,
    wait_until,
)

from crac_py.coord.restart_script import listed_generations
from crac_py.coord.server import loopback_peer_uid


@pytest.fixture
def coord(tmp_path):
    c = Coordinator(tmp_path / "coord")
    yield c
    c.stop()


def workers(coord: Coordinator, tmp_path: Path, n: int, **kw) -> list[FakeWorker]:
    out = [
        FakeWorker(coord.port, tmp_path / "ckpt" / f"ckpt_fake_host-{1000 + i}", pid=1000 + i, **kw)
        for i in range(n)
    ]
    coord.wait_peers(n)
    return out


# ---------------------------------------------------------------------------------------------
# Status and list


def test_status_empty(coord):
    st = coord.request("status")
    assert st["ok"] is True
    assert (st["num_peers"], st["running"], st["ckpt_interval"]) == (0, "no", 0)
    assert st["port"] == coord.port and st["generation"] == 0
    kv = status_lines(command(coord.port, "s"))
    assert (kv["NUM_PEERS"], kv["RUNNING"], kv["CKPT_INTERVAL"]) == ("0", "no", "0")


def test_hello_welcome_status_and_list(coord, tmp_path):
    w1, w2 = workers(coord, tmp_path, 2)
    assert w1.welcome["type"] == "welcome" and w1.welcome["interval"] == 0
    assert w1.welcome["id"] != w2.welcome["id"]
    kv = status_lines(command(coord.port, "-s"))
    assert (kv["NUM_PEERS"], kv["RUNNING"]) == ("2", "yes")
    peers = coord.request("list")["peers"]
    assert [p["pid"] for p in peers] == [1000, 1001]
    assert {p["state"] for p in peers} == {"RUNNING"}
    assert set(peers[0]) >= {"id", "pid", "vpid", "program", "host", "state", "last_gen"}
    out = command(coord.port, "l")
    assert out.returncode == 0, describe_text(out)
    lines = out.stdout.splitlines()
    assert lines[0] == "Client List:"
    assert lines[2].startswith("1, fake[1000:1000]@"), lines
    w1.close()
    coord.wait_peers(1)


# ---------------------------------------------------------------------------------------------
# A job checkpoint: four phases with a barrier after each


def test_barriers_and_restart_script(coord, tmp_path):
    w1, w2 = workers(coord, tmp_path, 2)
    bc = command_bg(coord.port, "bc")
    for w in (w1, w2):
        assert w.expect("checkpoint")["exit_after"] is False
    w1.send({"type": "suspended"})
    assert w1.silent(0.4)  # w2 has not suspended: nobody writes yet
    assert coord.request("status")["running"] == "no"
    w2.send({"type": "suspended"})
    w1.expect("write")
    w2.expect("write")
    w2.send({"type": "written", "gen": 1})
    assert w2.silent(0.4)  # w1 has not written: nobody resumes yet
    w1.send({"type": "written", "gen": 1})
    w1.expect("resume")
    w2.expect("resume")
    # The programs run again; nobody publishes before every image is durable.
    w1.send({"type": "durable", "gen": 1})
    assert w1.silent(0.4)
    assert coord.request("status")["running"] == "no"  # the checkpoint is not over
    w2.send({"type": "durable", "gen": 1})
    for w in (w1, w2):
        w.expect("publish")
        w.gen_dir(1).mkdir(parents=True)
        w.send({"type": "published", "gen": 1, "dir": str(w.gen_dir(1))})
    rc, out, err = finish(bc)
    assert rc == 0, (out, err)
    script = tmp_path / "ckpt" / "crac_restart_script.sh"
    assert out.splitlines() == ["GENERATION=1", f"RESTART_SCRIPT={script}"]
    assert stat.S_IMODE(script.stat().st_mode) == 0o700
    assert listed_generations(script) == [w1.gen_dir(1), w2.gen_dir(1)]
    text = script.read_text()
    assert text.startswith("#!/bin/sh\n")
    assert "expect 2" in text and text.count("restart --join-coordinator") == 2
    assert '"$dir"/ckpt_fake_host-1000/gen-000001 &' in text
    assert f"DMTCP_PORT:-{coord.port}}}" in text
    assert not list((tmp_path / "ckpt").glob(".*tmp*"))  # written under a temporary name
    st = coord.request("status")
    assert (st["running"], st["generation"]) == ("yes", 1)
    assert [p["last_gen"] for p in coord.request("list")["peers"]] == [1, 1]
    kv = status_lines(command(coord.port, "s"))
    assert kv["GENERATION"] == "1"


def test_nobody_publishes_before_every_process_is_durable(coord, tmp_path):
    """A process lost while the writers run (after `resume`, before its `durable`) calls the
    checkpoint off for everyone: a process that is already durable is told to abort, never to
    publish, and the job stays at its previous generation."""
    w1, w2, w3 = workers(coord, tmp_path, 3)
    bc = command_bg(coord.port, "bc")
    for w in (w1, w2, w3):
        w.expect("checkpoint")
    answer_all([w1, w2, w3], 1)
    assert finish(bc)[0] == 0
    script = tmp_path / "ckpt" / "crac_restart_script.sh"
    before = script.read_text()
    bc = command_bg(coord.port, "bc")
    for w in (w1, w2, w3):
        w.expect("checkpoint")
        w.send({"type": "suspended"})
    for w in (w1, w2, w3):
        w.expect("write")
        w.send({"type": "written", "gen": 2})
    for w in (w1, w2, w3):
        w.expect("resume")
    w1.send({"type": "durable", "gen": 2})
    w3.send({"type": "durable", "gen": 2})
    assert w1.silent(0.3)
    w2.close()  # killed while its writer ran
    for w in (w1, w3):
        assert w.expect("abort")["reason"]
    rc, _, err = finish(bc)
    assert rc == 2 and "pid 1001" in err and "resume phase" in err, err
    assert script.read_text() == before
    st = coord.request("status")
    assert (st["generation"], st["num_peers"]) == (1, 2)
    assert [p["last_gen"] for p in coord.request("list")["peers"]] == [1, 1]


def test_restart_script_runs_from_a_fresh_shell(coord, tmp_path):
    """The script starts a coordinator when none answers, announces the processes, and runs one
    `crac restart --join-coordinator` per process; here the generations are not real images, so
    each restart is refused (exit 2) and the script exits with that status."""
    w1, w2 = workers(coord, tmp_path, 2)
    bc = command_bg(coord.port, "bc")
    for w in (w1, w2):
        w.expect("checkpoint")
    answer_all([w1, w2], 1)
    assert finish(bc)[0] == 0
    script = tmp_path / "ckpt" / "crac_restart_script.sh"
    port = free_port()
    env = clean_env({"PATH": "/usr/bin:/bin"})
    cp = subprocess.run(
        [str(script), "-p", str(port)],
        capture_output=True,
        text=True,
        env=env,
        cwd="/",
        timeout=120,
    )
    assert cp.returncode == 2, describe_text(cp)
    assert cp.stderr.count("crac: error:") == 2, describe_text(cp)
    assert "gen-000001" in cp.stderr
    # the coordinator it started, which no process joined, goes away too (it may take a moment
    # to shut down after the script returned)
    deadline = time.monotonic() + 15
    while command(port, "s").returncode != 2 and time.monotonic() < deadline:
        time.sleep(0.2)
    assert command(port, "s").returncode == 2


def test_abort_when_a_worker_disconnects_mid_phase(coord, tmp_path):
    w1, w2, w3 = workers(coord, tmp_path, 3)
    bc = command_bg(coord.port, "bc")
    for w in (w1, w2, w3):
        w.expect("checkpoint")
    w1.send({"type": "suspended"})
    w2.send({"type": "suspended"})
    w3.close()  # dies before it suspended
    for w in (w1, w2):
        msg = w.expect("abort")
        assert "pid 1002" in msg["reason"] and "disconnected" in msg["reason"]
    rc, out, err = finish(bc)
    assert rc == 2, (out, err)
    assert "abandoned" in err and "pid 1002" in err and "valid" in err
    assert not (tmp_path / "ckpt" / "crac_restart_script.sh").exists()
    st = coord.request("status")
    assert (st["num_peers"], st["running"], st["generation"]) == (2, "yes", 0)
    assert "abandoned" in coord.log_text()
    # the job goes on: the next checkpoint works
    bc = command_bg(coord.port, "bc")
    for w in (w1, w2):
        w.expect("checkpoint")
    answer_all([w1, w2], 1)
    assert finish(bc)[0] == 0


def test_abort_in_write_phase_keeps_previous_script(coord, tmp_path):
    w1, w2 = workers(coord, tmp_path, 2)
    bc = command_bg(coord.port, "bc")
    for w in (w1, w2):
        w.expect("checkpoint")
    answer_all([w1, w2], 1)
    assert finish(bc)[0] == 0
    script = tmp_path / "ckpt" / "crac_restart_script.sh"
    before = script.read_text()
    bc = command_bg(coord.port, "bc")
    for w in (w1, w2):
        w.expect("checkpoint")
        w.send({"type": "suspended"})
    for w in (w1, w2):
        w.expect("write")
    w1.send({"type": "written", "gen": 2})
    w2.send({"type": "failed", "reason": "disk full"})
    msg = w1.expect("abort")
    assert "disk full" in msg["reason"]
    rc, _, err = finish(bc)
    assert rc == 2 and "disk full" in err and "job generation 1" in err
    assert script.read_text() == before
    assert coord.request("status")["generation"] == 1


def test_phase_timeout_and_late_answers(tmp_path):
    """A worker that hangs makes the coordinator abandon the checkpoint after --phase-timeout;
    its late answer is not counted for the next checkpoint."""
    coord = Coordinator(tmp_path / "coord", "--phase-timeout", "1")
    try:
        w1, w2 = workers(coord, tmp_path, 2)
        bc = command_bg(coord.port, "bc")
        for w in (w1, w2):
            w.expect("checkpoint")
        w1.send({"type": "suspended"})
        w1.expect("abort", timeout=TIMEOUT)
        rc, _, err = finish(bc)
        assert rc == 2 and "pid 1001" in err and "did not answer the checkpoint phase" in err
        w2.send({"type": "suspended"})  # too late: belongs to the abandoned checkpoint
        w2.expect("abort")  # it then sees the abort (a real worker abandons here)
        time.sleep(0.2)
        bc = command_bg(coord.port, "bc")
        for w in (w1, w2):
            w.expect("checkpoint")
        w1.send({"type": "suspended"})
        assert w1.silent(0.3)  # w2's stale answer did not complete the barrier
        w2.send({"type": "suspended"})
        answer_to_publish([w1, w2], 1)
        for w in (w1, w2):
            w.send({"type": "published", "gen": 1, "dir": str(w.gen_dir(1))})
        assert finish(bc)[0] == 0
    finally:
        coord.stop()


def _rank(coord: Coordinator, tmp_path: Path, rank: int, size: int) -> FakeWorker:
    pid = 2000 + rank
    return FakeWorker(
        coord.port,
        tmp_path / "ckpt" / f"ckpt_fake_host-{pid}",
        pid=pid,
        extra={"mpi_rank": rank, "mpi_size": size},
    )


def test_checkpoint_waits_for_every_mpi_rank(coord, tmp_path):
    """A checkpoint asked for while rank 1 of a 2-rank MPI job has not joined yet waits for it
    (a job saved without a rank could not restart), then takes both; the list shows the ranks."""
    r0 = _rank(coord, tmp_path, 0, 2)
    coord.wait_peers(1)
    bc = command_bg(coord.port, "bc")
    wait_until(
        lambda: "MPI rank" in (coord.request("status")["phase"] or ""),
        "the checkpoint waiting for the missing rank",
    )
    assert r0.silent(0.3)  # nobody is asked to suspend while a rank is missing
    r1 = _rank(coord, tmp_path, 1, 2)
    for w in (r0, r1):
        w.expect("checkpoint")
    answer_all([r0, r1], 1)
    rc, out, err = finish(bc)
    assert rc == 0, (out, err)
    ranks = {(p["mpi_rank"], p["mpi_size"]) for p in coord.request("list")["peers"]}
    assert ranks == {(0, 2), (1, 2)}
    assert "MPI rank 1 of 2" in coord.log_path.read_text()


def test_checkpoint_abandoned_when_an_mpi_rank_never_joins(tmp_path):
    coord = Coordinator(tmp_path / "coord", "--phase-timeout", "1")
    try:
        r1 = _rank(coord, tmp_path, 1, 3)
        coord.wait_peers(1)
        rc, _, err = finish(command_bg(coord.port, "bc"))
        assert rc == 2 and "2 MPI rank(s) did not join" in err and "missing ranks 0, 2 of 3" in err
        assert r1.silent(0.2)
    finally:
        coord.stop()


def test_exec_during_a_checkpoint_takes_the_process_place(coord, tmp_path):
    """A process that execs after the checkpoint asked it to suspend and before it did: its
    exec'd loader says hello with the same pid (holding the old connection until welcomed, then
    closing it); it is asked to checkpoint in the old one's place, the old connection's leaving
    no longer abandons the checkpoint, and the job's checkpoint completes."""
    w1, old = workers(coord, tmp_path, 2)
    bc = command_bg(coord.port, "bc")
    for w in (w1, old):
        w.expect("checkpoint")
    new = FakeWorker(coord.port, old.proc_dir, pid=old.pid)
    old.close()
    new.expect("checkpoint")
    answer_all([w1, new], 1)
    rc, out, err = finish(bc)
    assert rc == 0, (out, err)
    assert "exec'd from" in coord.log_text(), coord.log_text()
    st = coord.request("status")
    assert (st["num_peers"], st["generation"]) == (2, 1), st


def test_exec_welcomed_just_before_a_checkpoint_takes_the_process_place(coord, tmp_path):
    """The exec'd loader was welcomed just before the checkpoint began, so the old connection
    (closed a moment later) and the new one of the same process are both in it: the old one's
    leaving before it suspended leaves it out instead of abandoning the checkpoint (a program
    that execs every 10 ms lost a checkpoint so), and the job's checkpoint completes with the
    new one's image."""
    w1, old = workers(coord, tmp_path, 2)
    new = FakeWorker(coord.port, old.proc_dir, pid=old.pid)
    coord.wait_peers(3)
    bc = command_bg(coord.port, "bc")
    for w in (w1, old, new):
        w.expect("checkpoint")
    old.close()
    answer_all([w1, new], 1)
    rc, out, err = finish(bc)
    assert rc == 0, (out, err)
    st = coord.request("status")
    assert (st["num_peers"], st["generation"]) == (2, 1), st


def test_worker_leaving_before_the_first_phase_is_left_out(coord, tmp_path):
    """A process that ends while the checkpoint still waits for a missing MPI rank was never
    asked anything: it is left out of the checkpoint, which goes on with the others."""
    (plain,) = workers(coord, tmp_path, 1)
    r0 = _rank(coord, tmp_path, 0, 2)
    coord.wait_peers(2)
    bc = command_bg(coord.port, "bc")
    wait_until(
        lambda: "MPI rank" in (coord.request("status")["phase"] or ""),
        "the checkpoint waiting for the missing rank",
    )
    r0.close()  # the only process of the 2-rank job ends: no rank is awaited any more
    plain.do_checkpoint(1)
    rc, out, err = finish(bc)
    assert rc == 0, (out, err)
    assert "disconnected" not in err


def test_mpi_rank_outside_the_job_refused(coord, tmp_path):
    w = _rank(coord, tmp_path, 2, 2)
    assert w.welcome["type"] == "refused" and "mpi_rank" in w.welcome["reason"], w.welcome
    assert coord.request("status")["num_peers"] == 0


def test_second_checkpoint_refused_while_one_runs(coord, tmp_path):
    (w1,) = workers(coord, tmp_path, 1)
    cp = command(coord.port, "c")
    assert cp.returncode == 0 and cp.stdout == "", describe_text(cp)
    w1.expect("checkpoint")
    cp = command(coord.port, "c")
    assert cp.returncode == 2 and "checkpoint in progress" in cp.stderr, describe_text(cp)
    kv = status_lines(command(coord.port, "s"))
    assert kv["RUNNING"] == "no"
    w1.send({"type": "request", "verb": "checkpoint"})  # ignored: one is in progress
    w1.answer_rest(1)
    wait_until(lambda: coord.request("status")["running"] == "yes", "the checkpoint to end")
    assert w1.silent(0.3)


def test_worker_request_checkpoints_the_whole_job(coord, tmp_path):
    """A checkpoint signal to any one process (its worker sends `request`) checkpoints all."""
    w1, w2, w3 = workers(coord, tmp_path, 3)
    w2.send({"type": "request", "verb": "checkpoint"})
    for w in (w1, w2, w3):
        w.expect("checkpoint")
    answer_all([w1, w2, w3], 1)
    script = tmp_path / "ckpt" / "crac_restart_script.sh"
    wait_until(script.exists, "the restart script")
    assert len(listed_generations(script)) == 3


def test_kcheckpoint_waits_for_exits(coord, tmp_path):
    w1, w2 = workers(coord, tmp_path, 2)
    kc = command_bg(coord.port, "kc")
    for w in (w1, w2):
        assert w.expect("checkpoint")["exit_after"] is True
    answer_all([w1, w2], 1)
    w1.close()
    time.sleep(0.3)
    assert kc.poll() is None  # w2 has not exited yet
    w2.close()
    rc, out, _ = finish(kc)
    assert rc == 0 and "GENERATION=1" in out
    assert coord.request("status")["num_peers"] == 0


def test_kill_and_quit(coord, tmp_path):
    w1, w2 = workers(coord, tmp_path, 2)
    cp = command(coord.port, "k")
    assert cp.returncode == 0 and cp.stdout == "KILLED=2\n", describe_text(cp)
    for w in (w1, w2):
        w.expect("kill")
    w3 = FakeWorker(coord.port, tmp_path / "ckpt" / "x", pid=77)
    cp = command(coord.port, "q")
    assert cp.returncode == 0 and "KILLED=3" in cp.stdout, describe_text(cp)
    w3.expect("kill")
    assert coord.wait_exit() == 0


def test_restart_quorum(coord, tmp_path):
    """After `expect N`, no checkpoint starts before N restarted processes have joined and said
    they are restored (each gets its `go` first)."""
    assert coord.request("expect", 2)["ok"]
    w1 = FakeWorker(coord.port, tmp_path / "ckpt" / "a", pid=11, restarted=True)
    c = command_bg(coord.port, "c")
    assert w1.silent(0.5)
    w2 = FakeWorker(coord.port, tmp_path / "ckpt" / "b", pid=12, restarted=True)
    assert w1.silent(0.3) and w2.silent(0.3)
    for w in (w1, w2):
        w.send({"type": "restored"})
    for w in (w1, w2):
        w.expect("go")
        w.expect("checkpoint")
    assert finish(c)[0] == 0
    answer_all([w1, w2], 1)


def test_restore_barrier(coord, tmp_path):
    """docs/PROTOCOL.md "restored": a restarted process waits for `go` until every process the
    restart announced is restored; a process restarted with nothing announced goes at once."""
    assert coord.request("expect", 2)["ok"]
    ws = workers(coord, tmp_path, 2, restarted=True)
    ws[0].send({"type": "restored"})
    assert ws[0].silent(0.5)
    ws[1].send({"type": "restored"})
    ws[0].expect("go")
    ws[1].expect("go")
    late = FakeWorker(coord.port, tmp_path / "ckpt" / "d", pid=30, restarted=True)
    late.send({"type": "restored"})
    late.expect("go")
    for w in (*ws, late):
        w.close()


@pytest.mark.parametrize("how", ["disconnect", "restore_failed", "command"])
def test_restore_failure_stops_the_restart(coord, tmp_path, how):
    """docs/PROTOCOL.md "restore_failed": one process of the announced restart fails (its loader
    says so, or dies before `restored`, or `crac restart` says so before its loader runs): the
    processes waiting at the barrier, and one that says `restored` after, are told to stop
    instead of going on without it; the next restart announced starts afresh."""
    assert coord.request("expect", 3)["ok"]
    ws = workers(coord, tmp_path, 3, restarted=True)
    ws[0].send({"type": "restored"})
    assert ws[0].silent(0.3)
    if how == "disconnect":
        ws[2].close()
    elif how == "restore_failed":
        ws[2].send({"type": "restore_failed", "error": "image corrupted: a test"})
    else:
        msg = {"type": "command", "verb": "restart-failed", "token": "", "error": "image corrupted"}
        reply = request_msg(coord.port, msg)
        assert reply["ok"], reply
    stop = ws[0].expect("restore_failed")
    assert "could not be restarted" in stop["error"] or "ended before" in stop["error"], stop
    ws[1].send({"type": "restored"})
    ws[1].expect("restore_failed")
    for w in ws:
        w.close()
    assert coord.request("expect", 1)["ok"]
    again = FakeWorker(coord.port, tmp_path / "ckpt" / "e", pid=40, restarted=True)
    again.send({"type": "restored"})
    again.expect("go")
    again.close()


# ---------------------------------------------------------------------------------------------
# Malformed input


def test_malformed_and_unknown_messages(coord, tmp_path):
    (w1,) = workers(coord, tmp_path, 1)
    w1.send_raw(b"this is not json\n")
    assert w1.expect("error")
    w1.send({"type": "frobnicate"})
    assert w1.expect("error")
    w1.send({"type": "written", "gen": 3})  # an answer nobody asked for: ignored
    assert w1.silent(0.2)
    with socket.create_connection(("127.0.0.1", coord.port), timeout=TIMEOUT) as s:
        s.sendall(b"x" * (70 * 1024) + b"\n")
        s.settimeout(TIMEOUT)
        reply = s.recv(4096)
        assert b"error" in reply
    with socket.create_connection(("127.0.0.1", coord.port), timeout=TIMEOUT) as s:
        s.sendall(b'{"type":"hello","role":"worker","pid":"x"}\n')
        s.settimeout(TIMEOUT)
        assert json.loads(s.recv(4096))["type"] == "refused"
    assert coord.request("status")["num_peers"] == 1
    w1.close()


# ---------------------------------------------------------------------------------------------
# Tokens, ports, files, lifetime


def test_token_required_and_checked(tmp_path):
    coord = Coordinator(tmp_path / "coord", "--token", "s3cret")
    try:
        bad = FakeWorker(coord.port, tmp_path / "p", pid=5, token="wrong")
        assert bad.welcome["type"] == "refused" and "token" in bad.welcome["reason"]
        good = FakeWorker(coord.port, tmp_path / "p", pid=6, token="s3cret")
        assert good.welcome["type"] == "welcome"
        # A command that cannot read the coordinator's listing (another user's, or another
        # host's, has no access to it: crac_py/coord/registry.py) must bring the token itself.
        unlisted = {"XDG_RUNTIME_DIR": str(tmp_path / "elsewhere")}
        cp = command(coord.port, "s", env=unlisted)
        assert cp.returncode == 2 and "wrong token" in cp.stderr, describe_text(cp)
        cp = command(coord.port, "s")  # this user's, on this host: its listed token
        assert cp.returncode == 0 and "NUM_PEERS=1" in cp.stdout, describe_text(cp)
        cp = command(coord.port, "--token", "nope", "s")
        assert cp.returncode == 2 and "wrong token" in cp.stderr, describe_text(cp)
        kv = status_lines(command(coord.port, "s", env={"CRAC_COORD_TOKEN": "s3cret"}))
        assert kv["NUM_PEERS"] == "1"
    finally:
        coord.stop()


def test_other_interface_needs_token(tmp_path):
    argv = [*crac_cmd(), "coordinator", "-p", "0", "--host", "0.0.0.0"]
    cp = subprocess.run(argv, capture_output=True, text=True, env=clean_env(), timeout=TIMEOUT)
    assert cp.returncode == 2, describe_text(cp)
    assert cp.stderr.startswith("crac: error:") and "--token" in cp.stderr
    coord = Coordinator(tmp_path / "coord", "--host", "0.0.0.0", "--token", "t0k")
    try:
        assert FakeWorker(coord.port, tmp_path / "p", pid=5).welcome["type"] == "refused"
        assert FakeWorker(coord.port, tmp_path / "p", pid=6, token="t0k").welcome["type"] == (
            "welcome"
        )
    finally:
        coord.stop()


def test_busy_port(coord):
    argv = [*crac_cmd(), "coordinator", "-p", str(coord.port)]
    cp = subprocess.run(argv, capture_output=True, text=True, env=clean_env(), timeout=TIMEOUT)
    assert cp.returncode == 2, describe_text(cp)
    lines = cp.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("crac: error: port ")
    assert "already in use" in lines[0] and str(coord.port) in lines[0]


def test_two_coordinators_do_not_interfere(tmp_path):
    a = Coordinator(tmp_path / "a", label="a")
    b = Coordinator(tmp_path / "b", label="b")
    try:
        wa = [FakeWorker(a.port, tmp_path / "ja" / f"ckpt_x_h-{i}", pid=i) for i in (1, 2)]
        wb = [FakeWorker(b.port, tmp_path / "jb" / f"ckpt_x_h-{i}", pid=i) for i in (3, 4, 5)]
        assert status_lines(command(a.port, "s"))["NUM_PEERS"] == "2"
        assert status_lines(command(b.port, "s"))["NUM_PEERS"] == "3"
        bc = command_bg(a.port, "bc")
        for w in wa:
            w.expect("checkpoint")
        answer_all(wa, 1)
        assert finish(bc)[0] == 0
        for w in wb:
            assert w.silent(0.2)
        assert (tmp_path / "ja" / "crac_restart_script.sh").exists()
        assert not (tmp_path / "jb" / "crac_restart_script.sh").exists()
        assert b.request("status")["generation"] == 0
    finally:
        a.stop()
        b.stop()


def test_interval(tmp_path):
    coord = Coordinator(tmp_path / "coord", "-i", "1")
    try:
        (w1,) = workers(coord, tmp_path, 1)
        assert w1.welcome["interval"] == 1
        assert status_lines(command(coord.port, "s"))["CKPT_INTERVAL"] == "1"
        w1.do_checkpoint(1)  # no command: the interval timer started it
        w1.do_checkpoint(2)
        assert coord.request("interval", 0) == {"ok": True, "ckpt_interval": 0}
        try:  # a checkpoint that started just before the interval was turned off
            msg = w1.recv(0.3)
        except TimeoutError:
            pass
        else:
            assert msg["type"] == "checkpoint"
            w1.answer_rest(3)
        assert w1.silent(1.5)
        assert coord.request("status")["ckpt_interval"] == 0
    finally:
        coord.stop()


def test_interval_from_environment(tmp_path):
    coord = Coordinator(tmp_path / "coord", env={"DMTCP_CHECKPOINT_INTERVAL": "42"})
    try:
        assert coord.request("status")["ckpt_interval"] == 42
    finally:
        coord.stop()


def test_exit_on_last_and_status_file(tmp_path):
    status_file = tmp_path / "coord.rc"
    coord = Coordinator(tmp_path / "coord", "--exit-on-last", "--status-file", str(status_file))
    try:
        text = status_file.read_text()
        lines = text.splitlines()
        assert lines[0].startswith("Coordinator started: ")
        host = next(ln for ln in lines if ln.startswith("Host: "))
        assert host == f"Host: {socket.gethostname()} (127.0.0.1)"
        assert f"Port: {coord.port}" in lines
        time.sleep(0.3)
        assert coord.proc.poll() is None  # nobody joined yet: it does not exit
        w1 = FakeWorker(coord.port, tmp_path / "p", pid=1)
        w2 = FakeWorker(coord.port, tmp_path / "q", pid=2)
        w1.close()
        time.sleep(0.3)
        assert coord.proc.poll() is None
        w2.close()
        assert coord.wait_exit() == 0
        assert "Coordinator exited: " in status_file.read_text()
    finally:
        coord.stop()


def test_port_file_and_daemon(tmp_path):
    port_file = tmp_path / "port"
    status_file = tmp_path / "status"
    t0 = time.monotonic()
    cp = subprocess.run(
        [
            *crac_cmd(),
            "coordinator",
            "--daemon",
            "-p",
            "0",
            "--port-file",
            str(port_file),
            "--status-file",
            str(status_file),
            "--stale-timeout",
            "60",
        ],
        capture_output=True,
        text=True,
        env=clean_env(),
        timeout=TIMEOUT,
    )
    assert cp.returncode == 0, describe_text(cp)
    assert time.monotonic() - t0 < TIMEOUT
    port = int(port_file.read_text())
    try:
        kv = status_lines(command(port, "s"))
        assert kv["COORD_PORT"] == str(port)
        assert f"Port: {port}" in status_file.read_text().splitlines()
        pid = int(
            next(ln for ln in status_file.read_text().splitlines() if ln.startswith("PID: "))[5:]
        )
        assert pid != os.getpid()
        log = status_file.with_name("status.log")
        assert "listening on" in log.read_text()
    finally:
        cp = command(port, "q")
    assert cp.returncode == 0, describe_text(cp)
    wait_until(lambda: "Coordinator exited" in status_file.read_text(), "the daemon to exit")


def test_env_port(tmp_path):
    port = free_port()
    coord = Coordinator(tmp_path / "coord", env={"DMTCP_COORD_PORT": str(port)}, port=port)
    try:
        kv = status_lines(command(None, "s", env={"DMTCP_COORD_PORT": str(port)}))
        assert kv["COORD_PORT"] == str(port)
        kv = status_lines(
            command(None, "s", env={"CRAC_COORD_PORT": str(port), "DMTCP_COORD_PORT": "1"})
        )
        assert kv["COORD_PORT"] == str(port)
    finally:
        coord.stop()


@pytest.mark.parametrize(
    ("extra", "env"),
    [
        ([], {"CRAC_CHECKPOINT_INTERVAL": "-5"}),
        (["-i", "-5"], {}),
        (["-p", "70000"], {}),
        (["--stale-timeout", "-1"], {}),
    ],
    ids=["interval-env", "interval-flag", "port", "stale"],
)
def test_coordinator_quick_start_says_what_the_cli_says(tmp_path, extra, env):
    """`crac coordinator` in the forms crac runs itself (a tree's first fork, the restart script)
    starts without the CLI's imports (crac_py/coord/quick.py); a bad value there is refused
    with the very message and status of the CLI (which `--host` makes it go through)."""
    base = [*crac_cmd(), "coordinator", "--daemon", "-q", "--port-file", str(tmp_path / "p")]
    runs = []
    for cli in ([], ["--host", "127.0.0.1"]):
        res = subprocess.run(
            [*base, *cli, *extra], capture_output=True, text=True, env={**os.environ, **env}
        )
        runs.append((res.returncode, res.stderr.strip().splitlines()[-1:]))
    assert runs[0] == runs[1] and runs[0][0] == 2, runs
    assert not (tmp_path / "p").exists()


def _has_ipv6_loopback() -> bool:
    try:
        with socket.socket(socket.AF_INET6) as sk:
            sk.bind(("::1", 0))
        return True
    except OSError:
        return False


def _uid_seen(family: int, host: str, as_uid: int | None) -> int | None:
    """The uid the coordinator's lookup gives a loopback connection made by a child running as
    AS_UID (None: as this process)."""
    with socket.socket(family) as srv:
        srv.bind((host, 0))
        srv.listen(1)
        srv.settimeout(TIMEOUT)
        looked_r, looked_w = os.pipe()
        kid = os.fork()
        if kid == 0:
            try:
                os.close(looked_w)
                if as_uid is not None:
                    os.setgid(as_uid)
                    os.setuid(as_uid)
                cli = socket.socket(family)  # made as AS_UID: the socket's owner
                cli.settimeout(TIMEOUT)
                cli.connect(srv.getsockname())  # not create_connection: no codec import here
                os.read(looked_r, 1)  # held until the parent has looked
                cli.close()
            finally:
                os._exit(0)
        os.close(looked_r)
        try:
            conn, _ = srv.accept()
            with conn:
                return loopback_peer_uid(conn.getpeername(), conn.getsockname())
        finally:
            os.close(looked_w)
            os.waitpid(kid, 0)


def test_peer_uid_lookup():
    """The coordinator tells which user a client on this host runs as (sock_diag; it read
    /proc/net/tcp, 4-5 ms a connection on this machine): this user's, another user's (when the
    test may switch users), over IPv4 and IPv6, and nobody's for an address no socket has."""
    assert _uid_seen(socket.AF_INET, "127.0.0.1", None) == os.getuid()
    if _has_ipv6_loopback():
        assert _uid_seen(socket.AF_INET6, "::1", None) == os.getuid()
    if os.getuid() == 0:
        assert _uid_seen(socket.AF_INET, "127.0.0.1", 65534) == 65534
    assert loopback_peer_uid(("127.0.0.1", 1), ("127.0.0.1", 2)) is None


def test_request_after_a_process_published_starts_the_next(coord, tmp_path):
    """A worker's request while a checkpoint runs is for it (ignored) until that worker has
    published its part: after that the program may have seen the generation, and its request
    asks for the next checkpoint, which starts as soon as this one ends; a request the moment a
    checkpoint ended starts one at once. The worker drops the signals that came before its
    publish (tests/test_job.py test_signal_to_every_process_gives_one_checkpoint). The
    coordinator used to drop every request for a second after a checkpoint, and with it a real
    one."""
    w1, w2 = workers(coord, tmp_path, 2)
    w1.send({"type": "request", "verb": "checkpoint"})
    for w in (w1, w2):
        w.expect("checkpoint")
    w2.send({"type": "request", "verb": "checkpoint"})  # before its part is over: for this one
    for w in (w1, w2):
        w.send({"type": "suspended"})
    answer_to_publish([w1, w2], 1)
    w2.send({"type": "published", "gen": 1, "dir": str(w2.gen_dir(1))})
    w2.send({"type": "request", "verb": "checkpoint"})  # after its part: the next one
    assert w1.silent(0.3) and w2.silent(0.1)
    w1.send({"type": "published", "gen": 1, "dir": str(w1.gen_dir(1))})
    for w in (w1, w2):
        w.expect("checkpoint")
    answer_all([w1, w2], 2)
    wait_until(lambda: coord.request("status")["generation"] == 2, "the second checkpoint")
    assert w1.silent(0.3) and w2.silent(0.1)  # one request, one checkpoint
    w1.send({"type": "request", "verb": "checkpoint"})
    for w in (w1, w2):
        w.expect("checkpoint")
    answer_all([w1, w2], 3)


# ---------------------------------------------------------------------------------------------
# Where restarted connections meet (docs/HOSTS.md, "Connections between hosts")


def _connections(port: int, processes: int, ends: list, timeout: float = TIMEOUT) -> dict:
    msg = {"type": "command", "verb": "connections", "token": "", "processes": processes}
    with socket.create_connection(("127.0.0.1", port), timeout=TIMEOUT) as s:
        s.sendall((json.dumps(msg | {"ends": ends}) + "\n").encode())
        s.settimeout(timeout)
        buf = b""
        while not buf.endswith(b"\n"):
            chunk = s.recv(65536)
            if not chunk:
                break
            buf += chunk
    return json.loads(buf)


def test_connections_meet_once_every_announced_process_reported(coord):
    """After `expect 3`, each report waits for the others; the two ends of a connection get each
    other's address (the smaller name connects), an end whose peer is not in the job gets none,
    and malformed reports are refused without harm."""
    import concurrent.futures

    a, b, outside = "0200aa", "0200bb", "0200cc"
    assert coord.request("expect", 3)["ok"]
    with concurrent.futures.ThreadPoolExecutor(2) as pool:
        first = pool.submit(_connections, coord.port, 1, [{"local": a, "peer": b, "addr": "h1:1"}])
        second = pool.submit(
            _connections,
            coord.port,
            1,
            [
                {"local": b, "peer": a, "addr": "h2:2"},
                {"local": b, "peer": outside, "addr": "h2:3"},
            ],
        )
        assert not first.done() and not second.done()  # a third process is announced
        for bad in ([{"local": "zz", "peer": a, "addr": "x:1"}], "nope", [{"local": a}]):
            reply = _connections(coord.port, 1, bad)  # type: ignore[arg-type]
            assert reply["ok"] is False and "connections" in reply["error"]
        third = _connections(coord.port, 1, [])
        assert third == {"ok": True, "peers": [], "complete": True}
        r1, r2 = first.result(TIMEOUT), second.result(TIMEOUT)
    assert r1["peers"] == [{"addr": "h2:2", "connect": True}]
    assert r2["peers"] == [{"addr": "h1:1", "connect": False}, {"addr": None}]
    assert coord.request("status")["ok"]
