"""A job that spans hosts (docs/HOSTS.md), the hosts being network namespaces on this machine:
processes on two hosts join one coordinator over TCP with the shared secret (never on a command
line), their images go to each host's own scratch directory, the job is checkpointed, killed and
restarted on two other hosts (each host restarting its share with `--part K/M`, from images
copied to its own directory) and then on one; every process's output, stitched over the restarts,
equals an uninterrupted run. A host that drops off the network during a checkpoint makes the
coordinator abandon it cleanly, and the previous checkpoint stays the job's restart point."""

from __future__ import annotations

import os
import secrets
import shutil
import subprocess
import time
from collections.abc import Mapping
from pathlib import Path

import pytest
from ckpt_harness import RUN_TIMEOUT, WAIT_TIMEOUT, CracProc, base_env
from conftest import crac_cmd, require_native
from hosts_harness import Hosts, copy_process_dir, make_hosts, script_copy, tree_of
from job_harness import Output, check_chain, segments_of, wait_past, wait_steps

from crac_py.coord.restart_script import HOST_MARK, listed_generations

PORT = 7779  # each host is a namespace of its own: the default port is free there
STEPS = 300
TAGS = ["p1", "p2", "p3", "p4"]


@pytest.fixture
def hosts4():
    require_native()
    h = make_hosts(4)
    yield h
    h.remove()


@pytest.fixture
def hosts2():
    require_native()
    h = make_hosts(2)
    yield h
    h.remove()


class NetJob:
    """Coordinators, processes and restart scripts of one job, each on a given host."""

    def __init__(self, hosts: Hosts, tmp: Path, phase_timeout: float = 60.0):
        self.hosts = hosts
        self.tmp = tmp
        self.logs = tmp / "logs"
        self.token = secrets.token_hex(16)
        self.env = base_env({"CRAC_COORD_TOKEN": self.token})
        self.phase_timeout = phase_timeout
        self.procs: list[CracProc] = []
        self.scripts: list[CracProc] = []
        self.app = Path()
        self.coord: CracProc | None = None
        self.coord_host = 0
        self.cwd = tmp / "cwd"
        self.cwd.mkdir(parents=True, exist_ok=True)

    def start_coordinator(self, i: int, label: str) -> None:
        argv = [*crac_cmd(), "coordinator", "--host", self.hosts.addr(i), "-p", str(PORT)]
        argv += ["--phase-timeout", str(self.phase_timeout)]
        self.coord = CracProc(
            self.hosts.argv(i, argv), out_dir=self.logs, label=label, env=self.env
        )
        self.coord_host = i
        deadline = time.monotonic() + WAIT_TIMEOUT
        while self.command(i, "-s").returncode != 0:
            if self.coord.poll() is not None or time.monotonic() > deadline:
                pytest.fail(f"the coordinator on host {i} does not answer\n{self.coord.report()}")
            time.sleep(0.1)

    def stop_coordinator(self) -> None:
        if self.coord is not None:
            self.coord.stop()

    def command(self, i: int, *args: str, timeout: float = RUN_TIMEOUT):
        """`crac command` run on host i, asking the job's coordinator."""
        argv = [*crac_cmd(), "command", "-h", self.hosts.addr(self.coord_host), "-p", str(PORT)]
        return subprocess.run(
            self.hosts.argv(i, [*argv, *args]),
            capture_output=True,
            text=True,
            env=self.env,
            timeout=timeout,
        )

    def num_peers(self, i: int) -> int:
        cp = self.command(i, "-s")
        for line in cp.stdout.splitlines():
            if line.startswith("NUM_PEERS="):
                return int(line.split("=", 1)[1])
        return -1

    def launch(self, i: int, tag: str, ckptdir: Path, args: list[str] | None = None) -> CracProc:
        argv = [*crac_cmd(), "launch", "--join-coordinator", "--coord-host"]
        argv += [self.hosts.addr(self.coord_host), "-p", str(PORT), "-c", str(ckptdir), "--"]
        argv += [str(self.app), tag, *(args if args is not None else [str(STEPS), "20"])]
        p = CracProc(
            self.hosts.argv(i, argv),
            out_dir=self.logs,
            label=f"launch-{tag}",
            env=self.env,
            cwd=self.cwd,
        )
        self.procs.append(p)
        return p

    def run_script(self, i: int, script: Path, label: str, *args: str) -> CracProc:
        # setsid (it execs: this process is no group leader): the script's own session
        argv = ["setsid", "/bin/sh", str(script), "--ckptdir", str(script.parent)]
        argv += ["-h", self.hosts.addr(self.coord_host), "-p", str(PORT), *args]
        p = CracProc(self.hosts.argv(i, argv), out_dir=self.logs, label=label, env=self.env)
        self.procs.append(p)
        self.scripts.append(p)
        return p

    def bcheckpoint(self, i: int) -> Path:
        cp = self.command(i, "-bc")
        assert cp.returncode == 0, f"{cp.stdout}\n{cp.stderr}\n{self.report()}"
        lines = cp.stdout.splitlines()
        assert lines[0].startswith("GENERATION="), cp.stdout
        return Path(lines[1].removeprefix("RESTART_SCRIPT="))

    def wait_peers(self, n: int) -> None:
        deadline = time.monotonic() + WAIT_TIMEOUT
        while self.num_peers(self.coord_host) != n:
            if time.monotonic() > deadline:
                pytest.fail(f"not {n} processes connected\n{self.report()}")
            time.sleep(0.1)

    def kill_all(self) -> None:
        """Every process and coordinator of the job SIGKILLed, as a lost allocation is: the
        launched processes, and everything in each restart script's session (setsid)."""
        for p in self.procs:
            if p.poll() is None:
                p.kill()
            if p in self.scripts:
                _kill_session(p.pid)
        for p in self.procs:
            p.stop()
        self.stop_coordinator()

    def report(self) -> str:
        parts = [p.report() for p in self.procs]
        if self.coord is not None:
            parts.append(self.coord.report())
        return "\n".join(parts)


def _kill_session(sid: int) -> None:
    """SIGKILL every process of session SID (a restart script started with setsid, and the
    processes it restarted, which outlive it)."""
    for entry in os.listdir("/proc"):
        if entry.isdigit() and int(entry) != os.getpid():
            try:
                if os.getsid(int(entry)) == sid:
                    os.kill(int(entry), 9)
            except (ProcessLookupError, PermissionError):
                pass


def output_of(procs: Mapping[str, CracProc]) -> dict[str, Output]:
    return {t: Output(p.out_path, p.label) for t, p in procs.items()}


def test_job_over_two_hosts_restarts_on_two_others_then_on_one(hosts4, apps, tmp_path):
    job = NetJob(hosts4, tmp_path)
    job.app = apps["coord_counter"]
    scratch = {i: tmp_path / f"scratch-h{i}" for i in (1, 2, 3, 4)}
    try:
        job.start_coordinator(1, "coord-a")
        launched = {
            t: job.launch(1 if n < 2 else 2, t, scratch[1 if n < 2 else 2])
            for n, t in enumerate(TAGS)
        }
        job.wait_peers(4)
        outs = output_of(launched)
        for t in TAGS:
            wait_steps(outs[t], [t], 30, launched[t], extra=job.report())
        before = {t: outs[t].last_step(t) for t in TAGS}
        script = job.bcheckpoint(2)  # asked from the other host
        after = {t: outs[t].last_step(t) for t in TAGS}
        text = script.read_text()
        assert job.token not in text and HOST_MARK in text, text
        gens = listed_generations(script)
        assert len(gens) == 4, text
        for t in TAGS:
            wait_steps(outs[t], [t], after[t] + 2, launched[t], extra=job.report())
        job.kill_all()
        chains = {t: [segments_of(outs[t], [t], before, after)[t]] for t in TAGS}

        # restart on hosts 3 and 4: each gets the images of the processes it restarts (task
        # i % 2 restarts the job's i-th process), as node-local scratch; hosts 1 and 2 are gone
        for n, gen in enumerate(gens):
            copy_process_dir(gen, scratch[3 + n % 2])
        scripts = {i: script_copy(script, scratch[i]) for i in (3, 4)}
        shutil.rmtree(scratch[1])
        shutil.rmtree(scratch[2])
        job.start_coordinator(3, "coord-b")
        runs = {
            i: job.run_script(i, scripts[i], f"restart1-h{i}", "--part", f"{i - 3}/2")
            for i in (3, 4)
        }
        job.wait_peers(4)
        run_out = {
            t: Output(runs[3 + n % 2].out_path, f"restart1/{t}")
            for n, t in enumerate(_tags_in_order(gens, tmp_path, launched))
        }
        first = {
            t: wait_steps(run_out[t], [t], 1, runs[3], runs[4], extra=job.report())[t] for t in TAGS
        }
        for t in TAGS:
            wait_steps(run_out[t], [t], first[t] + 30, runs[3], runs[4], extra=job.report())
        before2 = {t: run_out[t].last_step(t) for t in TAGS}
        script2 = job.bcheckpoint(4)
        after2 = {t: run_out[t].last_step(t) for t in TAGS}
        gens2 = listed_generations(script2)
        assert sorted(g.name for g in gens2) == ["gen-000002"] * 4, tree_of(tmp_path)
        for t in TAGS:
            wait_steps(run_out[t], [t], after2[t] + 2, runs[3], runs[4], extra=job.report())
        job.kill_all()
        for t in TAGS:
            chains[t].append(segments_of(run_out[t], [t], before2, after2)[t])

        # restart on one host: every image copied into one directory
        one = tmp_path / "scratch-one"
        for gen in gens2:
            copy_process_dir(gen, one)
        script3 = script_copy(script2, one)
        job.start_coordinator(1, "coord-c")
        final = job.run_script(1, script3, "restart2")
        assert final.wait(timeout=RUN_TIMEOUT) == 0, job.report()
        final_out = Output(final.out_path, "restart2")
        for t in TAGS:
            chains[t].append(segments_of(final_out, [t], None, None)[t])
        check_chain(chains, STEPS)
    except BaseException:
        print(job.report())
        raise
    finally:
        job.kill_all()


def _tags_in_order(gens: list[Path], tmp: Path, launched: Mapping[str, CracProc]) -> list[str]:
    """The tags of the job's processes in the restart script's order (by the pid in each
    process directory's name: ckpt_<prog>_<id>-<pid>)."""
    by_pid = {p.pid: t for t, p in launched.items()}
    return [by_pid[int(g.parent.name.rsplit("-", 1)[1])] for g in gens]


def test_lost_host_abandons_the_checkpoint_and_keeps_the_last(hosts2, apps, tmp_path):
    job = NetJob(hosts2, tmp_path, phase_timeout=5.0)
    job.app = apps["coord_counter"]
    scratch = {i: tmp_path / f"scratch-h{i}" for i in (1, 2)}
    tags = TAGS[:2]
    try:
        job.start_coordinator(1, "coord-a")
        launched = {t: job.launch(n + 1, t, scratch[n + 1]) for n, t in enumerate(tags)}
        job.wait_peers(2)
        outs = output_of(launched)
        for t in tags:
            wait_steps(outs[t], [t], 20, launched[t], extra=job.report())
        before = {t: outs[t].last_step(t) for t in tags}
        script = job.bcheckpoint(1)
        after = {t: outs[t].last_step(t) for t in tags}
        saved = script.read_bytes()
        hosts2.link(2, up=False)  # host 2 drops off the network
        cp = job.command(1, "-bc")
        assert cp.returncode != 0, cp.stdout
        said = cp.stdout + cp.stderr
        assert "abandoned" in said and "did not answer" in said, said
        assert script.read_bytes() == saved  # generation 1 stays the job's restart point
        hosts2.link(2, up=True)
        for t in tags:
            wait_steps(outs[t], [t], after[t] + 2, launched[t], extra=job.report())
        job.kill_all()
        chains = {t: [segments_of(outs[t], [t], before, after)[t]] for t in tags}
        job.start_coordinator(1, "coord-b")
        final = job.run_script(1, script, "restart")
        assert final.wait(timeout=RUN_TIMEOUT) == 0, job.report()
        for t in tags:
            chains[t].append(segments_of(Output(final.out_path, "restart"), [t], None, None)[t])
        check_chain(chains, STEPS)
    except BaseException:
        print(job.report())
        raise
    finally:
        job.kill_all()


def test_image_not_on_this_host_says_what_to_copy(tmp_path):
    require_native()
    job_dir = tmp_path / "scratch"
    job_dir.mkdir()
    gen = "/elsewhere/ckpt_app_00-4242/gen-000003"
    (job_dir / "crac_restart_script.sh").write_text(
        f'# crac-job-process: "{gen}"\n'
        + HOST_MARK
        + f'{{"process": "{gen}", "host": "node7", "addr": "10.1.2.7"}}\n'
    )
    cp = subprocess.run(
        [*crac_cmd(), "restart", "--search-dir", str(job_dir), gen],
        capture_output=True,
        text=True,
        env=base_env(),
        timeout=RUN_TIMEOUT,
    )
    assert cp.returncode != 0
    assert "Traceback" not in cp.stderr
    assert "node7 (10.1.2.7)" in cp.stderr and "ckpt_app_00-4242/" in cp.stderr, cp.stderr


MULTINODE = Path(__file__).resolve().parent.parent / "examples" / "slurm" / "multinode.sbatch"
# srun played on namespaces: task k runs on node k // per_node of FAKE_NODES, with Slurm's task
# variables, and srun waits for every task (exit: the first non-zero status).
FAKE_SRUN = """#!/bin/sh
set -- "$@"
n=0; pids=
for node in $FAKE_NODES; do
  for _ in $(seq 1 "$FAKE_PER_NODE"); do
    ip netns exec "$node" env SLURM_PROCID=$n SLURM_NTASKS=$FAKE_NTASKS SLURM_STEP_ID=0 \\
      "$@" &
    pids="$pids $!"; n=$((n + 1))
  done
done
rc=0
for p in $pids; do wait "$p"; s=$?; [ "$rc" -eq 0 ] && rc=$s; done
exit "$rc"
"""


def test_multinode_batch_script_requeued_onto_other_nodes(hosts4, apps, tmp_path):
    """examples/slurm/multinode.sbatch without Slurm: the batch shell runs on the first node of
    its allocation, srun starts 2 tasks on each of 2 nodes; USR2 to the batch shell checkpoints
    the job and requeues it; everything is killed; the requeued run gets two other nodes and
    restarts every process there."""
    bindir = tmp_path / "bin"
    bindir.mkdir()
    (bindir / "crac").write_text(
        "#!/bin/sh\nexec " + " ".join(f"'{a}'" for a in crac_cmd()) + ' "$@"\n'
    )
    (bindir / "scontrol").write_text('#!/bin/sh\necho "$@" >> "$SCONTROL_LOG"\n')
    (bindir / "srun").write_text(FAKE_SRUN)
    for f in bindir.iterdir():
        f.chmod(0o755)
    tags = ["1", "2", "3", "4"]
    log = tmp_path / "scontrol.log"

    def run(label: str, restart_count: int, nodes: tuple[int, int]) -> CracProc:
        env = base_env(
            {
                "PATH": f"{bindir}:{os.environ['PATH']}",
                "SLURM_JOB_ID": "77",
                "SLURM_SUBMIT_DIR": str(tmp_path),
                "SLURM_RESTART_COUNT": str(restart_count),
                "APP": str(apps["coord_counter"]),
                "APP_ARGS": f"{STEPS} 20",
                "COORD_HOST": hosts4.addr(nodes[0]),
                "FAKE_NODES": " ".join(hosts4.names[i - 1] for i in nodes),
                "FAKE_PER_NODE": "2",
                "FAKE_NTASKS": "4",
                "SCONTROL_LOG": str(log),
            }
        )
        argv = hosts4.argv(nodes[0], ["setsid", "bash", str(MULTINODE)])
        return CracProc(argv, out_dir=tmp_path / "logs", label=label, env=env, cwd=tmp_path)

    batch1 = run("run1", 0, (1, 2))
    out1 = Output(batch1.out_path, "run1")
    batch2 = None
    try:
        wait_steps(out1, tags, 30, batch1, extra=batch1.report())
        before = {t: out1.last_step(t) for t in tags}
        os.kill(batch1.pid, 12)  # SIGUSR2, as --signal=B:USR2@120 sends it
        deadline = time.monotonic() + RUN_TIMEOUT
        while not log.exists():
            if time.monotonic() > deadline or batch1.poll() is not None:
                pytest.fail(f"no requeue\n{batch1.report()}")
            time.sleep(0.1)
        after = {t: out1.last_step(t) for t in tags}
        assert log.read_text() == "requeue 77\n"
        assert (
            "CRAC_COORD_TOKEN" not in (tmp_path / "ckpt-77" / "crac_restart_script.sh").read_text()
        )
        wait_past(out1, tags, after, 2, batch1, extra=batch1.report())
        _kill_session(batch1.pid)  # Slurm ends the job for the requeue: everything goes
        batch1.stop()
        chains = {t: [s] for t, s in segments_of(out1, tags, before, after).items()}

        batch2 = run("run2", 1, (3, 4))
        status = batch2.wait(timeout=RUN_TIMEOUT)
        assert status == 0, batch2.report()
        assert "run 2 of job 77" in batch2.stdout_text()
        for t, seg in segments_of(Output(batch2.out_path, "run2"), tags, None, None).items():
            chains[t].append(seg)
        check_chain(chains, STEPS)
    finally:
        for b in (batch1, batch2):
            if b is not None:
                _kill_session(b.pid)
                b.stop()


def test_tcp_connection_between_hosts_with_bytes_in_flight(hosts4, apps, tmp_path):
    """Four processes of one job on two hosts, two servers and their clients, each pair across
    the hosts, exchanging checked blocks with about 8 KiB unread at each end at any time;
    checkpointed, killed, restarted over two other hosts, then over one: each connection is made
    again between wherever its ends are, every byte in order."""
    job = NetJob(hosts4, tmp_path)
    job.app = apps["xhost_tcp"]
    tags = ["srv1", "cli1", "srv2", "cli2"]
    scratch = tmp_path / "shared-ckpt"  # one directory every host sees
    try:
        job.start_coordinator(1, "coord-a")
        launched = {}
        for n, (server_host, client_host) in enumerate(((1, 2), (2, 1)), 1):
            port = str(7000 + n)
            launched[f"srv{n}"] = job.launch(
                server_host, f"srv{n}", scratch, ["server", port, str(STEPS), "20"]
            )
            launched[f"cli{n}"] = job.launch(
                client_host,
                f"cli{n}",
                scratch,
                ["client", hosts4.addr(server_host), port, str(STEPS), "20"],
            )
        job.wait_peers(4)
        outs = output_of(launched)
        for t in tags:
            wait_steps(outs[t], [t], 30, launched[t], extra=job.report())
        before = {t: outs[t].last_step(t) for t in tags}
        script = job.bcheckpoint(1)
        after = {t: outs[t].last_step(t) for t in tags}
        gens = listed_generations(script)
        for t in tags:
            wait_steps(outs[t], [t], after[t] + 2, launched[t], extra=job.report())
        job.kill_all()
        chains = {t: [segments_of(outs[t], [t], before, after)[t]] for t in tags}
        order = _tags_in_order(gens, tmp_path, launched)

        # process i of the script on host 3 + i % 2
        job.start_coordinator(3, "coord-b")
        runs = {
            i: job.run_script(i, script, f"restart1-h{i}", "--part", f"{i - 3}/2") for i in (3, 4)
        }
        job.wait_peers(4)
        run_out = {
            t: Output(runs[3 + n % 2].out_path, f"restart1/{t}") for n, t in enumerate(order)
        }
        first = {
            t: wait_steps(run_out[t], [t], 1, runs[3], runs[4], extra=job.report())[t] for t in tags
        }
        for t in tags:
            wait_steps(run_out[t], [t], first[t] + 30, runs[3], runs[4], extra=job.report())
        before2 = {t: run_out[t].last_step(t) for t in tags}
        script2 = job.bcheckpoint(3)
        after2 = {t: run_out[t].last_step(t) for t in tags}
        for t in tags:
            wait_steps(run_out[t], [t], after2[t] + 2, runs[3], runs[4], extra=job.report())
        job.kill_all()
        for t in tags:
            chains[t].append(segments_of(run_out[t], [t], before2, after2)[t])

        # both on host 2
        job.start_coordinator(2, "coord-c")
        final = job.run_script(2, script2, "restart2")
        assert final.wait(timeout=RUN_TIMEOUT) == 0, job.report()
        final_out = Output(final.out_path, "restart2")
        for t in tags:
            chains[t].append(segments_of(final_out, [t], None, None)[t])
        check_chain(chains, STEPS)
        errs = "".join(p.stderr_text() for p in job.scripts)
        assert "dropped connection" not in errs, errs
    except BaseException:
        print(job.report())
        raise
    finally:
        job.kill_all()
