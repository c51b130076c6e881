"""The real CUDA backend on a machine without a GPU: NVIDIA's libcudart runs in the lower half and
answers the program exactly as it does natively; checkpoint and restart work on it, and from it to
the sim. What needs a GPU is bench/gpu_check.sh's (docs/CUDA.md "What is verified")."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
from ckpt_harness import assert_refused, base_env, run_cycles
from conftest import crac_cmd

from crac_py.launch import devices

APPS = Path(__file__).resolve().parent / "apps"

pytestmark = pytest.mark.skipif(
    devices.cuda_backend_note() is None,
    reason="this machine has a GPU: the cuda backend is checked there by bench/gpu_check.sh",
)


@pytest.fixture(scope="module")
def real_cudart():
    from crac_py.codegen.cudart_locate import CudaNotFoundError, find_cuda

    try:
        return find_cuda()
    except CudaNotFoundError as exc:
        pytest.fail(f"NVIDIA's CUDA runtime is part of the test extras: {exc}")


@pytest.fixture(scope="module")
def errors_app(real_cudart, tmp_path_factory) -> Path:
    """tests/apps/cuda_real_errors.c linked against NVIDIA's libcudart.so.13 (found at run time
    through its RUNPATH natively; under crac the shim takes its place)."""
    out = tmp_path_factory.mktemp("cuda_backend") / "cuda_real_errors"
    libdir = real_cudart.libcudart.parent
    cmd = ["gcc", "-O2", "-Wall", "-Wextra", "-Werror", f"-I{real_cudart.include_dir}"]
    cmd += [f"-I{APPS}", str(APPS / "cuda_real_errors.c"), "-o", str(out), f"-L{libdir}"]
    cmd += ["-l:libcudart.so.13", f"-Wl,-rpath,{libdir}", "-Wl,--enable-new-dtags"]
    subprocess.run(cmd, check=True, timeout=300)
    return out


def test_same_errors_as_native(errors_app, real_cudart, tmp_path):
    native = subprocess.run(
        [str(errors_app), "3", "0"], capture_output=True, env=base_env(), timeout=120
    )
    assert native.returncode == 0, native
    assert b"cudaErrorInsufficientDriver" in native.stdout, native.stdout
    under = subprocess.run(
        [*crac_cmd(), "launch", "--device", "cuda", "-c", str(tmp_path), "--", str(errors_app),
         "3", "0"],
        capture_output=True,
        env=base_env(),
        cwd=tmp_path,
        timeout=120,
    )  # fmt: skip
    assert under.returncode == 0, under
    assert under.stdout == native.stdout
    assert under.stderr == b"", under.stderr


def test_checkpoint_restart_on_cuda_backend(errors_app, tmp_path):
    res = run_cycles(errors_app, ["40", "40"], tmp_path, launch_opts=["--device", "cuda"])
    manifest = (res.gens[-1] / "MANIFEST.json").read_text()
    assert '"name": "cuda"' in manifest, manifest


def test_restart_from_cuda_onto_sim(errors_app, tmp_path):
    """No device state was saved (there was no device): the program goes on under the sim, which
    then answers its calls (one device, no errors), and the program says so."""
    launch = subprocess.Popen(
        [*crac_cmd(), "launch", "--device", "cuda", "-c", str(tmp_path / "ck"), "--",
         str(errors_app), "100000", "20"],
        stdout=subprocess.PIPE,
        env=base_env(),
        cwd=tmp_path,
    )  # fmt: skip
    try:
        assert launch.stdout is not None
        for line in launch.stdout:
            if line.startswith(b"step 3"):
                break
        launch.send_signal(12)
        procdirs: list[Path] = []
        for _ in range(600):
            procdirs = list((tmp_path / "ck").glob("ckpt_*/latest/MANIFEST.json"))
            if procdirs:
                break
            subprocess.run(["sleep", "0.1"])
        assert procdirs, "no checkpoint within 60 s"
    finally:
        launch.kill()
        launch.wait()
    run = subprocess.run(
        [*crac_cmd(), "restart", "--device", "sim", str(tmp_path / "ck")],
        capture_output=True,
        env=base_env(),
        cwd=tmp_path,
        timeout=120,
    )
    # The program notices at once that its runtime changed: the sim has a device.
    err = run.stderr.decode()
    assert run.returncode == 1 and "answered differently" in err, run
    assert "cudaGetDeviceCount -> 0 cudaSuccess" in err, err


@pytest.mark.parametrize(
    ("runtime", "message"),
    [
        ("/nonexistent/libcudart.so.13", "no such file"),
        ("11", "no libcudart.so.11 found"),
    ],
)
def test_bad_cuda_runtime(errors_app, tmp_path, runtime, message):
    cp = subprocess.run(
        [*crac_cmd(), "launch", "--device", "cuda", "--cuda-runtime", runtime, "--",
         str(errors_app), "1", "0"],
        capture_output=True,
        env=base_env(),
        cwd=tmp_path,
        timeout=120,
    )  # fmt: skip
    assert message in assert_refused(cp)


def test_doctor_says_why(tmp_path):
    cp = subprocess.run(
        [*crac_cmd(), "doctor"],
        capture_output=True,
        text=True,
        env=dict(base_env(), COLUMNS="200"),
        timeout=120,
    )
    assert "cuda backend" in cp.stdout and "cannot reach a GPU here" in cp.stdout, cp.stdout


def test_backend_library_built():
    from crac_py import paths

    lib = paths.native_dir() / "libcrac-cuda13.so"
    assert lib.is_file(), f"{lib} is missing: pip install . builds it"
    assert os.access(lib, os.R_OK)


def test_gpu_check_fails_fast_without_gpu(tmp_path):
    """bench/gpu_check.sh is the GPU proof; where there is no GPU it stops at once and says why."""
    import sys

    script = Path(__file__).resolve().parent.parent / "bench" / "gpu_check.sh"
    cp = subprocess.run(
        [str(script)],
        capture_output=True,
        text=True,
        env=dict(base_env(), CRAC_VENV=sys.prefix),
        timeout=120,
    )
    assert cp.returncode == 2, cp
    assert "no GPU here" in cp.stderr and "nothing to check" in cp.stderr, cp.stderr


# ---- nvcc-built programs on the cuda backend (issue 16: the real runtime in the lower half) ----


def find_libcuda_stub() -> Path | None:
    """NVIDIA's stub libcuda.so (the toolkit's lib64/stubs, or a wheel's), or None."""
    from crac_py.codegen.cudart_locate import find_cuda

    roots = [Path(os.environ[v]) for v in ("CUDA_HOME", "CUDA_PATH") if os.environ.get(v)]
    roots.append(Path("/usr/local/cuda"))
    try:
        roots.append(find_cuda().libcudart.parent.parent)
    except Exception:  # no toolkit: then no stub either
        pass
    for root in roots:
        for sub in ("lib64/stubs", "lib/stubs", "targets/x86_64-linux/lib/stubs"):
            if (root / sub / "libcuda.so").is_file():
                return root / sub / "libcuda.so"
    return None


@pytest.fixture(scope="module")
def nvcc_plain(tmp_path_factory) -> dict[str, Path]:
    """examples/cuda built exactly as `nvcc -cudart shared` makes them (no rpath to the sim)."""
    from test_nvcc_programs import EXAMPLES, NVCC, PROGRAMS

    if NVCC is None:
        pytest.skip("nvcc (CUDA 13) is not installed: nvcc-built programs cannot be built")
    out = tmp_path_factory.mktemp("nvcc_cuda")
    built: dict[str, Path] = {}
    for name in PROGRAMS:
        exe = out / name
        cmd = [str(NVCC), "-cudart", "shared", "-o", str(exe), str(EXAMPLES / f"{name}.cu")]
        cp = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
        assert cp.returncode == 0, cp.stderr
        built[name] = exe
    return built


def native_vs_cuda_backend(exe: Path, libdirs: list[Path], tmp_path: Path):
    """The program natively on NVIDIA's runtime (libdirs first on LD_LIBRARY_PATH) and under
    `crac launch --device cuda` with the same environment."""
    env = dict(base_env(), LD_LIBRARY_PATH=":".join(map(str, libdirs)))
    native = subprocess.run(
        [str(exe), "3"], capture_output=True, text=True, env=env, cwd=tmp_path, timeout=120
    )
    under = subprocess.run(
        [*crac_cmd(), "launch", "--device", "cuda", "-c", str(tmp_path / "ck"), "--", str(exe),
         "3"],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        timeout=120,
    )  # fmt: skip
    return native, under


@pytest.mark.parametrize("name", ["vector_add", "managed", "multistream", "graph"])
def test_nvcc_program_same_as_native(name, nvcc_plain, real_cudart, tmp_path):
    """No driver here: the runtime's own error, from NVIDIA's libcudart in the lower half, word
    for word as the program prints it natively, and the same exit status."""
    native, under = native_vs_cuda_backend(
        nvcc_plain[name], [real_cudart.libcudart.parent], tmp_path
    )
    assert native.returncode != 0 and "CUDA driver" in native.stderr, native
    assert (under.returncode, under.stdout, under.stderr) == (
        native.returncode,
        native.stdout,
        native.stderr,
    )


def test_nvcc_program_with_stub_libcuda(nvcc_plain, real_cudart, tmp_path):
    """NVIDIA's stub libcuda.so as the driver (as a build machine has it): natively and under crac
    the runtime answers the same (the stub's error)."""
    stub = find_libcuda_stub()
    if stub is None:
        pytest.skip("NVIDIA's stub libcuda.so is not installed (CUDA_HOME/lib64/stubs)")
    drv = tmp_path / "drv"
    drv.mkdir()
    (drv / "libcuda.so.1").symlink_to(stub)
    native, under = native_vs_cuda_backend(
        nvcc_plain["vector_add"], [drv, real_cudart.libcudart.parent], tmp_path
    )
    assert native.returncode != 0, native
    assert (under.returncode, under.stdout, under.stderr) == (
        native.returncode,
        native.stdout,
        native.stderr,
    )
