"""crac_restart_script.sh for a job (docs/PROTOCOL.md, "Restart script"), written by the
coordinator after each complete job checkpoint.

The script is POSIX sh and works from a fresh shell: it runs the same crac that wrote it, starts
a coordinator when none answers on the host and port it is given (flag > CRAC_* > DMTCP_* > the
coordinator's at checkpoint time), announces how many processes will join, then runs one
`crac restart --join-coordinator` per process in the background, waits for each (but a daemon, a
process that outlived its parent in the job) and exits with the first non-zero status.
Generation directories inside the job directory are written relative to it, so `--ckptdir DIR`
restarts from a copy of the directory.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import secrets
import shlex
import stat
import time
from dataclasses import dataclass
from pathlib import Path

SCRIPT_NAME = "crac_restart_script.sh"
PROCESS_MARK = "# crac-job-process: "
HOST_MARK = "# crac-job-host: "


@dataclass(frozen=True)
class Placement:
    """Where a process ran at checkpoint time: its host name and the address its connection to
    the coordinator came from (docs/HOSTS.md)."""

    host: str
    addr: str = ""

    def describe(self) -> str:
        return f"{self.host} ({self.addr})" if self.addr and self.addr != self.host else self.host


@dataclass(frozen=True)
class ScriptJob:
    job_dir: Path  # where the script goes: the parent of the first process directory
    gen_dirs: list[Path]  # each process's published generation, in join order
    generation: int  # job checkpoints done by the coordinator
    port: int
    interval: int
    crac_cmd: str  # shell words that run crac
    hosts: list[Placement] | None = None  # per gen_dirs entry, where it ran


def _gen_word(job_dir: Path, gen: Path) -> str:
    """`"$dir"/rel` for a generation inside the job directory, else its absolute path."""
    try:
        rel = gen.relative_to(job_dir)
    except ValueError:
        return shlex.quote(str(gen))
    return f'"$dir"/{shlex.quote(str(rel))}'


def _marker(job_dir: Path, gen: Path) -> str:
    """The generation as a JSON string (one line, whatever bytes the path holds)."""
    try:
        path = str(gen.relative_to(job_dir))
    except ValueError:
        path = str(gen)
    return json.dumps(path)


def render(job: ScriptJob) -> str:
    stamp = time.strftime("%Y-%m-%d %H:%M:%S")
    n = len(job.gen_dirs)
    lines = [
        "#!/bin/sh",
        f"# {SCRIPT_NAME}: written by the crac coordinator after job checkpoint "
        f"{job.generation} ({stamp});",
        f"# restarts the job's {n} process(es) from the generations listed below.",
        "#",
        "# Usage: crac_restart_script.sh [-h|--coord-host H] [-p|--coord-port P]",
        "#            [-i|--interval S] [--ckptdir DIR] [--part K/M|auto]",
        "#            [crac restart options...]",
        "# Host, port and interval: the flags, else CRAC_COORD_HOST/PORT and",
        "# CRAC_CHECKPOINT_INTERVAL, else their DMTCP_* twins, else the values at checkpoint",
        "# time. A coordinator is started on that port when none answers there. --ckptdir DIR",
        "# restarts from a copy of this directory; an image not at its path is looked for there.",
        "# --part K/M restarts only task K's share of M tasks (auto: srun's or mpirun's task",
        "# number); the coordinator must already run. Other options go to each `crac restart`.",
        "#",
        *(PROCESS_MARK + _marker(job.job_dir, g) for g in job.gen_dirs),
        *_host_lines(job),
        "",
        f'crac_cmd() {{ {job.crac_cmd} "$@"; }}',
        "host=${CRAC_COORD_HOST:-${DMTCP_COORD_HOST:-${DMTCP_HOST:-localhost}}}",
        f"port=${{CRAC_COORD_PORT:-${{DMTCP_COORD_PORT:-${{DMTCP_PORT:-{job.port}}}}}}}",
        f"interval=${{CRAC_CHECKPOINT_INTERVAL:-${{DMTCP_CHECKPOINT_INTERVAL:-{job.interval}}}}}",
        f"dir={shlex.quote(str(job.job_dir))}",
        "started=",
        "part=",
        "while [ $# -gt 0 ]; do",
        '  case "$1" in',
        "    -h|--coord-host|--host) host=$2; shift 2 ;;",
        "    --coord-host=*|--host=*) host=${1#*=}; shift ;;",
        "    -p|--coord-port|--port) port=$2; shift 2 ;;",
        "    --coord-port=*|--port=*) port=${1#*=}; shift ;;",
        "    -i|--interval) interval=$2; shift 2 ;;",
        "    --interval=*) interval=${1#*=}; shift ;;",
        "    --ckptdir|--restartdir|-d) dir=$2; shift 2 ;;",
        "    --ckptdir=*|--restartdir=*) dir=${1#*=}; shift ;;",
        "    --part) part=$2; shift 2 ;;",
        "    --part=*) part=${1#*=}; shift ;;",
        "    --help) sed -n '2,14p' \"$0\"; exit 0 ;;",
        "    --) shift; break ;;",
        "    *) break ;;",
        "  esac",
        "done",
        *_PART_LINES,
        'if [ -n "$part" ]; then',
        '  crac_cmd command --exact -h "$host" -p "$port" status >/dev/null 2>&1 || {',
        '    echo "crac_restart_script.sh: no coordinator answers on $host:$port; with --part," \\',
        '      "start it first (crac coordinator --daemon ...)" >&2; exit 2; }',
        'elif [ "$port" = 0 ] ||',
        '   ! crac_cmd command --exact -h "$host" -p "$port" status >/dev/null 2>&1; then',
        "  portfile=$(mktemp) && errfile=$(mktemp) || exit 2",
        # The job's own coordinator may still be ending (the job was just killed): its port
        # comes free within moments, so a port in use is tried again for a while.
        "  tries=0",
        '  until crac_cmd coordinator --daemon --exit-on-last --stale-timeout 600 -q -p "$port" \\',
        '      -i "$interval" --port-file "$portfile" 2>"$errfile"; do',
        "    tries=$((tries + 1))",
        '    if [ "$tries" -ge 20 ] || ! grep -q "already in use" "$errfile"; then',
        '      cat "$errfile" >&2; rm -f "$portfile" "$errfile"; exit 2',
        "    fi",
        "    sleep 0.5",
        "  done",
        '  port=$(cat "$portfile"); rm -f "$portfile" "$errfile"; started=1',
        "fi",
        f'crac_cmd command --exact -h "$host" -p "$port" expect {n} >/dev/null 2>&1',
    ]
    if mpi_ranks(job.gen_dirs):
        return "\n".join(lines + _mpi_lines(job, n)) + "\n"
    # A process tree is restarted by its root, which forks its descendants (launch/tree.py).
    # Imported here: the coordinator starts without the image readers until it writes a script.
    from crac_py.launch.tree import roots_and_members

    roots = roots_and_members(job.gen_dirs)
    # A root a fork made (its parent in the job ended: a daemon) runs on unwaited-for, as after
    # its launch, unless every root is one.
    detached = [forked for _, _, forked in roots]
    if all(detached):
        detached = [False] * len(roots)
    lines.append("pids=")
    for i, (gen, members, _) in enumerate(roots):
        tree_words = "".join(f" --tree-member {_gen_word(job.job_dir, m)}" for m in members)
        waited = "" if detached[i] else ' pids="$pids $!";'
        lines.append(
            f'if mine {i}; then crac_cmd restart --join-coordinator --coord-host "$host" '
            f'--coord-port "$port" --search-dir "$dir" "$@"{tree_words} -- '
            f"{_gen_word(job.job_dir, gen)} &{waited} fi"
        )
    lines.append("rc=0")
    lines.append('for p in $pids; do wait "$p"; s=$?; [ "$rc" -eq 0 ] && rc=$s; done')
    # A coordinator started here that no process joined (every restart failed) goes too.
    lines.append('if [ -n "$started" ] &&')
    lines.append('   crac_cmd command --exact -h "$host" -p "$port" status 2>/dev/null |')
    lines.append('   grep -q "^NUM_PEERS=0$"')
    lines.append('then crac_cmd command --exact -h "$host" -p "$port" quit >/dev/null 2>&1; fi')
    lines.append('exit "$rc"')
    return "\n".join(lines) + "\n"


# --part K/M: this task restarts the roots whose index i has i % M == K (docs/HOSTS.md).
_PART_LINES = [
    "task=0; ntasks=1",
    'case "$part" in',
    "  '') ;;",
    "  auto) task=${SLURM_PROCID:-${OMPI_COMM_WORLD_RANK:-${PMI_RANK:-}}}",
    "        ntasks=${SLURM_NTASKS:-${OMPI_COMM_WORLD_SIZE:-${PMI_SIZE:-}}} ;;",
    "  */*) task=${part%%/*}; ntasks=${part#*/} ;;",
    "  *) task=x ;;",
    "esac",
    'case "$task/$ntasks" in',
    "  */|/*|*[!0-9/]*|*/*/*)",
    '    echo "crac_restart_script.sh: --part wants K/M with 0 <= K < M, or auto under srun" \\',
    '      "or mpirun (got ${part})" >&2; exit 2 ;;',
    "esac",
    'if [ "$ntasks" -lt 1 ] || [ "$task" -ge "$ntasks" ]; then',
    '  echo "crac_restart_script.sh: --part $task/$ntasks: K must be below M" >&2; exit 2',
    "fi",
    'mine() { [ $(($1 % ntasks)) -eq "$task" ]; }',
]


def _host_lines(job: ScriptJob) -> list[str]:
    """Where each process ran (`# crac-job-host: {...}`), in gen_dirs order: what a restart on
    other hosts must copy where (docs/HOSTS.md)."""
    if not job.hosts:
        return []
    lines = []
    for g, h in zip(job.gen_dirs, job.hosts, strict=False):
        rec = {"process": json.loads(_marker(job.job_dir, g)), "host": h.host, "addr": h.addr}
        lines.append(HOST_MARK + json.dumps(rec))
    return lines


def mpi_ranks(gen_dirs: list[Path]) -> bool:
    """Every process is a rank of one MPI job (its process directory has the shim's mpi_rank)."""
    return bool(gen_dirs) and all((g.parent / "mpi_rank").is_file() for g in gen_dirs)


def _mpi_lines(job: ScriptJob, n: int) -> list[str]:
    """An MPI job restarts the way it was started: one launcher for every rank, each rank
    finding its own image by its rank (docs/MPI.md). CRAC_MPIRUN names the launcher (default
    mpirun), CRAC_MPIRUN_ARGS adds its options."""
    return [
        "# An MPI job: the ranks are started by the MPI launcher, each finds its own image.",
        f"${{CRAC_MPIRUN:-mpirun}} -np {n} ${{CRAC_MPIRUN_ARGS:-}} {job.crac_cmd} restart \\",
        '  --join-coordinator --coord-host "$host" --coord-port "$port" "$@" "$dir"',
        "rc=$?",
        'if [ -n "$started" ]; then',
        '  crac_cmd command --exact -h "$host" -p "$port" quit >/dev/null 2>&1',
        "fi",
        'exit "$rc"',
    ]


def write_private(directory: Path, name: str, data: bytes, mode: int = 0o600) -> Path:
    """Writes DIRECTORY/NAME atomically and without ever following a planted link: DIRECTORY
    must be the user's own, the data goes to a fresh random name created with
    O_EXCL|O_NOFOLLOW, which is fsynced and renamed over NAME (rename replaces a link found at
    NAME, never writes through it). OSError otherwise."""
    dfd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        if os.fstat(dfd).st_uid != os.geteuid():
            raise PermissionError(errno.EPERM, f"{directory} belongs to another user")
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
        while True:
            tmp = f".{name}.tmp-{secrets.token_hex(8)}"
            try:
                fd = os.open(tmp, flags, mode, dir_fd=dfd)
                break
            except FileExistsError:
                continue
        try:
            try:
                os.write(fd, data)
                os.fchmod(fd, mode)
                os.fsync(fd)
            finally:
                os.close(fd)
            os.rename(tmp, name, src_dir_fd=dfd, dst_dir_fd=dfd)
        except OSError:
            with contextlib.suppress(OSError):
                os.unlink(tmp, dir_fd=dfd)
            raise
    finally:
        os.close(dfd)
    return directory / name


def script_dir_problem(job_dir: Path, gen_dirs: list[Path]) -> str | None:
    """Why the coordinator must not write a job's script into JOB_DIR, or None. The directory
    comes from a worker's hello (any token holder's): it must be the checkpoint directory the
    first process really published into (its generation directory is JOB_DIR/<process>/gen-N,
    a real directory), a real directory (not a link) of the coordinator's user, writable by
    nobody else (docs/TRUST.md, "Concurrent use, scripts, coordinator")."""
    first = gen_dirs[0] if gen_dirs else None
    if first is None or first.parent.parent != job_dir:
        return f"{job_dir} is not the checkpoint directory of the job's first process"
    try:
        st = os.lstat(job_dir)
        gen_st = os.lstat(first)
    except OSError as exc:
        return f"{job_dir}: {exc.strerror}"
    if not stat.S_ISDIR(st.st_mode):
        return f"{job_dir} is not a directory"
    if not stat.S_ISDIR(gen_st.st_mode):
        return f"{first} is not a directory"
    if st.st_uid != os.geteuid():
        return f"{job_dir} belongs to another user (uid {st.st_uid})"
    if st.st_mode & 0o022:
        return f"{job_dir} is writable by group or others (mode {stat.S_IMODE(st.st_mode):o})"
    return None


def write(job: ScriptJob) -> Path:
    """Writes the script (0700) into the job directory (write_private)."""
    # Paths are bytes: those that are not UTF-8 come back as they were (surrogateescape).
    return write_private(
        job.job_dir, SCRIPT_NAME, render(job).encode(errors="surrogateescape"), 0o700
    )


def listed_generations(script: Path, job_dir: Path | None = None) -> list[Path]:
    """The generation directories a job's restart script names (its `# crac-job-process:`
    lines), relative ones resolved against JOB_DIR (default: the script's directory)."""
    base = job_dir if job_dir is not None else script.parent
    out = []
    for line in script.read_bytes().decode(errors="surrogateescape").splitlines():
        if line.startswith(PROCESS_MARK):
            word = line[len(PROCESS_MARK) :]
            try:
                rel = Path(json.loads(word) if word.startswith('"') else word)
            except (json.JSONDecodeError, TypeError):
                continue
            out.append(rel if rel.is_absolute() else base / rel)
    return out
