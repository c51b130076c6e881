"""The `crac` CLI's own behaviour: preflight refusals, argument passing, --version/--help, doctor.

Nothing here runs a program under the real loader; argument passing is checked with a stand-in
loader (a shell script) selected through CRAC_NATIVE_DIR.
"""

from __future__ import annotations

import json
import os
import shutil
import struct
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from crac_py import __version__, config
from crac_py.launch.preflight import PreflightError, preflight

REPO = Path(__file__).resolve().parent.parent
HAVE_GCC = shutil.which("gcc") is not None
needs_gcc = pytest.mark.skipif(not HAVE_GCC, reason="gcc not installed")


def run_crac(*args: str, env: dict[str, str] | None = None, cwd: Path | None = None):
    full_env = dict(os.environ if env is None else env)
    full_env["PYTHONPATH"] = os.pathsep.join(
        p for p in (str(REPO), full_env.get("PYTHONPATH", "")) if p
    )
    return subprocess.run(
        [sys.executable, "-m", "crac_py", *args],
        capture_output=True,
        text=True,
        env=full_env,
        cwd=cwd,
        timeout=60,
    )


def assert_refused(proc: subprocess.CompletedProcess[str], *fragments: str) -> str:
    """Exit 2, exactly one `crac: error:` line on stderr, no traceback; return the message."""
    assert proc.returncode == 2, (proc.returncode, proc.stdout, proc.stderr)
    assert "Traceback" not in proc.stderr + proc.stdout
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith("crac: error: "), proc.stderr
    for fragment in fragments:
        assert fragment in lines[0], (fragment, lines[0])
    return lines[0]


def compile_c(tmp_path: Path, name: str, source: str, *flags: str) -> Path:
    src = tmp_path / f"{name}.c"
    src.write_text(source)
    out = tmp_path / name
    proc = subprocess.run(
        ["gcc", str(src), "-o", str(out), *flags], capture_output=True, text=True, cwd=tmp_path
    )
    if proc.returncode != 0:
        raise RuntimeError(proc.stderr)
    return out


HELLO = '#include <stdio.h>\nint main(void) { puts("hello"); return 0; }\n'


def elf_header(ei_class: int, machine: int) -> bytes:
    """A bare ELF header (no program or section headers) for an ET_EXEC file."""
    ident = b"\x7fELF" + bytes([ei_class, 1, 1]) + bytes(9)
    if ei_class == 1:
        return ident + struct.pack(
            "<HHIIIIIHHHHHH", 2, machine, 1, 0x8048000, 0, 0, 0, 52, 32, 0, 40, 0, 0
        )
    return ident + struct.pack(
        "<HHIQQQIHHHHHH", 2, machine, 1, 0x401000, 0, 0, 0, 64, 56, 0, 64, 0, 0
    )


def executable(path: Path, content: bytes | str) -> Path:
    if isinstance(content, str):
        path.write_text(content)
    else:
        path.write_bytes(content)
    path.chmod(0o755)
    return path


# --- preflight refusals -------------------------------------------------------------------------


def test_nonexistent_path(tmp_path: Path) -> None:
    assert_refused(run_crac("launch", str(tmp_path / "nope")), "no such file")


def test_nonexistent_in_path() -> None:
    assert_refused(run_crac("launch", "crac-no-such-program-xyz"), "not found in PATH")


def test_directory(tmp_path: Path) -> None:
    assert_refused(run_crac("launch", str(tmp_path)), "is a directory")


def test_not_executable(tmp_path: Path) -> None:
    prog = tmp_path / "prog"
    prog.write_text("data")
    prog.chmod(0o644)
    assert_refused(run_crac("launch", str(prog)), "not executable", "chmod +x")


def test_text_file(tmp_path: Path) -> None:
    prog = executable(tmp_path / "notes.txt", "just some text\n")
    assert_refused(run_crac("launch", str(prog)), "not an ELF")


def test_script_whose_interpreter_is_missing(tmp_path: Path) -> None:
    script = executable(tmp_path / "tool", "#!/no/such/interp -x\nprint(1)\n")
    assert_refused(run_crac("launch", str(script)), "/no/such/interp", "fix the #! line")


def test_script_whose_interpreter_is_not_a_program(tmp_path: Path) -> None:
    script = executable(tmp_path / "tool", f"#!{tmp_path}\n")
    assert_refused(run_crac("launch", str(script)), "its interpreter", "is a directory")


def test_scripts_naming_each_other_too_deep(tmp_path: Path) -> None:
    executable(tmp_path / "s0", f"#!{tmp_path / 's1'}\n")
    for i in range(1, 6):
        executable(tmp_path / f"s{i}", f"#!{tmp_path / f's{i + 1}'}\n")
    assert_refused(run_crac("launch", str(tmp_path / "s0")), "more than 4 deep")


def test_32bit_elf(tmp_path: Path) -> None:
    prog = executable(tmp_path / "prog32", elf_header(1, 3))  # ELFCLASS32, EM_386
    assert_refused(run_crac("launch", str(prog)), "32-bit", "x86-64")


def test_foreign_architecture(tmp_path: Path) -> None:
    prog = executable(tmp_path / "progarm", elf_header(2, 183))  # ELFCLASS64, EM_AARCH64
    assert_refused(run_crac("launch", str(prog)), "not x86-64")


def test_truncated_elf(tmp_path: Path) -> None:
    prog = executable(tmp_path / "trunc", b"\x7fELF\x02")
    assert_refused(run_crac("launch", str(prog)), "ELF")


@needs_gcc
def test_static_program(tmp_path: Path) -> None:
    try:
        prog = compile_c(tmp_path, "hello_static", HELLO, "-static")
    except RuntimeError as exc:
        pytest.skip(f"cannot link statically (static libc missing?): {exc}")
    assert_refused(run_crac("launch", str(prog)), "statically linked", "link it dynamically")


@needs_gcc
def test_static_cuda_runtime(tmp_path: Path) -> None:
    source = (
        "int cudaGetDeviceCount(int *n) { *n = 1; return 0; }\n"
        "int main(void) { int n; return cudaGetDeviceCount(&n) + n - 1; }\n"
    )
    prog = compile_c(tmp_path, "cudart_static_app", source)
    assert_refused(run_crac("launch", str(prog)), "nvcc -cudart shared")


@needs_gcc
def test_unsupported_cuda_imports(tmp_path: Path) -> None:
    names = [f"cudaCracTestUnsupported{i}" for i in range(7)]
    lib_src = tmp_path / "stub.c"
    lib_src.write_text("".join(f"int {n}(void) {{ return 0; }}\n" for n in names))
    subprocess.run(
        ["gcc", "-shared", "-fPIC", str(lib_src), "-o", str(tmp_path / "libcudastub.so")],
        check=True,
    )
    decls = "".join(f"int {n}(void);\n" for n in names)
    body = " + ".join(f"{n}()" for n in names)
    prog = compile_c(
        tmp_path,
        "cuda_app",
        f"{decls}int main(void) {{ return {body}; }}\n",
        f"-L{tmp_path}",
        "-lcudastub",
        f"-Wl,-rpath,{tmp_path}",
    )
    msg = assert_refused(run_crac("launch", str(prog)), "does not support", "(and 2 more)")
    assert sum(n in msg for n in names) == 5


@needs_gcc
def test_preflight_info(tmp_path: Path) -> None:
    prog = compile_c(tmp_path, "hello", HELLO)
    info = preflight(str(prog))
    assert info.path == str(prog)
    assert info.interp.startswith("/") and "ld-linux" in info.interp
    assert "libc.so.6" in info.needed
    assert info.cuda_imports == []


def test_preflight_resolves_like_a_shell(tmp_path: Path) -> None:
    bindir = tmp_path / "bin"
    bindir.mkdir()
    (bindir / "tool").write_text("data")  # not executable: the shell would say so too
    with pytest.raises(PreflightError, match="not executable"):
        preflight("tool", path_env=str(bindir))
    with pytest.raises(PreflightError, match="not found in PATH"):
        preflight("other", path_env=str(bindir))


# --- argument passing and device selection (stand-in loader) -----------------------------------


@pytest.fixture
def fake_native(tmp_path: Path) -> dict[str, str]:
    """A stand-in crac-loader that prints its pid and the command line the real loader rebuilds
    (its options from the descriptor CRAC_LOADER_OPTIONS_FD, then argv[1..]), one per line, and
    exits 7."""
    native = tmp_path / "native"
    native.mkdir()
    executable(
        native / "crac-loader",
        '#!/bin/sh\necho "pid=$$"\n'
        "eval \"tr '\\\\0' '\\\\n' <&$CRAC_LOADER_OPTIONS_FD\"\n"
        'for a in "$@"; do printf "%s\\n" "$a"; done\nexit 7\n',
    )
    env = dict(os.environ)
    env["CRAC_NATIVE_DIR"] = str(native)
    env.pop("CRAC_DEVICE", None)
    return env


def loader_argv(proc: subprocess.CompletedProcess[str]) -> list[str]:
    return proc.stdout.splitlines()[1:]


def split_loader_argv(proc: subprocess.CompletedProcess[str]) -> tuple[list[str], list[str]]:
    """(crac's options to the loader, the program's argv after the first '--')."""
    argv = loader_argv(proc)
    cut = argv.index("--")
    return argv[:cut], argv[cut + 1 :]


def assert_launched(
    proc: subprocess.CompletedProcess[str], device: str, argv0: str, program: list[str]
) -> None:
    options, rest = split_loader_argv(proc)
    assert options[:4] == ["--device", device, "--argv0", argv0]
    assert rest == program


def test_launch_passes_options_to_program(fake_native: dict[str, str]) -> None:
    ls = shutil.which("ls")
    assert ls is not None
    proc = run_crac("launch", "--device", "sim", "ls", "-la", "/", env=fake_native)
    assert proc.returncode == 7, proc.stderr  # the exec'd program's status
    assert_launched(proc, "sim", "ls", [ls, "-la", "/"])


def test_launch_runs_a_script_as_exec_does(tmp_path: Path, fake_native: dict[str, str]) -> None:
    """A "#!" script runs as the kernel's exec runs it: its interpreter as argv[0], the line's one
    optional argument, the script's path (the one PATH gave), then the script's arguments; an
    interpreter that is a script itself goes first in turn."""
    script = executable(tmp_path / "job.sh", "#!/bin/sh -e\necho hi\n")
    proc = run_crac("launch", "--device", "sim", str(script), "a b", env=fake_native)
    assert proc.returncode == 7, proc.stderr
    assert_launched(proc, "sim", "/bin/sh", ["/bin/sh", "-e", str(script), "a b"])
    env = dict(fake_native, PATH=f"{tmp_path}{os.pathsep}{fake_native.get('PATH', '')}")
    proc = run_crac("launch", "--device", "sim", "job.sh", env=env)
    assert_launched(proc, "sim", "/bin/sh", ["/bin/sh", "-e", str(script)])
    wrapper = executable(tmp_path / "wrapper", f"#!{script} via\n")
    proc = run_crac("launch", "--device", "sim", str(wrapper), "x", env=fake_native)
    assert_launched(
        proc, "sim", "/bin/sh", ["/bin/sh", "-e", str(script), "via", str(wrapper), "x"]
    )


def test_launch_double_dash_and_help_go_to_program(fake_native: dict[str, str]) -> None:
    ls = shutil.which("ls")
    proc = run_crac("launch", "--device", "sim", "--", "ls", "--help", env=fake_native)
    assert_launched(proc, "sim", "ls", [ls, "--help"])
    proc = run_crac("launch", "--device=sim", "ls", "--", "--device", "cuda", env=fake_native)
    assert_launched(proc, "sim", "ls", [ls, "--", "--device", "cuda"])


def test_launch_execs_in_place(fake_native: dict[str, str]) -> None:
    """No Python stays: the loader runs with the pid that `python -m crac_py` had."""
    full_env = dict(fake_native)
    full_env["PYTHONPATH"] = str(REPO)
    proc = subprocess.Popen(
        [sys.executable, "-m", "crac_py", "launch", "--device", "sim", "true"],
        stdout=subprocess.PIPE,
        text=True,
        env=full_env,
    )
    out, _ = proc.communicate(timeout=60)
    assert proc.returncode == 7
    assert out.splitlines()[0] == f"pid={proc.pid}"


def test_launch_passes_environment_unchanged(tmp_path: Path) -> None:
    """Python's C-locale coercion (LC_CTYPE=C.UTF-8) must not leak into the program's env."""
    native = tmp_path / "native"
    native.mkdir()
    executable(native / "crac-loader", "#!/bin/sh\ncat /proc/$$/environ\n")
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "LANG": "C",
        "CRAC_NATIVE_DIR": str(native),
        "PYTHONPATH": str(REPO),
        "ODD": "a b=c",
    }
    proc = subprocess.run(
        [sys.executable, "-m", "crac_py", "launch", "--device", "sim", "true"],
        capture_output=True,
        env=env,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    # The loader's options descriptor is named in its own environment; the loader removes it
    # before the program starts (tests/test_launch.py checks what the program sees).
    seen = [
        e for e in proc.stdout.split(b"\0") if e and not e.startswith(b"CRAC_LOADER_OPTIONS_FD=")
    ]
    assert seen == [f"{k}={v}".encode() for k, v in env.items()]


def test_device_from_environment(fake_native: dict[str, str]) -> None:
    env = dict(fake_native, CRAC_DEVICE="sim")
    proc = run_crac("launch", "true", env=env)
    assert loader_argv(proc)[:2] == ["--device", "sim"]


def test_bad_device_value(fake_native: dict[str, str]) -> None:
    env = dict(fake_native, CRAC_DEVICE="gpu9000")
    assert_refused(run_crac("launch", "true", env=env), "CRAC_DEVICE")


def test_device_cuda_loads_nvidias_runtime(fake_native: dict[str, str]) -> None:
    """--device cuda is honoured with or without a GPU (without one, NVIDIA's runtime answers the
    program as it does natively): the loader gets the runtime's path."""
    proc = run_crac("launch", "--device", "cuda", "true", env=fake_native)
    options, _ = split_loader_argv(proc)
    assert options[:2] == ["--device", "cuda"], proc.stdout
    runtime = options[options.index("--cuda-runtime") + 1]
    assert Path(runtime).name == "libcudart.so.13" and Path(runtime).is_file(), runtime


def test_missing_native_parts(tmp_path: Path) -> None:
    env = dict(os.environ, CRAC_NATIVE_DIR=str(tmp_path / "empty"))
    assert_refused(run_crac("launch", "--device", "sim", "true", env=env), "pip install .")


def test_option_precedence() -> None:
    opt = config.OPTIONS["coord_port"]
    env = {"CRAC_COORD_PORT": "1", "DMTCP_COORD_PORT": "2", "DMTCP_PORT": "3"}
    assert opt.resolve("9", env).value == "9"
    assert opt.resolve(None, env) == config.Resolved("1", "CRAC_COORD_PORT")
    assert opt.resolve(None, {**env, "CRAC_COORD_PORT": ""}).source == "DMTCP_COORD_PORT"
    assert opt.resolve(None, {"DMTCP_PORT": "3"}).value == "3"
    assert opt.resolve(None, {}) == config.Resolved("7779", "default")


# --- version, help, doctor ----------------------------------------------------------------------


def test_version() -> None:
    proc = run_crac("--version")
    assert proc.returncode == 0
    assert proc.stdout.strip() == f"crac {__version__}"
    pyproject = tomllib.loads((REPO / "pyproject.toml").read_text())
    assert pyproject["project"]["version"] == __version__ == "0.1.0"


def test_help_has_examples() -> None:
    proc = run_crac("--help")
    assert proc.returncode == 0
    assert "Examples" in proc.stdout
    assert "crac launch" in proc.stdout and "doctor" in proc.stdout


def test_doctor_json() -> None:
    proc = run_crac("doctor", "--json")
    assert proc.returncode in (0, 1), proc.stderr
    checks = json.loads(proc.stdout)
    assert isinstance(checks, list) and checks
    for check in checks:
        assert set(check) == {"name", "status", "detail"}
        assert check["status"] in {"OK", "WARN", "FAIL", "INFO"}
    names = {c["name"] for c in checks}
    assert {"kernel", "seccomp filter", "windows W/D free", "usable backends"} <= names
