"""Programs whose libraries come from PyPI's manylinux wheels (2 MiB-aligned segments, whose
PROT_NONE alignment gap ld.so maps from the file and past its end; segments far apart in memory
and close in the file, as patchelf leaves PyTorch's libgomp, so that a gap starts past the file's
end) through two checkpoint -> SIGKILL -> restart cycles: a C reproducer linked like each, and
real NumPy programs, with and without Python threads beside OpenBLAS's own."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from ckpt_harness import run_cycles
from conftest import APPS_DIR, CFLAGS

BIGLIB = APPS_DIR / "biglib"
OPENMP = APPS_DIR / "openmp"  # built here, with -fopenmp: not among conftest's apps
# How manylinux wheels' libraries are linked (the segments aligned to 2 MiB, no separate code
# segment): ld.so maps the whole span from the file and makes the gap PROT_NONE.
WHEEL_LDFLAGS = ["-Wl,-z,max-page-size=0x200000", "-Wl,-z,noseparate-code"]
# The writable data 8 MiB above the rest in memory, right after it in the file: the gap ld.so
# leaves below it is mapped from an offset past the file's end (the restart refused such a map).
FAR_LDFLAGS = ["-Wl,-z,max-page-size=4096", "-Wl,--section-start=.data=0x800000"]
LAYOUTS = {"2mib": WHEEL_LDFLAGS, "far": FAR_LDFLAGS}


def _gcc(*args: str) -> None:
    res = subprocess.run(["gcc", *CFLAGS, *args], capture_output=True, text=True, timeout=120)
    if res.returncode != 0:
        pytest.fail(f"cannot build: gcc {' '.join(args)}\n{res.stderr}")


@pytest.fixture(scope="module", params=list(LAYOUTS))
def biglib_app(request, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("biglib")
    _gcc(
        "-shared",
        "-fPIC",
        *LAYOUTS[request.param],
        "-o",
        str(out / "libbiglib.so"),
        str(BIGLIB / "biglib.c"),
    )
    exe = out / "ckpt_biglib"
    _gcc(
        "-o", str(exe), str(BIGLIB / "ckpt_biglib.c"), f"-L{out}", "-lbiglib", "-Wl,-rpath,$ORIGIN"
    )
    maps = subprocess.run(
        ["readelf", "-lW", str(out / "libbiglib.so")], capture_output=True, text=True, timeout=60
    ).stdout
    assert ("0x200000" if request.param == "2mib" else "0x0000000000800000") in maps, (
        f"the library is not linked as asked ({request.param}):\n{maps}"
    )
    return exe


def test_library_with_wheel_layout(biglib_app, tmp_path):
    run_cycles(biglib_app, ["300", "10"], tmp_path, cycles=2)


@pytest.fixture(scope="module")
def numpy_python() -> Path:
    pytest.importorskip("numpy", reason="numpy (in the test extras) is not installed")
    return Path(sys.executable)


def test_numpy(numpy_python, tmp_path):
    run_cycles(
        numpy_python, [str(APPS_DIR / "py" / "ckpt_numpy.py"), "400", "10", "0"], tmp_path, cycles=2
    )


def test_numpy_with_python_and_openblas_threads(numpy_python, tmp_path):
    run_cycles(
        numpy_python, [str(APPS_DIR / "py" / "ckpt_numpy.py"), "400", "10", "3"], tmp_path, cycles=2
    )


@pytest.fixture(scope="module")
def openmp_apps(tmp_path_factory) -> dict[str, Path]:
    """tests/apps/openmp/ckpt_openmp.c, and its Fortran sibling where gfortran is installed."""
    out = tmp_path_factory.mktemp("openmp")
    apps = {"c": out / "ckpt_openmp_c"}
    _gcc("-fopenmp", "-o", str(apps["c"]), str(OPENMP / "ckpt_openmp.c"))
    if shutil.which("gfortran"):
        apps["fortran"] = out / "ckpt_openmp_f"
        cmd = ["gfortran", "-O2", "-fopenmp", "-fno-range-check", "-o", str(apps["fortran"])]
        res = subprocess.run(
            [*cmd, str(OPENMP / "ckpt_openmp.f90")], capture_output=True, text=True, timeout=120
        )
        assert res.returncode == 0, res.stderr
    return apps


@pytest.mark.parametrize("language", ["c", "fortran"])
def test_openmp(openmp_apps, language, tmp_path):
    """GCC's OpenMP runtime (libgomp: its thread pool, barriers, tasks, spinning waits) with four
    threads on two CPUs, from C, and from Fortran writing a log through a Fortran unit; the log
    after the cycles is the uninterrupted run's."""
    if language not in openmp_apps:
        pytest.skip("gfortran is not installed (Debian: gfortran)")
    args = ["150", "10"] if language == "c" else ["150", "{work}"]
    run_cycles(openmp_apps[language], args, tmp_path, cycles=2)
    if language == "fortran":
        assert (tmp_path / "work" / "heat.log").read_bytes() == (
            tmp_path / "ref_work" / "heat.log"
        ).read_bytes()
