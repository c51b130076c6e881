"""C unit tests (tests/c/): each small program is compiled against crac's real sources with the
project's flags (build_native.COMMON_CFLAGS: -Wall -Wextra -Werror), run, and must exit 0 with a
"N passed, 0 failed" line. Some programs #include the source file they test, to reach its static
functions (the CRC table and SSE4.2 paths, the SHA-256 fallback, restart.c's note parser)."""

from __future__ import annotations

import hashlib
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import build_native  # noqa: E402
from crac_py.image import digest  # noqa: E402

pytestmark = pytest.mark.unit

C_DIR = Path(__file__).resolve().parent / "c"
# crac_image.h includes the header generated from the image format spec (build_native.py)
GEN_INCLUDE = f"-I{build_native.generate_image_header(ROOT).parent}"
INCLUDES = [
    "-Iinclude",
    GEN_INCLUDE,
    *build_native.LOADER_INCLUDES,
    "-Iupperhalf/cudart",
    "-Ibackends/cuda",
    f"-I{C_DIR}",
]

# test program -> the sources it is linked with (besides what it #includes), and libraries
PROGRAMS: dict[str, tuple[list[str], list[str]]] = {
    "test_crc32c": (["loader/image/crc32c_combine.c"], []),
    "test_sha256": (["loader/cross/lower_fds.c"], ["-lpthread", "-ldl"]),
    "test_upper_alloc": (["loader/confine/upper_alloc.c"], []),
    "test_fork_advice": (["loader/confine/fork_advice.c"], []),
    "test_dalloc": (["upperhalf/cudart/dalloc.c"], ["-lpthread"]),
    "test_restart_notes": ([], []),
    "test_cuda_xfer": (["backends/cuda/cuda_xfer.c"], []),
    "test_vdso_cfi": (["loader/boot/vdso_cfi.c"], []),
}
# restart.c is one part of the loader: the linker drops its functions the test never reaches, and
# with them their calls into the rest of the loader, rather than linking the whole loader.
EXTRA_LDFLAGS = {
    "test_restart_notes": ["-ffunction-sections", "-fdata-sections", "-Wl,--gc-sections"]
}

SUMMARY = re.compile(r"^(\d+) passed, (\d+) failed$", re.M)


def build(name: str, out_dir: Path) -> Path:
    sources, libs = PROGRAMS[name]
    exe = out_dir / name
    cmd = [
        "gcc",
        *build_native.COMMON_CFLAGS,
        *INCLUDES,
        str(C_DIR / f"{name}.c"),
        *sources,
        "-o",
        str(exe),
        *EXTRA_LDFLAGS.get(name, []),
        *libs,
    ]
    cp = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert cp.returncode == 0, f"{' '.join(cmd)}\n{cp.stdout}{cp.stderr}"
    return exe


def run(exe: Path, *args: str) -> str:
    cp = subprocess.run([str(exe), *args], capture_output=True, text=True, timeout=60)
    out = cp.stdout + cp.stderr
    m = SUMMARY.search(cp.stdout)
    assert m, f"{exe.name}: no summary line\n{out}"
    assert cp.returncode == 0 and m[2] == "0", f"{exe.name} failed (exit {cp.returncode})\n{out}"
    assert int(m[1]) > 0, out
    return cp.stdout


def test_every_program_is_listed():
    assert sorted(p.stem for p in C_DIR.glob("test_*.c")) == sorted(PROGRAMS)


@pytest.mark.parametrize(
    "name", ["test_crc32c", "test_upper_alloc", "test_fork_advice", "test_dalloc", "test_cuda_xfer"]
)
def test_c_program(name, tmp_path):
    run(build(name, tmp_path))


def test_sha256_and_page_digest(tmp_path):
    """The loader's SHA-256 (OpenSSL when present and the built-in fallback) and its page digest
    agree with hashlib and crac_py.digest, which `crac verify` uses."""
    exe = build("test_sha256", tmp_path)
    sparse = tmp_path / "sparse"
    with open(sparse, "wb") as f:
        f.write(b"head" * 1000)
        f.seek(3 * 4096)
        f.write(bytes(4096))  # an all-zero page that is data, not a hole: not hashed either
        f.seek(9 * 4096 + 17)
        f.write(b"tail")
    small = tmp_path / "small"
    small.write_bytes(bytes(range(256)) * 300 + b"x")
    out = run(exe, str(sparse), str(small))
    got = dict(line.split(" ", 1) for line in out.splitlines() if line.startswith("file"))
    assert got["file-sha256"] == hashlib.sha256(sparse.read_bytes()).hexdigest()
    assert got["file-sha256"] == digest.sha256_file(sparse)
    assert got["file-pages"] == digest.sha256_pages(sparse)
    assert got["file2-sha256"] == hashlib.sha256(small.read_bytes()).hexdigest()
    assert got["file2-pages"] == digest.sha256_pages(small)


def test_restart_notes_parser(tmp_path):
    """restart.c's parser of upper.core's notes: a whole set is accepted, truncated, garbled or
    missing notes give "image corrupted", never a crash."""
    run(build("test_restart_notes", tmp_path))


READELF_FDE = re.compile(r"FDE cie=\w+ pc=([0-9a-f]+)\.\.([0-9a-f]+)")
READELF_ROW = re.compile(r"^([0-9a-f]{16}) +(rsp|rbp)\+(\d+) +(.*)$")


def readelf_rules(dump: Path) -> dict[int, tuple[int, int, int]]:
    """Per address, readelf's CFA rule (DWARF register, offset) and rbp's save slot (0: none)."""
    cp = subprocess.run(
        ["readelf", "--debug-dump=frames-interp", str(dump)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert cp.returncode == 0, cp.stderr
    rules: dict[int, tuple[int, int, int]] = {}
    header: list[str] = []
    fde: tuple[int, int] | None = None
    rows: list[tuple[int, tuple[int, int, int]]] = []
    cie_row: tuple[int, int, int] | None = None

    def close() -> None:
        if fde is None:
            return
        spans = rows or [(fde[0], cie_row)]
        for k, (loc, rule) in enumerate(spans):
            end = spans[k + 1][0] if k + 1 < len(spans) else fde[1]
            for a in range(loc, end):
                rules[a] = rule
        rows.clear()

    for line in cp.stdout.splitlines():
        if m := READELF_FDE.search(line):
            close()
            fde = (int(m[1], 16), int(m[2], 16))
        elif line.split()[:2] == ["LOC", "CFA"]:
            header = line.split()
        elif m := READELF_ROW.match(line):
            cols = dict(zip(header[2:], m[4].split(), strict=False))
            rbp = cols.get("rbp", "u")
            saved = int(rbp[1:]) if rbp.startswith("c") else 0
            rule = (7 if m[2] == "rsp" else 6, int(m[3]), saved)
            if fde is None:
                cie_row = rule
            else:
                rows.append((int(m[1], 16), rule))
    close()
    return rules


def test_vdso_call_frame_information(tmp_path):
    """The rollback unwinds the real vDSO by the rows vdso_cfi.c reads from its .eh_frame: they
    agree with readelf's reading of the same vDSO at every address, and garbled copies are refused
    without a crash."""
    if shutil.which("readelf") is None:
        pytest.skip("readelf (binutils) is not installed: nothing to compare the rows with")
    exe = build("test_vdso_cfi", tmp_path)
    dump = tmp_path / "vdso.so"
    out = run(exe, str(dump))
    ours: dict[int, tuple[int, int, int]] = {}
    for line in out.splitlines():
        if line.startswith("row "):
            lo, hi, reg, off, rbp = line.split()[1:]
            for a in range(int(lo, 16), int(hi, 16)):
                ours[a] = (int(reg), int(off), int(rbp))
    theirs = readelf_rules(dump)
    assert theirs, "readelf found no call frame information in the vDSO"
    assert ours == theirs
