"""CUDA 12: crac's libcudart.so.12 layer over the 13 shim (docs/CUDA.md "CUDA 12").

The layer is checked symbol by symbol against NVIDIA's libcudart.so.12 (the nvidia-cuda-runtime-cu12
wheel), the structures it passes unchanged are compared compiled against both header sets, and a
program built against CUDA 12's headers runs natively on the native sim, under `crac launch`, and
through two checkpoint -> SIGKILL -> restart cycles with the same output. A missing CUDA 12 wheel
FAILS these tests (it is a build requirement), never skips them.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from ckpt_harness import (
    assert_refused,
    base_env,
    checkpoint,
    kill9,
    launch,
    restart,
    run_cycles,
    run_restart,
    wait_for_step,
)
from conftest import APPS_DIR, crac_cmd, native_dir, require_native
from test_nvcc_programs import EXAMPLES, NVCC, crac_kernels

from crac_py.codegen import cuda12
from crac_py.codegen.cudart_locate import find_cuda
from crac_py.codegen.generate import read_lib
from crac_py.launch import devices

CFLAGS = ("-O2", "-std=c11", "-Wall", "-Wextra", "-Werror", "-D_DEFAULT_SOURCE", "-pthread")


def run(cmd: list[str], **kw) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, capture_output=True, text=True, timeout=300, **kw)


@pytest.fixture(scope="module")
def cu12() -> cuda12.CudaRuntime:
    return cuda12.find_cuda12()


def includes(cu12: cuda12.CudaRuntime) -> list[str]:
    return [f"-I{d}" for d in cuda12.includes12(cu12, find_cuda(), None)]


def build12(src: Path, out: Path, cu12: cuda12.CudaRuntime, *, nvidia: bool = False) -> Path:
    """SRC built against CUDA 12's headers, linked to crac's native sim libcudart.so.12 (or to
    NVIDIA's)."""
    libdir = cu12.libcudart.parent if nvidia else native_dir() / "native"
    cmd = ["gcc", *CFLAGS, *includes(cu12), f"-I{native_dir() / 'include'}", str(src)]
    cmd += ["-o", str(out), f"-L{libdir}", "-l:libcudart.so.12", f"-Wl,-rpath,{libdir}"]
    res = run(cmd)
    assert res.returncode == 0, f"{' '.join(cmd)}\n{res.stderr}"
    return out


@pytest.fixture(scope="module")
def app12(tmp_path_factory, cu12) -> Path:
    require_native()
    out = tmp_path_factory.mktemp("cuda12") / "cuda_v12_steps"
    return build12(APPS_DIR / "cuda_v12_steps.c", out, cu12)


@pytest.mark.parametrize("kind", ["shim", "native"])
def test_layer_exports_match_nvidia(kind, cu12):
    """soname, version node and every export as NVIDIA's libcudart.so.12 has them; nothing
    NVIDIA lacks; what NVIDIA exports and crac does not is the generator's refused list."""
    path = native_dir() / kind / "libcudart.so.12"
    ours, nvidia = read_lib(path), read_lib(cu12.libcudart)
    assert ours.soname == nvidia.soname == "libcudart.so.12"
    assert ours.versions == nvidia.versions == ["libcudart.so.12"]
    extra = sorted(set(ours.exports) - set(nvidia.exports))
    assert not extra, f"{path} exports functions NVIDIA's libcudart.so.12 lacks: {extra}"
    wrong = {n: v for n, v in ours.exports.items() if v != nvidia.exports[n]}
    assert not wrong, f"exported under other version nodes than NVIDIA's: {wrong}"
    layer = cuda12.plan(cu12, find_cuda())
    assert set(ours.exports) == set(layer.exports)
    assert sorted(set(nvidia.exports) - set(ours.exports)) == layer.refused
    # The renamed and translated CUDA 12 entries are there, the CUDA 13 only ones are not.
    for name in ("cudaGetDeviceProperties_v2", "cudaMemAdvise_v2", "cudaMemPrefetchAsync_v2"):
        assert name in ours.exports
    assert "cudaGetDeviceProperties" not in ours.exports  # 12's legacy layout: refused
    assert "cudaMemGetDefaultMemPool" not in ours.exports  # CUDA 13 only


@pytest.mark.parametrize("kind", ["shim", "native"])
def test_layer_calls_the_13_library(kind):
    """Every function the layer calls is the 13 library's, by its versioned name."""
    path = native_dir() / kind / "libcudart.so.12"
    dyn = run(["readelf", "-d", "-W", str(path)]).stdout
    assert "Shared library: [libcudart.so.13]" in dyn
    syms = run(["readelf", "--dyn-syms", "-W", str(path)]).stdout.splitlines()
    undefined = [
        ln.split()[7] for ln in syms if " UND " in ln and (" cuda" in ln or " __cuda" in ln)
    ]
    assert undefined, "the layer calls no CUDA function"
    bad = [s for s in undefined if not s.endswith("@libcudart.so.13")]
    assert not bad, f"calls not bound to libcudart.so.13: {bad}"


def test_same_layout_structures(tmp_path, cu12):
    """The structures listed as unchanged keep CUDA 12's size and member offsets in CUDA 13."""
    text12 = cuda12.preprocessed(cuda12.includes12(cu12, find_cuda(), None))
    bodies = cuda12.struct_bodies(text12)
    lines = ["#include <cuda_runtime_api.h>", "#include <stddef.h>", "#include <stdio.h>"]
    lines.append("int main(void) {")
    for name in sorted(cuda12.SAME_LAYOUT):
        kw = "union" if f"union {name} {{" in " ".join(text12.split()) else "struct"
        lines.append(f'printf("{name} %zu\\n", sizeof({kw} {name}));')
        for member in cuda12.fields(bodies[name]):
            lines.append(f'printf("{name}.{member} %zu\\n", offsetof({kw} {name}, {member}));')
    lines.append("return 0; }")
    src = tmp_path / "probe.c"
    src.write_text("\n".join(lines) + "\n")
    out = {}
    for label, incs in (("12", includes(cu12)), ("13", [f"-I{find_cuda().include_dir}"])):
        exe = tmp_path / f"probe{label}"
        res = run(["gcc", "-std=c11", *incs, str(src), "-o", str(exe)])
        assert res.returncode == 0, res.stderr
        out[label] = run([str(exe)]).stdout
    assert out["12"].count("\n") > 10
    assert out["12"] == out["13"]


def test_cuda12_program_runs_under_crac_on_the_layer(app12, tmp_path):
    """Native run on the native sim and `crac launch` print the same; under crac the program's
    libcudart.so.12 is crac's shim layer (not the native sim its RUNPATH names)."""
    native = run([str(app12), "20", "0"], cwd=tmp_path)
    assert native.returncode == 0, native.stderr
    assert native.stdout.startswith("runtime 12090 ")
    proc = subprocess.Popen(
        [*crac_cmd(), "launch", "--no-coordinator", "--", str(app12), "400", "20"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=tmp_path,
    )
    try:
        assert proc.stdout is not None
        first = proc.stdout.readline()
        assert first.startswith("runtime 12090 "), first + (
            proc.stderr.read() if proc.stderr else ""
        )
        proc.stdout.readline()  # step 1: the program is running
        maps = Path(f"/proc/{proc.pid}/maps").read_text()
    finally:
        proc.kill()
        proc.wait(timeout=60)
    assert str(native_dir() / "shim" / "libcudart.so.12") in maps
    assert str(native_dir() / "shim" / "libcudart.so.13") in maps
    assert str(native_dir() / "native" / "libcudart.so.12") not in maps
    cp = run([*crac_cmd(), "launch", "--no-coordinator", "--", str(app12), "20", "0"], cwd=tmp_path)
    assert cp.returncode == 0, cp.stderr
    assert cp.stdout == native.stdout


def test_cuda12_program_two_cycles(app12, tmp_path):
    """checkpoint -> SIGKILL -> restart, twice: the output equals the native sim's."""
    run_cycles(app12, ["150", "20"], tmp_path, cycles=2)


def test_linked_to_nvidia_same_imports(app12, tmp_path, cu12):
    """Linked to NVIDIA's libcudart.so.12 the program imports exactly what it imports linked to
    crac's (names and version nodes)."""
    theirs = build12(APPS_DIR / "cuda_v12_steps.c", tmp_path / "nv", cu12, nvidia=True)

    def imports(exe: Path) -> list[str]:
        return sorted(
            ln.split()[-1]
            for ln in run(["nm", "-D", str(exe)]).stdout.splitlines()
            if " U cuda" in ln
        )

    assert imports(theirs) == imports(app12)
    assert all(s.endswith("@libcudart.so.12") for s in imports(app12))


def test_unsupported_cuda12_function_refused(tmp_path, cu12):
    """A CUDA 12 program importing a function the layer refuses is stopped by preflight with the
    function named (cudaThreadSynchronize: removed in CUDA 13)."""
    src = tmp_path / "old.c"
    src.write_text(
        "#include <cuda_runtime_api.h>\n"
        "int main(void) { return cudaThreadSynchronize() == cudaSuccess ? 0 : 1; }\n"
    )
    exe = tmp_path / "old"
    res = run(
        ["gcc", "-Wno-deprecated-declarations", *includes(cu12), str(src), "-o", str(exe)]
        + [f"-L{cu12.libcudart.parent}", "-l:libcudart.so.12"]
    )
    assert res.returncode == 0, res.stderr
    cp = run([*crac_cmd(), "launch", "--no-coordinator", "--", str(exe)], cwd=tmp_path)
    assert cp.returncode == 2, cp.stderr
    assert cp.stderr.startswith("crac: error: ")
    assert "cudaThreadSynchronize" in cp.stderr


def test_coverage_reports_both(cu12):
    cp = run([sys.executable, "-m", "crac_py.codegen.generate", "--coverage"])
    assert cp.returncode == 0, cp.stderr
    assert "exported by libcudart.so.13" in cp.stdout
    assert "exported by libcudart.so.12" in cp.stdout


# ---------------------------------------------------------------- the cuda backend on CUDA 12

no_gpu = pytest.mark.skipif(
    devices.cuda_backend_note() is None,
    reason="this machine has a GPU: the cuda backend is checked there by bench/gpu_check.sh",
)


@pytest.fixture(scope="module")
def errors12(tmp_path_factory, cu12) -> Path:
    """tests/apps/cuda_real_errors.c built against CUDA 12 and linked to NVIDIA's
    libcudart.so.12 (its RUNPATH finds it natively; under crac the layer takes its place)."""
    out = tmp_path_factory.mktemp("cuda12_backend") / "cuda_real_errors12"
    libdir = cu12.libcudart.parent
    cmd = ["gcc", "-O2", "-Wall", "-Wextra", "-Werror", *includes(cu12), f"-I{APPS_DIR}"]
    cmd += [str(APPS_DIR / "cuda_real_errors.c"), "-o", str(out), f"-L{libdir}"]
    cmd += ["-l:libcudart.so.12", f"-Wl,-rpath,{libdir}", "-Wl,--enable-new-dtags"]
    res = run(cmd)
    assert res.returncode == 0, res.stderr
    return out


def manifest_runtime(gen: Path) -> str:
    return json.loads((gen / "MANIFEST.json").read_text())["backend"]["version"]


@no_gpu
def test_cuda_backend_on_cuda12_same_as_native(errors12, tmp_path):
    """`--device cuda --cuda-runtime 12`: NVIDIA's libcudart.so.12 in the lower half answers the
    program exactly as it answers natively (no driver here)."""
    native = run([str(errors12), "3", "0"], env=base_env())
    assert native.returncode == 0, native.stderr
    assert "cudaErrorInsufficientDriver" in native.stdout
    under = run(
        [*crac_cmd(), "launch", "--device", "cuda", "--cuda-runtime", "12", "-c", str(tmp_path)]
        + ["--", str(errors12), "3", "0"],
        env=base_env(),
        cwd=tmp_path,
    )
    assert under.returncode == 0, under.stderr
    assert under.stdout == native.stdout
    assert under.stderr == ""
    assert (native_dir() / "libcrac-cuda12.so").is_file()


@no_gpu
def test_cuda_backend_on_cuda12_two_cycles(errors12, tmp_path):
    """Two checkpoint -> SIGKILL -> restart cycles on libcrac-cuda12.so: each restart loads
    CUDA 12's runtime again (the image says which), the output is the native run's."""
    res = run_cycles(
        errors12, ["40", "40"], tmp_path, launch_opts=["--device", "cuda", "--cuda-runtime", "12"]
    )
    assert manifest_runtime(res.gens[0]).startswith("runtime 12.")
    assert manifest_runtime(res.gens[-1]).startswith("runtime 12.")


@no_gpu
@pytest.mark.parametrize(("first", "then"), [("13", "12"), ("12", "13")])
def test_restart_onto_the_other_cuda_runtime(errors12, tmp_path, first, then):
    """An image taken on one CUDA runtime restarts on the other with --cuda-runtime (no device
    state here: what moves is the program, the layer and the backend); the next image says so."""
    logs, ck = tmp_path / "logs", tmp_path / "ck"
    logs.mkdir()
    opts = ["--device", "cuda", "--cuda-runtime", first]
    proc = launch(errors12, ["100000", "20"], ck, out_dir=logs, opts=opts)
    try:
        wait_for_step(proc, 3)
        gen = checkpoint(proc, ck)
        kill9(proc)
    finally:
        proc.stop()
    assert manifest_runtime(gen).startswith(f"runtime {first}.")
    again = restart(ck, out_dir=logs, label="restart", opts=["--cuda-runtime", then])
    try:
        at = wait_for_step(again, 1)
        gen2 = checkpoint(again, ck)
        wait_for_step(again, at + 2)  # still answering as the first runtime did
    finally:
        again.stop()
    assert manifest_runtime(gen2).startswith(f"runtime {then}.")


@no_gpu
def test_restart_onto_a_missing_cuda_runtime_refused(errors12, tmp_path):
    logs, ck = tmp_path / "logs", tmp_path / "ck"
    logs.mkdir()
    opts = ["--device", "cuda", "--cuda-runtime", "12"]
    proc = launch(errors12, ["100000", "20"], ck, out_dir=logs, opts=opts)
    try:
        wait_for_step(proc, 2)
        checkpoint(proc, ck)
        kill9(proc)
    finally:
        proc.stop()
    cp = run_restart(ck, "--cuda-runtime", "11")
    assert "no libcudart.so.11 found" in assert_refused(cp)


# ---------------------------------------------------------------- nvcc-built CUDA 12 programs
# No CUDA 12 nvcc is installable here (the nvidia-cuda-nvcc-cu12 wheel carries ptxas, NVVM and
# headers, no nvcc): CUDA 13's nvcc builds the host code against CUDA 12's headers
# (CUDART_VERSION 12090) and links NVIDIA's ABI of libcudart.so.12 (-cudart none -l:...).

NVCC_PROGRAMS = ("vector_add", "reduce", "symbols", "managed")


@pytest.fixture(scope="module")
def nvcc12(tmp_path_factory, cu12) -> dict[str, Path]:
    if NVCC is None:
        pytest.skip("nvcc (CUDA 13) is not installed: nvcc-built programs cannot be built")
    require_native()
    out = tmp_path_factory.mktemp("nvcc12")
    libdir = native_dir() / "native"
    built: dict[str, Path] = {}
    for name in NVCC_PROGRAMS:
        exe = out / name
        cmd = [str(NVCC), "-cudart", "none", f"-I{cu12.include_dir}", "-o", str(exe)]
        cmd += [str(EXAMPLES / f"{name}.cu"), f"-L{libdir}", "-l:libcudart.so.12"]
        cmd += [f"-Xlinker=-rpath,{libdir}"]
        res = run(cmd)
        assert res.returncode == 0, f"{' '.join(cmd)}\n{res.stderr}"
        cp = crac_kernels(EXAMPLES / f"{name}.cu", out / f"{name}.kernels.so")
        assert cp.returncode == 0, cp.stderr
        built[name] = exe
    return built


@pytest.mark.parametrize("name", NVCC_PROGRAMS)
def test_nvcc12_program_imports_cuda12(name, nvcc12, cu12):
    """nvcc's entry points and the runtime calls, all under NVIDIA's libcudart.so.12 node."""
    nvidia = read_lib(cu12.libcudart).exports
    lines = run(["nm", "-D", str(nvcc12[name])]).stdout.splitlines()
    imports = [ln.split()[-1] for ln in lines if " U " in ln and "cuda" in ln]
    assert "__cudaRegisterFatBinary@libcudart.so.12" in imports
    for sym in imports:
        fn, _, node = sym.partition("@")
        assert node == "libcudart.so.12" and fn in nvidia, sym


@pytest.mark.parametrize("version", ("1", "2"))
@pytest.mark.parametrize("name", NVCC_PROGRAMS)
def test_nvcc12_program_under_crac(name, version, nvcc12, tmp_path):
    exe = nvcc12[name]
    native = run([str(exe), "6"])
    assert native.returncode == 0, native.stderr
    assert native.stdout.splitlines()[-1].startswith(f"DONE {name} ")
    opts = ["--device", "sim", "--sim-version", version, "-c", str(tmp_path)]
    cp = run([*crac_cmd(), "launch", *opts, "--", str(exe), "6"], cwd=tmp_path)
    assert cp.returncode == 0, cp.stderr
    assert cp.stdout == native.stdout


@pytest.mark.parametrize("name", NVCC_PROGRAMS)
def test_nvcc12_program_two_cycles(name, nvcc12, tmp_path):
    """Device memory, nvcc's variables and the kernels library survive checkpoint -> SIGKILL ->
    restart twice for a CUDA 12 program too."""
    run_cycles(nvcc12[name], ["40", "30"], tmp_path, cycles=2)
