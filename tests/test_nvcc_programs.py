"""Programs built by nvcc run under crac unchanged (docs/SIM.md "Programs built by nvcc").

examples/cuda/*.cu are built with `nvcc -cudart shared` (CUDA 13) exactly as a user would, plus an
rpath to crac's native sim libcudart so that a plain run uses the sim; `crac kernels` compiles
their device code for the CPU into PROGRAM.kernels.so next to the binary. Each program checks its
own result. They run natively on the native sim, under `crac launch` on sim1 and sim2, and through
two checkpoint -> SIGKILL -> restart cycles (one chain switching sim versions 1 -> 2 -> 1), with
output identical to the uninterrupted native run. Without nvcc the tests skip, saying so.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest
from ckpt_harness import (
    Segment,
    assert_same_output,
    check_resume_point,
    checkpoint,
    kill9,
    launch,
    native_reference,
    restart,
    run_cycles,
    stitch,
    wait_exit,
    wait_for_step,
)
from conftest import crac_cmd, require_native

EXAMPLES = Path(__file__).resolve().parent.parent / "examples" / "cuda"
APPS = Path(__file__).resolve().parent / "apps"
PROGRAMS = ("vector_add", "reduce", "symbols", "managed", "multistream", "graph")
TIMEOUT = 300


def sim(version: int) -> tuple[str, ...]:
    return ("--device", "sim", "--sim-version", str(version))


def find_nvcc() -> Path | None:
    """nvcc of the CUDA 13 toolkit crac builds against ($CUDA_HOME, the headers' toolkit, PATH)."""
    cands: list[Path] = []
    for var in ("CUDA_HOME", "CUDA_PATH"):
        if os.environ.get(var):
            cands.append(Path(os.environ[var]) / "bin" / "nvcc")
    try:
        from crac_py.codegen.cudart_locate import find_cuda

        cands.append(find_cuda().include_dir.parent / "bin" / "nvcc")
    except Exception:  # no CUDA headers: the build would have failed already
        pass
    cands.append(Path("/usr/local/cuda/bin/nvcc"))
    which = shutil.which("nvcc")
    if which:
        cands.append(Path(which))
    return next((c for c in cands if c.is_file() and os.access(c, os.X_OK)), None)


NVCC = find_nvcc()
needs_nvcc = pytest.mark.skipif(
    NVCC is None, reason="nvcc (CUDA 13) is not installed: nvcc-built programs cannot be built"
)


def native_sim_dir() -> Path:
    from crac_py.codegen import sim_toolchain

    return sim_toolchain.cudart_dir()


def nvcc_build(src: Path, out: Path, *flags: str) -> Path:
    assert NVCC is not None
    cmd = [str(NVCC), "-cudart", "shared", *flags, f"-Xlinker=-rpath,{native_sim_dir()}"]
    cmd += ["-o", str(out), str(src)]
    res = subprocess.run(cmd, capture_output=True, text=True, timeout=TIMEOUT)
    assert res.returncode == 0, f"nvcc failed:\n{' '.join(cmd)}\n{res.stderr}"
    return out


def crac_kernels(src: Path, out: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*crac_cmd(), "kernels", str(src), "-o", str(out)],
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
    )


@pytest.fixture(scope="module")
def programs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    require_native()
    out = tmp_path_factory.mktemp("nvcc")
    built: dict[str, Path] = {}
    for name in PROGRAMS:
        exe = nvcc_build(EXAMPLES / f"{name}.cu", out / name)
        cp = crac_kernels(EXAMPLES / f"{name}.cu", out / f"{name}.kernels.so")
        assert cp.returncode == 0, f"crac kernels {name}.cu failed:\n{cp.stderr}"
        built[name] = exe
    return built


def run(argv: list[str], **kw) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, capture_output=True, text=True, timeout=TIMEOUT, **kw)


def native_done(exe: Path, args: list[str]) -> str:
    cp = run([str(exe), *args])
    assert cp.returncode == 0, f"{exe.name} fails natively:\n{cp.stdout}\n{cp.stderr}"
    return cp.stdout


@needs_nvcc
@pytest.mark.parametrize("name", PROGRAMS)
def test_native_sim(name, programs):
    """The nvcc-built binary on the native sim libcudart (its rpath), kernels from the library."""
    exe = programs[name]
    out = native_done(exe, ["6"])
    assert out.splitlines()[-1].startswith(f"DONE {name} "), out
    ldd = run(["ldd", str(exe)]).stdout
    assert str(native_sim_dir()) in ldd, f"{exe.name} does not use the native sim:\n{ldd}"


@needs_nvcc
@pytest.mark.parametrize("version", (1, 2))
@pytest.mark.parametrize("name", PROGRAMS)
def test_crac_launch(name, version, programs, tmp_path):
    exe = programs[name]
    expected = native_done(exe, ["6"])
    cp = run([*crac_cmd(), "launch", *sim(version), "-c", str(tmp_path), "--", str(exe), "6"])
    assert cp.returncode == 0, f"under crac launch (sim{version}):\n{cp.stdout}\n{cp.stderr}"
    assert cp.stdout == expected


@needs_nvcc
@pytest.mark.parametrize("name", PROGRAMS)
def test_two_checkpoint_restart_cycles(name, programs, tmp_path):
    """Device memory, nvcc's variables (__device__/__constant__/__managed__) and the kernels
    library's binding survive checkpoint -> SIGKILL -> restart twice."""
    run_cycles(programs[name], ["40", "30"], tmp_path, cycles=2, launch_opts=sim(1))


@needs_nvcc
@pytest.mark.parametrize("name", ("symbols", "managed", "multistream", "graph"))
def test_cycles_switching_sim_versions(name, programs, tmp_path):
    """launch on sim1 -> checkpoint -> kill -> restart on sim2 -> checkpoint -> kill -> restart on
    sim1: the variables are bound again on each new backend, the output is the native run's."""
    app, args = programs[name], ["40", "30"]
    ref = native_reference(app, args, tmp_path / "ref_work", tmp_path / "ref_cwd")
    ckpt, logs, cwd = tmp_path / "ckpt", tmp_path / "logs", tmp_path / "cwd"
    for d in (ckpt, logs, cwd):
        d.mkdir()
    proc = launch(app, args, ckpt, out_dir=logs, opts=sim(1), cwd=cwd)
    segments: list[Segment] = []
    try:
        for i, (fraction, version) in enumerate(((0.25, 2), (0.55, 1))):
            wait_for_step(proc, int(ref.steps * fraction))
            before = proc.last_step()
            gen = checkpoint(proc, ckpt)
            at = proc.last_step()
            wait_for_step(proc, at + 2)
            kill9(proc)
            seg = Segment(proc.label, proc.lines(), before, at, gen)
            segments.append(seg)
            proc = restart(gen, out_dir=logs, label=f"restart{i + 1}", opts=sim(version), cwd=cwd)
            wait_for_step(proc, 1)
            check_resume_point(Segment(proc.label, proc.lines()), seg)
        assert wait_exit(proc) == 0, proc.report()
        segments.append(Segment(proc.label, proc.lines()))
        assert_same_output(stitch(segments), ref.lines, "the sim1 -> sim2 -> sim1 chain")
    except BaseException:
        proc.stop()
        raise


@needs_nvcc
def test_per_thread_default_stream(programs, tmp_path):
    """--default-stream per-thread: nvcc generates __cudaLaunchKernel_ptsz and *_ptds calls."""
    exe = nvcc_build(
        EXAMPLES / "symbols.cu", tmp_path / "symbols_pt", "--default-stream", "per-thread"
    )
    shutil.copyfile(
        programs["symbols"].with_name("symbols.kernels.so"), tmp_path / "symbols_pt.kernels.so"
    )
    imports = run(["nm", "-D", str(exe)]).stdout
    assert "__cudaLaunchKernel_ptsz" in imports and "cudaMemcpyToSymbol_ptds" in imports
    expected = native_done(exe, ["5"])
    cp = run([*crac_cmd(), "launch", *sim(1), "-c", str(tmp_path), "--", str(exe), "5"])
    assert cp.returncode == 0, cp.stderr
    assert cp.stdout == expected


@needs_nvcc
def test_missing_kernels_library_is_a_clear_error(programs, tmp_path):
    """No CPU code for a kernel: the launch returns cudaErrorInvalidDeviceFunction and one stderr
    line names the kernel and the fix; never a wrong result."""
    exe = tmp_path / "vector_add"
    shutil.copyfile(programs["vector_add"], exe)  # no vector_add.kernels.so next to this copy
    exe.chmod(0o755)
    for argv in (
        [str(exe), "2"],
        [*crac_cmd(), "launch", *sim(1), "-c", str(tmp_path), "--", str(exe), "2"],
    ):
        cp = run(argv)
        assert cp.returncode == 1, f"{cp.stdout}\n{cp.stderr}"
        assert "invalid device function" in cp.stderr, cp.stderr
        lines = [ln for ln in cp.stderr.splitlines() if "no CPU code" in ln]
        assert len(lines) == 1, cp.stderr
        assert "_Z4vaddPKjS0_Pji" in lines[0] and "crac kernels" in lines[0], lines[0]
        assert "DONE" not in cp.stdout


@needs_nvcc
def test_kernels_library_from_env(programs, tmp_path):
    """$CRAC_KERNELS names the library when it is not next to the program."""
    exe = tmp_path / "renamed"
    shutil.copyfile(programs["reduce"], exe)
    exe.chmod(0o755)
    lib = programs["reduce"].with_name("reduce.kernels.so")
    env = {**os.environ, "CRAC_KERNELS": str(lib)}
    expected = native_done(programs["reduce"], ["4"])
    assert run([str(exe), "4"], env=env).stdout == expected
    cp = run([*crac_cmd(), "launch", *sim(2), "-c", str(tmp_path), "--", str(exe), "4"], env=env)
    assert cp.returncode == 0, cp.stderr
    assert cp.stdout == expected


@needs_nvcc
def test_static_cudart_refused_with_the_fix(tmp_path):
    exe = tmp_path / "vadd_static"
    assert NVCC is not None
    res = run([str(NVCC), "-cudart", "static", "-o", str(exe), str(EXAMPLES / "vector_add.cu")])
    assert res.returncode == 0, res.stderr
    cp = run([*crac_cmd(), "launch", *sim(1), "--", str(exe), "1"])
    assert cp.returncode == 2, cp.stderr
    assert "crac: error:" in cp.stderr and "-cudart shared" in cp.stderr, cp.stderr


def test_unsupported_device_feature_fails_at_build(tmp_path):
    """Warp shuffles are not simulated: `crac kernels` fails, naming the source line."""
    src = tmp_path / "shfl.cu"
    src.write_text(
        "__global__ void k(int *p) { p[threadIdx.x] = __shfl_down_sync(0xffffffff, 1, 1); }\n"
    )
    cp = crac_kernels(src, tmp_path / "shfl.kernels.so")
    assert cp.returncode == 1
    assert cp.stderr.startswith("crac: error: compiling shfl.cu for the CPU failed")
    assert "__shfl_down_sync" in cp.stderr
    assert not (tmp_path / "shfl.kernels.so").exists()


def test_cuda11_program_refused_with_the_fix(tmp_path):
    """A program linked against another major's runtime (CUDA 11's libcudart.so.11, versioned
    imports) is refused: crac provides libcudart.so.13 and the CUDA 12 layer (test_cuda12.py)."""
    (tmp_path / "v.map").write_text("libcudart.so.11 { global: cudaMalloc; local: *; };\n")
    (tmp_path / "rt.c").write_text("int cudaMalloc(void **p, unsigned long n) { return 0; }\n")
    (tmp_path / "app.c").write_text(
        "int cudaMalloc(void **p, unsigned long n);\n"
        "int main(void) { void *p; return cudaMalloc(&p, 1); }\n"
    )
    lib = tmp_path / "libcudart.so.11"
    cc = ["gcc", "-shared", "-fPIC", "-Wl,-soname,libcudart.so.11"]
    res = run(
        [*cc, f"-Wl,--version-script={tmp_path / 'v.map'}", "-o", str(lib), str(tmp_path / "rt.c")]
    )
    assert res.returncode == 0, res.stderr
    exe = tmp_path / "app11"
    res = run(["gcc", "-o", str(exe), str(tmp_path / "app.c"), str(lib), f"-Wl,-rpath,{tmp_path}"])
    assert res.returncode == 0, res.stderr
    assert "cudaMalloc@libcudart.so.11" in run(["nm", "-D", str(exe)]).stdout
    cp = run([*crac_cmd(), "launch", *sim(1), "--", str(exe)])
    assert cp.returncode == 2, cp.stderr
    assert "needs libcudart.so.11" in cp.stderr and "rebuild it with CUDA 12 or 13" in cp.stderr


@needs_nvcc
def test_two_sources_templates_namespaces(tmp_path):
    """Kernels spread over two .cu files, a namespaced template kernel instantiated for two types
    and a kernel taking a struct by value: one library from both sources."""
    srcs = [APPS / "nvcc_multi_main.cu", APPS / "nvcc_multi_kern.cu"]
    exe = tmp_path / "multi"
    assert NVCC is not None
    cmd = [str(NVCC), "-cudart", "shared", f"-Xlinker=-rpath,{native_sim_dir()}", "-o", str(exe)]
    res = run([*cmd, *map(str, srcs)])
    assert res.returncode == 0, res.stderr
    cp = run([*crac_cmd(), "kernels", *map(str, srcs), "-o", str(tmp_path / "multi.kernels.so")])
    assert cp.returncode == 0 and "4 kernels" in cp.stdout, cp.stdout + cp.stderr
    assert native_done(exe, []) == "OK\n"
    cp = run([*crac_cmd(), "launch", *sim(2), "-c", str(tmp_path), "--", str(exe)])
    assert cp.returncode == 0 and cp.stdout == "OK\n", cp.stderr


@needs_nvcc
def test_native_sim_via_ld_library_path(programs, tmp_path):
    """The binary exactly as `nvcc -cudart shared` makes it (no rpath) runs on the native sim when
    LD_LIBRARY_PATH names it; the kernels library is found next to it."""
    assert NVCC is not None
    exe = tmp_path / "vector_add"
    res = run([str(NVCC), "-cudart", "shared", "-o", str(exe), str(EXAMPLES / "vector_add.cu")])
    assert res.returncode == 0, res.stderr
    shutil.copyfile(
        programs["vector_add"].with_name("vector_add.kernels.so"),
        tmp_path / "vector_add.kernels.so",
    )
    env = {**os.environ, "LD_LIBRARY_PATH": str(native_sim_dir())}
    assert str(native_sim_dir()) in run(["ldd", str(exe)], env=env).stdout
    cp = run([str(exe), "6"], env=env)
    assert cp.returncode == 0, cp.stderr
    assert cp.stdout == native_done(programs["vector_add"], ["6"])
