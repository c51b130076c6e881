"""Crac used as an attacker (or a careless colleague) would: two processes writing one image
directory, planted symlinks where restart scripts are written, a coordinator flooded, fed huge
numbers or given its token on a command line, and inputs that are not programs or not manifests.
Each must end in a clear refusal or a safe outcome, never a crash, a traceback or lost images
(docs/TRUST.md, "Concurrent use, scripts, coordinator")."""

from __future__ import annotations

import ctypes
import hashlib
import json
import os
import re
import resource
import shutil
import socket
import subprocess
import time
from pathlib import Path

import pytest
from ckpt_harness import (
    POLL_S,
    WAIT_TIMEOUT,
    assert_refused,
    base_env,
    build_ckpt_apps,
    checkpoint,
    fail,
    latest_complete,
    launch,
    restart,
    wait_for_step,
)
from conftest import crac_cmd, describe, require_native
from coord_harness import (
    TIMEOUT,
    Coordinator,
    FakeWorker,
    command,
    command_bg,
    finish,
    free_port,
    request,
)


@pytest.fixture(scope="module")
def apps(tmp_path_factory) -> dict[str, Path]:
    return build_ckpt_apps(tmp_path_factory)


def wait_for_file(path: Path, proc, regular: bool = False) -> None:
    """The loader writes the restart script after it published the generation."""
    deadline = time.monotonic() + WAIT_TIMEOUT
    while not (path.is_file() and not (regular and path.is_symlink())):
        if time.monotonic() > deadline or proc.poll() is not None:
            fail(f"{path} was not written", proc)
        time.sleep(POLL_S)


def hostid() -> str:
    return f"{ctypes.CDLL(None).gethostid() & 0xFFFFFFFF:08x}"


# ---- one image directory, one writer ---------------------------------------------------------


def test_restart_while_the_original_runs_writes_a_lineage_of_its_own(apps, tmp_path):
    """A restart of a process directory whose process still runs: the two never write the same
    directory (today `latest` flipped between two histories and --keep pruned the other's)."""
    ckptdir, logs = tmp_path / "ckpt", tmp_path / "logs"
    orig = launch(apps["ckpt_counter"], ["100000", "20"], ckptdir, out_dir=logs, label="orig")
    twin = None
    try:
        wait_for_step(orig, 3)
        first = checkpoint(orig, ckptdir)
        procdir = first.parent
        twin = restart(procdir, out_dir=logs, label="twin")
        wait_for_step(twin, wait_for_step(orig, 1) + 2)
        twin_gen = checkpoint(twin, ckptdir)
        assert twin_gen.parent != procdir, f"the restart wrote into the original's {procdir}"
        assert "crac: note:" in twin.stderr_text() and str(twin_gen.parent) in twin.stderr_text()
        mine = [checkpoint(orig, ckptdir) for _ in range(3)]
        assert all(g.parent == procdir for g in mine), mine
        assert latest_complete(procdir) == mine[-1]
        assert latest_complete(twin_gen.parent) == twin_gen
        last = json.loads((mine[-1] / "MANIFEST.json").read_text())
        assert last["process"]["pid"] == orig.pid, last["process"]
    finally:
        orig.stop()
        if twin is not None:
            twin.stop()


def test_launch_never_writes_into_a_directory_holding_another_runs_images(apps, tmp_path):
    """Two launches reusing -c with the same pid (pid namespaces sharing a file system, or a pid
    reused): the second writes a lineage of its own, the first's generations stay."""
    ckptdir, logs = tmp_path / "ckpt", tmp_path / "logs"
    ckptdir.mkdir(mode=0o700)
    proc = launch(apps["ckpt_counter"], ["100000", "20"], ckptdir, out_dir=logs)
    try:
        wait_for_step(proc, 2)
        other = ckptdir / f"ckpt_ckpt_counter_{hostid()}-{proc.pid}"
        (other / "gen-000001").mkdir(parents=True)
        (other / "gen-000001" / "MANIFEST.json").write_text("the other run's\n")
        (other / "latest").symlink_to("gen-000001")
        gen = checkpoint(proc, ckptdir)
        assert gen.parent != other
        assert (other / "gen-000001" / "MANIFEST.json").read_text() == "the other run's\n"
        assert os.readlink(other / "latest") == "gen-000001"
    finally:
        proc.stop()


# ---- generated scripts -----------------------------------------------------------------------


def test_restart_script_never_follows_a_planted_link(apps, tmp_path):
    """Links planted where the loader writes crac_restart_script.sh (its old temporary name was
    predictable: the pid) are never written through: the victim file stays as it was."""
    ckptdir, logs = tmp_path / "ckpt", tmp_path / "logs"
    ckptdir.mkdir(mode=0o700)
    victim = tmp_path / "victim"
    victim.write_text("precious\n")
    victim.chmod(0o600)
    proc = launch(apps["ckpt_counter"], ["100000", "20"], ckptdir, out_dir=logs)
    try:
        wait_for_step(proc, 2)
        script = ckptdir / "crac_restart_script.sh"
        (ckptdir / f"crac_restart_script.sh.tmp-{proc.pid}").symlink_to(victim)
        script.symlink_to(victim)
        checkpoint(proc, ckptdir)
        checkpoint(proc, ckptdir)
        wait_for_file(script, proc, regular=True)
    finally:
        proc.stop()
    assert victim.read_text() == "precious\n" and (victim.stat().st_mode & 0o777) == 0o600
    assert not script.is_symlink() and script.read_text().startswith("#!/bin/sh\n")


def test_job_restart_script_never_follows_a_planted_link(tmp_path):
    from crac_py.coord.restart_script import ScriptJob, write

    job_dir = tmp_path / "job"
    job_dir.mkdir(mode=0o700)
    victim = tmp_path / "victim"
    victim.write_text("precious\n")
    (job_dir / f".crac_restart_script.sh.tmp-{os.getpid()}").symlink_to(victim)
    (job_dir / "crac_restart_script.sh").symlink_to(victim)
    job = ScriptJob(job_dir, [job_dir / "ckpt_a_1-1" / "gen-000001"], 1, 7779, 0, "crac")
    path = write(job)
    assert victim.read_text() == "precious\n"
    assert not path.is_symlink() and path.read_text().startswith("#!/bin/sh\n")


def test_restart_script_takes_a_ckptdir_starting_with_a_dash(apps, tmp_path):
    """`crac_restart_script.sh --ckptdir -copy`: the copy's path reaches `crac restart` as a
    path, not as an option."""
    ckptdir, logs = tmp_path / "ckpt", tmp_path / "logs"
    proc = launch(apps["ckpt_counter"], ["60", "20"], ckptdir, out_dir=logs)
    try:
        wait_for_step(proc, 3)
        checkpoint(proc, ckptdir)
        wait_for_file(ckptdir / "crac_restart_script.sh", proc)
    finally:
        proc.stop()
    subprocess.run(["cp", "-a", str(ckptdir), str(tmp_path / "-copy")], check=True)
    cp = subprocess.run(
        ["sh", str(ckptdir / "crac_restart_script.sh"), "--ckptdir", "-copy"],
        capture_output=True,
        cwd=tmp_path,
        env=base_env(),
        timeout=180,
    )
    assert cp.returncode == 0, cp.stderr.decode(errors="replace")
    assert cp.stdout.decode().splitlines()[-1].startswith("DONE"), cp.stdout


# ---- the coordinator -------------------------------------------------------------------------


def _send_line(port: int, data: bytes) -> bytes:
    """One raw line to the coordinator; its reply line (b"" when it closed without one)."""
    with socket.create_connection(("127.0.0.1", port), timeout=TIMEOUT) as s:
        s.sendall(data)
        buf = b""
        while b"\n" not in buf:
            chunk = s.recv(65536)
            if not chunk:
                break
            buf += chunk
    return buf


def test_coordinator_refuses_huge_numbers_and_keeps_working(tmp_path):
    """A 400-digit interval used to be stored, then overflow the timer: the next checkpoint never
    ended. Numbers out of range, 5000-digit numbers and deep nesting are refused; the job's
    next checkpoint completes."""
    coord = Coordinator(tmp_path / "coord")
    worker = None
    try:
        worker = FakeWorker(coord.port, tmp_path / "ckpt" / "ckpt_fake_1-1", pid=4242)
        assert worker.welcome["type"] == "welcome", worker.welcome
        reply = coord.request("interval", 10**400)
        assert reply["ok"] is False and "interval" in reply["error"], reply
        for value in (-1, 1 << 40, True):
            assert coord.request("interval", value)["ok"] is False, value
        assert coord.request("expect", 10**400)["ok"] is False
        huge = b'{"type":"command","verb":"status","value":' + b"9" * 5000 + b"}\n"
        deep = b"[" * 100000 + b"\n"
        for line in (huge, deep, b"\xff\xfe{}\n", b"[1, 2]\n", b'"hello"\n'):
            reply_line = _send_line(coord.port, line)
            assert json.loads(reply_line)["type"] == "error", (line[:40], reply_line)
        status = coord.request("status")
        assert status["ok"] and status["ckpt_interval"] == 0 and status["num_peers"] == 1
        bc = command_bg(coord.port, "bc")
        worker.do_checkpoint(1)
        rc, out, err = finish(bc)
        assert rc == 0 and "GENERATION=1" in out, (rc, out, err, coord.log_text())
        # A worker's `published` with a generation of 400 digits abandons that checkpoint only.
        bc = command_bg(coord.port, "bc")
        worker.expect("checkpoint")
        worker.send({"type": "suspended"})
        worker.expect("write")
        worker.send({"type": "written", "gen": 2})
        worker.expect("resume")
        worker.send({"type": "durable", "gen": 2})
        worker.expect("publish")
        worker.send({"type": "published", "gen": 10**400, "dir": str(worker.gen_dir(2))})
        rc, out, err = finish(bc)
        assert rc == 2 and "abandoned" in err, (rc, out, err)
        assert coord.request("status")["ok"]
    finally:
        if worker is not None:
            worker.close()
        coord.stop()


def test_coordinator_drops_silent_connections(tmp_path):
    """A connection that never sends its first line (or stops in the middle of one) is dropped
    after --idle-timeout instead of holding a descriptor for ever."""
    coord = Coordinator(tmp_path / "coord", "--idle-timeout", "0.5")
    try:
        silent = socket.create_connection(("127.0.0.1", coord.port), timeout=TIMEOUT)
        half = socket.create_connection(("127.0.0.1", coord.port), timeout=TIMEOUT)
        half.sendall(b'{"type":"comm')
        for s in (silent, half):
            with s:
                data = b""
                while True:  # until the coordinator closes (recv times out after TIMEOUT)
                    chunk = s.recv(65536)
                    if not chunk:
                        break
                    data += chunk
                assert b"nothing sent" in data, data
        assert coord.request("status")["ok"]
    finally:
        coord.stop()


_FLOOD = r"""
import resource, socket, sys, time
soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
socks = []
for _ in range(int(sys.argv[2])):
    try:
        socks.append(socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=10))
    except OSError:
        pass
print(len(socks), flush=True)
sys.stdin.read()
"""


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to act as another user")
def test_another_user_cannot_lock_the_coordinator_out(tmp_path):
    """Another user of the host opens 1,100 idle connections (1,021 used to use up the
    coordinator's descriptors): it gets 64, the owner's commands and processes still get in."""
    # The usual soft limit of 1,024 descriptors, whatever this runner's is (the coordinator
    # inherits it; it must raise it itself).
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (min(1024, hard), hard))
    try:
        coord = Coordinator(tmp_path / "coord")
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
    flood = subprocess.Popen(
        ["/usr/bin/python3", "-c", _FLOOD, str(coord.port), "1100"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        user=65534,
        group=65534,
        cwd="/",
        env={"PATH": "/usr/bin:/bin"},
    )
    worker = None
    try:
        assert flood.stdout is not None
        opened = flood.stdout.readline()
        assert opened.strip().isdigit(), opened
        assert coord.request("status")["ok"], coord.log_text()
        worker = FakeWorker(coord.port, tmp_path / "ckpt" / "ckpt_fake_1-1", pid=4242)
        assert worker.welcome["type"] == "welcome", worker.welcome
        assert "refusing connections from uid 65534" in coord.log_text()
    finally:
        flood.kill()
        flood.wait(timeout=TIMEOUT)
        if worker is not None:
            worker.close()
        coord.stop()


def test_new_coordinator_never_shows_the_token_in_ps(apps, tmp_path):
    """`crac launch --new-coordinator --coord-token T`: the user is warned, and no process left
    running (the coordinator daemon, the program) shows T on its command line."""
    token = f"s3cret-{os.getpid()}-{time.monotonic_ns()}"
    port = free_port()
    logs = tmp_path / "logs"
    proc = launch(
        apps["ckpt_counter"],
        ["100000", "20"],
        tmp_path / "ckpt",
        out_dir=logs,
        opts=["--new-coordinator", "-p", str(port), "--coord-token", token],
    )
    try:
        wait_for_step(proc, 2)
        daemon = request(port, "status", token=token)["pid"]
        shown = []
        for pid in [p for p in os.listdir("/proc") if p.isdigit()]:
            try:
                cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
            except OSError:
                continue
            if token.encode() in cmdline:
                shown.append((pid, cmdline))
        assert not shown, f"the token is on a command line (daemon: {daemon}): {shown}"
        assert "crac: warning: --coord-token" in proc.stderr_text()
    finally:
        proc.stop()
        try:
            request(port, "quit", token=token)
        except OSError:
            pass


def test_token_file_and_environment(tmp_path):
    """The token read from a file (--token-file / --coord-token-file) or the environment
    (CRAC_COORD_TOKEN, DMTCP_COORD_TOKEN), never needing a command line."""
    secret = tmp_path / "secret"
    secret.write_text("t0ken-in-a-file\n")
    secret.chmod(0o600)
    coord = Coordinator(tmp_path / "coord", "--token-file", str(secret))
    try:
        assert request(coord.port, "status", token="t0ken-in-a-file")["ok"]
        cp = command(coord.port, "--token-file", str(secret), "s")
        assert cp.returncode == 0 and "NUM_PEERS=0" in cp.stdout, cp.stderr
        cp = command(coord.port, "s", env={"DMTCP_COORD_TOKEN": "t0ken-in-a-file"})
        assert cp.returncode == 0, cp.stderr
        cp = command(coord.port, "s", env={"CRAC_COORD_TOKEN_FILE": str(secret)})
        assert cp.returncode == 0, cp.stderr
        # Without the coordinator's listing (another user's, another host's command), no
        # token: refused. This user's command on this host takes the listed one
        # (crac_py/coord/registry.py, tests/test_command.py).
        cp = command(coord.port, "s", env={"XDG_RUNTIME_DIR": str(tmp_path / "elsewhere")})
        assert cp.returncode == 2 and "wrong token" in cp.stderr, cp.stderr
        cp = command(coord.port, "--token-file", str(tmp_path / "none"), "s")
        assert cp.returncode != 0 and cp.stderr.startswith("crac: error: cannot read the token")
    finally:
        coord.stop()


# ---- inputs that are not programs, manifests that are not manifests -------------------------


def test_inputs_that_are_not_programs_are_refused(tmp_path):
    """A shared library with an entry point (libc.so.6 segfaulted), ld.so, an empty file, a text
    file without #!: one clear line each, from crac launch and from the loader run by hand."""
    empty = tmp_path / "empty"
    empty.write_bytes(b"")
    text = tmp_path / "noshebang"
    text.write_text("echo hi\n")
    for f in (empty, text):
        f.chmod(0o755)
    libc = Path("/lib/x86_64-linux-gnu/libc.so.6")
    ldso = Path("/lib64/ld-linux-x86-64.so.2")
    cases = [(libc, "shared library"), (ldso, "shared library"), (empty, "is empty")]
    cases += [(text, "without a #! line"), (tmp_path, "is a directory")]
    for program, why in cases:
        cp = subprocess.run(
            [*crac_cmd(), "launch", "-c", str(tmp_path / "ckpt"), str(program)],
            capture_output=True,
            env=base_env(),
            cwd=tmp_path,
            timeout=60,
        )
        line = assert_refused(cp, str(program))
        assert why in line, line
    cp = subprocess.run(
        [str(require_native()), "--", str(libc)],
        capture_output=True,
        cwd=tmp_path,
        timeout=60,
    )
    assert cp.returncode == 2 and b"is a shared library, not a program" in cp.stderr, describe(cp)


def test_address_space_limit_is_explained(tmp_path):
    """Under `ulimit -v` the windows cannot be reserved: say it is the address-space limit and
    what crac needs, not "taken by Cannot allocate memory"."""
    cp = subprocess.run(
        ["sh", "-c", 'ulimit -v 4000000 && exec "$@"', "sh", *crac_cmd(), "launch", "/bin/true"],
        capture_output=True,
        env=base_env(),
        cwd=tmp_path,
        timeout=60,
    )
    line = assert_refused(cp)
    assert "address-space limit (ulimit -v)" in line and "ulimit -v unlimited" in line, line


def _sealed(text: bytes) -> bytes:
    """TEXT with a manifest_sha256 that matches (anybody can compute it)."""
    m = re.search(rb'"manifest_sha256": "([0-9a-f]{64})"', text)
    assert m, text[:80]
    zeroed = text[: m.start(1)] + b"0" * 64 + text[m.end(1) :]
    return text[: m.start(1)] + hashlib.sha256(zeroed).hexdigest().encode() + text[m.end(1) :]


def test_hostile_manifests_never_crash_crac(apps, tmp_path):
    """inspect, verify and restart of a MANIFEST.json (whose checksum matches) that is a list, of
    wrong types, with huge numbers, deeply nested or not UTF-8: one `crac: error:` line, exit 2,
    never a traceback and never a program started."""
    ckptdir, logs = tmp_path / "ckpt", tmp_path / "logs"
    proc = launch(apps["ckpt_counter"], ["100000", "20"], ckptdir, out_dir=logs)
    try:
        wait_for_step(proc, 2)
        src = checkpoint(proc, ckptdir)
    finally:
        proc.stop()
    good = json.loads((src / "MANIFEST.json").read_text())
    zero = "0" * 64

    def doc(obj: object) -> bytes:
        if isinstance(obj, dict):
            obj = {**obj, "manifest_sha256": zero}
        return json.dumps(obj, indent=2).encode()

    process = good["process"]
    plain = doc(good)
    cases = {
        "list": doc([{"manifest_sha256": zero}]),
        "nonutf8": b"\xff\xfe" + plain,
        "5000 digits": plain.replace(b'"generation": 1', b'"generation": ' + b"9" * 5000),
        "400 digits": plain.replace(b'"generation": 1', b'"generation": ' + b"9" * 400),
        "deep": b'{"manifest_sha256": "' + zero.encode() + b'", "x": ' + b"[" * 100000 + b"}",
        "process list": doc({**good, "process": [1]}),
        "files list": doc({**good, "files": [1]}),
        "file meta string": doc({**good, "files": {"upper.core": "x"}}),
        "argv int": doc({**good, "process": {**process, "argv": 5}}),
        "signal huge": doc({**good, "process": {**process, "ckpt_signal": 10**300}}),
        "version huge": doc({**good, "format_version": 10**300}),
        "core negative": doc({**good, "upper_core": {"size": -1, "header_crc32c": 10**30}}),
        "not_saved object": doc({**good, "not_saved": {"a": 1}}),
        "device string": doc({**good, "device": "x"}),
        "program NUL": doc({**good, "process": {**process, "program": "/bin/tr\0ue"}}),
        "file outside": doc({**good, "files": {"../../x": {"size": 1, "sha256": zero}}}),
    }
    for name, text in cases.items():
        gen = tmp_path / "hostile" / name.replace(" ", "_") / "gen-000001"
        shutil.copytree(src, gen)
        (gen / "MANIFEST.json").write_bytes(_sealed(text))
        for verb in ("inspect", "verify", "restart"):
            cp = subprocess.run(
                [*crac_cmd(), verb, str(gen)],
                capture_output=True,
                env=base_env(),
                cwd=tmp_path,
                timeout=120,
            )
            assert_refused_lines(cp, f"{verb} of a manifest with {name}")


def assert_refused_lines(cp: subprocess.CompletedProcess, what: str) -> None:
    """Exit 2, every stderr line a `crac: error:` line (verify prints a table first), no
    traceback, no program output."""
    err = cp.stderr.decode(errors="replace")
    assert cp.returncode == 2 and "Traceback" not in err, f"{what}\n{describe(cp)}"
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert lines and all(ln.startswith("crac: error: ") for ln in lines), f"{what}\n{describe(cp)}"
    assert b"step" not in cp.stdout, f"{what}: the program ran\n{describe(cp)}"


def _bc_with_worker(coord: Coordinator, worker: FakeWorker, gen: int, published: Path):
    """One `crac command bc` the fake worker answers, publishing PUBLISHED as its generation."""
    bc = command_bg(coord.port, "bc")
    worker.expect("checkpoint")
    worker.send({"type": "suspended"})
    worker.expect("write")
    worker.send({"type": "written", "gen": gen})
    worker.expect("resume")
    worker.send({"type": "durable", "gen": gen})
    worker.expect("publish")
    published.mkdir(parents=True, exist_ok=True)
    worker.send({"type": "published", "gen": gen, "dir": str(published)})
    return finish(bc)


@pytest.mark.parametrize("where", ["group_writable", "not_its_images", "symlink"])
def test_coordinator_writes_the_restart_script_only_into_the_jobs_directory(tmp_path, where):
    """A token holder names the directory of the job's restart script (the parent of its hello's
    proc_dir). The coordinator used to write crac_restart_script.sh into any directory its user
    owned: one shared with the group, one the worker never published images into (a home
    directory), one reached through a link. Now the checkpoint's images stay valid but the script
    is refused with the reason, and nothing is written there."""
    coord = Coordinator(tmp_path / "coord")
    worker = None
    images = tmp_path / "ckpt"
    if where == "group_writable":
        job_dir = tmp_path / "shared"
        job_dir.mkdir()
        job_dir.chmod(0o775)
        proc_dir = job_dir / "ckpt_fake_1-1"
        published = proc_dir / "gen-000001"
    elif where == "not_its_images":
        job_dir = tmp_path / "home"
        job_dir.mkdir(mode=0o700)
        proc_dir = job_dir / "ckpt_fake_1-1"
        published = images / "ckpt_fake_1-1" / "gen-000001"
    else:
        (tmp_path / "real").mkdir(mode=0o700)
        job_dir = tmp_path / "link"
        job_dir.symlink_to(tmp_path / "real")
        proc_dir = job_dir / "ckpt_fake_1-1"
        published = proc_dir / "gen-000001"
    try:
        worker = FakeWorker(coord.port, proc_dir, pid=4243)
        assert worker.welcome["type"] == "welcome", worker.welcome
        rc, out, err = _bc_with_worker(coord, worker, 1, published)
        assert rc != 0 and "restart script" in err and "refused" in err, (rc, out, err)
        for d in (job_dir, tmp_path / "real"):
            assert not (d / "crac_restart_script.sh").exists(), where
        # The job goes on: a checkpoint into a proper directory writes its script.
        worker.close()
        worker = FakeWorker(coord.port, images / "ckpt_fake_2-2", pid=4244)
        rc, out, err = _bc_with_worker(coord, worker, 1, images / "ckpt_fake_2-2" / "gen-000001")
        assert rc == 0 and (images / "crac_restart_script.sh").is_file(), (rc, out, err)
    finally:
        if worker is not None:
            worker.close()
        coord.stop()
