"""`crac command`: dmtcp_command's verbs (with or without dashes), the output lines scripts parse,
exit statuses (0 success, 2 coordinator not found or error, 1 usage), --json, and a test script
written the way DMTCP users write them."""

from __future__ import annotations

import json
import os
import shlex
import stat
import threading

import pytest
from conftest import crac_cmd
from coord_harness import (
    Coordinator,
    FakeWorker,
    answer_all,
    command,
    describe_text,
    free_port,
    run_script,
    status_lines,
    wait_until,
)

from crac_py.coord import registry


@pytest.fixture
def coord(tmp_path):
    c = Coordinator(tmp_path / "coord")
    yield c
    c.stop()


def test_status_output_exact(coord, tmp_path):
    ws = [FakeWorker(coord.port, tmp_path / f"p{i}", pid=i) for i in (1, 2)]
    coord.wait_peers(len(ws))
    cp = command(coord.port, "s")
    assert cp.returncode == 0 and cp.stderr == "", describe_text(cp)
    assert cp.stdout.splitlines() == [
        "NUM_PEERS=2",
        "RUNNING=yes",
        "CKPT_INTERVAL=0",
        "COORD_HOST=localhost",
        f"COORD_PORT={coord.port}",
        "GENERATION=0",
    ]


@pytest.mark.parametrize("spelling", ["s", "-s", "--status", "status", "S"])
def test_status_spellings(coord, spelling):
    kv = status_lines(command(coord.port, spelling))
    assert (kv["NUM_PEERS"], kv["RUNNING"]) == ("0", "no")


@pytest.mark.parametrize(
    "args",
    [
        ["-p{port}", "s"],
        ["--port", "{port}", "s"],
        ["--coord-port={port}", "s"],
        ["-h", "127.0.0.1", "-p", "{port}", "-s"],
        ["--host=localhost", "-p", "{port}", "s"],
    ],
)
def test_host_and_port_spellings(coord, args):
    cp = command(None, *[a.replace("{port}", str(coord.port)) for a in args])
    assert status_lines(cp)["COORD_PORT"] == str(coord.port)


@pytest.mark.parametrize(
    "args,value",
    [
        (["i", "30"], 30),
        (["-i", "31"], 31),
        (["-i32"], 32),
        (["--interval", "33"], 33),
        (["--interval=34"], 34),
        (["interval", "0"], 0),
    ],
)
def test_interval_spellings(coord, args, value):
    cp = command(coord.port, *args)
    assert cp.returncode == 0 and cp.stdout == f"CKPT_INTERVAL={value}\n", describe_text(cp)
    assert status_lines(command(coord.port, "s"))["CKPT_INTERVAL"] == str(value)


@pytest.mark.parametrize("spelling", ["l", "-l", "--list", "list"])
def test_list_spellings(coord, tmp_path, spelling):
    w = FakeWorker(coord.port, tmp_path / "p1", pid=4242, program="app")
    coord.wait_peers(1)
    cp = command(coord.port, spelling)
    assert cp.returncode == 0, describe_text(cp)
    lines = cp.stdout.splitlines()
    assert lines[:2] == ["Client List:", "#, PROG[virtPID:realPID]@HOST, ID, STATE, LAST_GEN"]
    assert lines[2].startswith("1, app[4242:4242]@") and ", RUNNING," in lines[2]
    w.close()


@pytest.mark.parametrize("spelling", ["bc", "-bc", "--bcheckpoint", "bcheckpoint"])
def test_blocking_checkpoint_spellings(coord, tmp_path, spelling):
    ws = [FakeWorker(coord.port, tmp_path / "j" / f"ckpt_a_h-{i}", pid=i) for i in (1, 2)]
    coord.wait_peers(2)
    result = {}
    t = threading.Thread(target=lambda: result.setdefault("cp", command(coord.port, spelling)))
    t.start()
    for w in ws:
        w.expect("checkpoint")
    answer_all(ws, 1)
    t.join(timeout=60)
    cp = result["cp"]
    script = tmp_path / "j" / "crac_restart_script.sh"
    assert cp.returncode == 0, describe_text(cp)
    assert cp.stdout.splitlines() == ["GENERATION=1", f"RESTART_SCRIPT={script}"]


@pytest.mark.parametrize("spelling", ["c", "-c", "--checkpoint", "checkpoint"])
def test_checkpoint_spellings(coord, tmp_path, spelling):
    w = FakeWorker(coord.port, tmp_path / "j" / "ckpt_a_h-1", pid=1)
    coord.wait_peers(1)
    cp = command(coord.port, spelling)
    assert cp.returncode == 0 and cp.stdout == "", describe_text(cp)
    w.expect("checkpoint")
    answer_all([w], 1)


@pytest.mark.parametrize("spelling", ["k", "-k", "--kill", "kill"])
def test_kill_spellings(coord, tmp_path, spelling):
    w = FakeWorker(coord.port, tmp_path / "p", pid=1)
    coord.wait_peers(1)
    cp = command(coord.port, spelling)
    assert cp.returncode == 0 and cp.stdout == "KILLED=1\n", describe_text(cp)
    w.expect("kill")


@pytest.mark.parametrize("spelling", ["q", "-q", "--quit", "quit"])
def test_quit_spellings(tmp_path, spelling):
    c = Coordinator(tmp_path / "coord")
    try:
        cp = command(c.port, spelling)
        assert cp.returncode == 0 and cp.stdout == "KILLED=0\n", describe_text(cp)
        assert c.wait_exit() == 0
    finally:
        c.stop()


def test_kcheckpoint(coord, tmp_path):
    w = FakeWorker(coord.port, tmp_path / "j" / "ckpt_a_h-1", pid=1)
    coord.wait_peers(1)
    result = {}
    t = threading.Thread(target=lambda: result.setdefault("cp", command(coord.port, "-kc")))
    t.start()
    assert w.expect("checkpoint")["exit_after"] is True
    answer_all([w], 1)
    w.close()
    t.join(timeout=60)
    assert result["cp"].returncode == 0 and "GENERATION=1" in result["cp"].stdout


# ---------------------------------------------------------------------------------------------
# Errors and exit statuses


def test_coordinator_not_found():
    port = free_port()
    cp = command(port, "s")
    assert cp.returncode == 2, describe_text(cp)
    assert cp.stdout == ""
    lines = cp.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("crac: error: coordinator not found at ")
    assert f"localhost:{port}" in lines[0]
    # A lone `crac launch` starts no coordinator (unlike dmtcp_launch): the line says what to do.
    assert "kill -USR2 PID" in lines[0] and "--new-coordinator" in lines[0]
    cp = command(None, "-h", "127.0.0.1", "-p", str(port), "bc")
    assert cp.returncode == 2 and f"127.0.0.1:{port}" in cp.stderr, describe_text(cp)


def test_several_listed_coordinators_are_named_not_guessed(tmp_path):
    """With no host or port given and none at 7779, `crac command` uses the one coordinator of
    this user's it finds listed (crac_py/coord/registry.py); of two it takes neither and names
    both; one with a token is reached with its listed token; a killed one is left out."""
    run_dir = tmp_path / "run"
    run_dir.mkdir(mode=0o700)
    env = {"XDG_RUNTIME_DIR": str(run_dir)}
    if command(None, "s", env=env).returncode == 0:  # nothing listed yet: 7779 alone
        pytest.skip("a coordinator answers at the default port 7779 on this host")
    listed = run_dir / "crac"
    a = Coordinator(tmp_path / "a", env=env, label="a")
    secret = tmp_path / "secret"
    secret.write_text("s3cret\n")
    b = Coordinator(tmp_path / "b", "--token-file", str(secret), env=env, label="b")
    try:
        for c in (a, b):
            wait_until(lambda c=c: (listed / f"coord-{c.port}.json").exists(), "listed")
        assert stat.S_IMODE(os.stat(listed).st_mode) == 0o700
        cp = command(None, "s", env=env)
        assert cp.returncode == 2, describe_text(cp)
        assert f":{a.port} (pid " in cp.stderr and f":{b.port} (pid " in cp.stderr
        assert "give one with -p PORT" in cp.stderr
        cp = command(b.port, "s", env=env)  # the token comes from the list
        assert cp.returncode == 0 and f"COORD_PORT={b.port}" in cp.stdout, describe_text(cp)
        b.proc.kill()  # SIGKILL: it cannot take itself off the list
        b.proc.wait()
        cp = command(None, "s", env=env)
        assert cp.returncode == 0 and f"COORD_PORT={a.port}" in cp.stdout, describe_text(cp)
        assert not (listed / f"coord-{b.port}.json").exists()
        a.proc.terminate()  # SIGTERM: it ends and takes itself off the list
        a.proc.wait(timeout=30)
        assert not (listed / f"coord-{a.port}.json").exists()
    finally:
        a.stop()
        b.stop()


@pytest.mark.parametrize("var", ["CRAC_COORD_PORT", "DMTCP_COORD_PORT", "DMTCP_PORT"])
def test_not_found_names_env_port(var):
    port = free_port()
    cp = command(None, "s", env={var: str(port)})
    assert cp.returncode == 2 and f"localhost:{port}" in cp.stderr, describe_text(cp)


def test_not_found_names_env_host():
    port = free_port()
    cp = command(None, "s", env={"DMTCP_COORD_HOST": "127.0.0.1", "DMTCP_COORD_PORT": str(port)})
    assert cp.returncode == 2 and f"127.0.0.1:{port}" in cp.stderr, describe_text(cp)


def test_checkpoint_without_processes_is_an_error(coord):
    for verb in ("c", "bc", "kc"):
        cp = command(coord.port, verb)
        assert cp.returncode == 2, describe_text(cp)
        assert cp.stderr.startswith("crac: error: ") and "no process" in cp.stderr


@pytest.mark.parametrize(
    "args",
    [[], ["frobnicate"], ["i"], ["-i", "x"], ["s", "extra"], ["xc"], ["-p"], ["-p", "99999", "s"]],
)
def test_usage_errors(args):
    cp = command(None, *args)
    assert cp.returncode == 1, describe_text(cp)
    assert cp.stdout == "" and cp.stderr.startswith("crac: error: "), describe_text(cp)
    assert "Traceback" not in cp.stderr


def test_help():
    cp = command(None, "--help")
    assert cp.returncode == 0 and "bcheckpoint" in cp.stdout and "NUM_PEERS" in cp.stdout


# ---------------------------------------------------------------------------------------------
# --json


def test_json_for_every_verb(coord, tmp_path):
    w = FakeWorker(coord.port, tmp_path / "j" / "ckpt_a_h-1", pid=7)
    coord.wait_peers(1)

    def js(*args: str) -> dict:
        cp = command(coord.port, "--json", *args)
        assert cp.returncode == 0, describe_text(cp)
        return json.loads(cp.stdout)

    st = js("s")
    assert st["ok"] and st["num_peers"] == 1 and st["running"] == "yes" and st["port"] == coord.port
    assert js("l")["peers"][0]["pid"] == 7
    assert js("i", "9")["ckpt_interval"] == 9
    assert js("i", "0")["ckpt_interval"] == 0
    assert js("c")["started"] is True
    w.expect("checkpoint")
    answer_all([w], 1)
    result = {}
    t = threading.Thread(target=lambda: result.setdefault("r", js("bc")))
    t.start()
    w.expect("checkpoint")
    answer_all([w], 2)
    t.join(timeout=60)
    assert result["r"]["generation"] == 2 and result["r"]["dirs"] == [str(w.gen_dir(2))]
    assert js("k")["killed"] == 1
    cp = command(free_port(), "--json", "s")
    assert cp.returncode == 2 and json.loads(cp.stdout)["ok"] is False


# ---------------------------------------------------------------------------------------------
# A script written the way DMTCP users write theirs


DMTCP_STYLE = """\
#!/bin/sh
# Written for dmtcp_command; only the command name changed.
crac() {{ {crac} "$@"; }}
export DMTCP_COORD_PORT={port}
NUM=$(crac command -s | grep NUM_PEERS= | sed -e 's/.*NUM_PEERS=//')
echo "peers: $NUM"
[ "$NUM" -eq 2 ] || exit 10
crac command -s | grep -q "RUNNING=yes" || exit 11
crac command --bcheckpoint || exit 12
INTERVAL=$(crac command -s | awk -F= '/CKPT_INTERVAL/ {{print $2}}')
[ "$INTERVAL" = 0 ] || exit 13
crac command -i 60 >/dev/null || exit 14
crac command -s | grep -q "CKPT_INTERVAL=60" || exit 15
if crac command -s -p 1 >/dev/null 2>&1; then exit 16; fi
[ -e "{ckptdir}/crac_restart_script.sh" ] || exit 17
echo ok
"""


def test_dmtcp_style_script(coord, tmp_path):
    ckptdir = tmp_path / "j"
    ws = [FakeWorker(coord.port, ckptdir / f"ckpt_a_h-{i}", pid=i) for i in (1, 2)]
    coord.wait_peers(2)
    stop = threading.Event()

    def serve() -> None:  # the workers answer whatever checkpoint comes
        while not stop.is_set():
            try:
                ws[0].expect("checkpoint", timeout=0.2)
            except TimeoutError:
                continue
            ws[1].expect("checkpoint")
            answer_all(ws, 1)

    t = threading.Thread(target=serve, daemon=True)
    t.start()
    script = tmp_path / "job.sh"
    crac = shlex.join(crac_cmd())
    script.write_text(DMTCP_STYLE.format(crac=crac, port=coord.port, ckptdir=ckptdir))
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CRAC_COORD", "DMTCP_"))}
    cp = run_script([str(script)], env=env)
    stop.set()
    t.join(timeout=10)
    assert cp.returncode == 0, describe_text(cp)
    restart = f"RESTART_SCRIPT={ckptdir}/crac_restart_script.sh"
    assert cp.stdout.splitlines() == ["peers: 2", "GENERATION=1", restart, "ok"]


def test_registry_ignores_a_directory_others_can_open(tmp_path, monkeypatch):
    """The list is trusted only in a directory of this user's that nobody else can open: one
    planted in /tmp by another user (or left group-readable) is neither read nor written."""
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path))
    shared = tmp_path / "crac"
    shared.mkdir()
    shared.chmod(0o755)
    assert registry.entry_path(1234) is None  # nowhere to list a coordinator
    assert not list(shared.iterdir())
    (shared / "coord-1234.json").write_text('{"host": "h", "port": 1, "pid": 1, "token": ""}')
    assert registry.live() == []
    shared.chmod(0o700)
    assert registry.live() != []  # pid 1 lives: listed once the directory is private


def test_registry_tells_a_pid_that_came_round_again(tmp_path, monkeypatch):
    """A coordinator killed with SIGKILL leaves its entry, and its pid may be another process's by
    the time `crac command` looks (pids wrap in minutes on a busy host): the entry's start time,
    which the coordinator writes beside its pid, must be that process's too. An entry without one
    (an older coordinator's) is judged by its pid alone."""
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path))
    path = registry.entry_path(4321)
    assert path is not None
    mine = json.loads(registry.entry_text("127.0.0.1", 4321, "t"))
    assert mine["pid"] == os.getpid() and isinstance(mine["start"], int)
    path.write_text(json.dumps(mine))
    assert [e.port for e in registry.live()] == [4321]
    path.write_text(json.dumps({**mine, "start": mine["start"] + 1}))  # another process's
    assert registry.live() == [] and not path.exists()
    path.write_text(json.dumps({k: v for k, v in mine.items() if k != "start"}))
    assert [e.port for e in registry.live()] == [4321]
