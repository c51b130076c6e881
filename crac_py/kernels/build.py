"""Build a kernels library: the `__global__`/`__device__` code of a program's .cu sources compiled
for the CPU (g++ or clang++), which crac's sim loads to run the kernels of the nvcc-built program
(docs/SIM.md "Programs built by nvcc").

    crac kernels app.cu [more.cu ...] -o app.kernels.so

Steps, per source: `<<<...>>>` launch configurations are removed (the host code must compile but
never runs) and `extern __shared__` arrays become pointers to the launch's dynamic shared
memory; the source is compiled with include/crac_cuda_kernel.h force-included, which gives
`__global__` functions protected visibility; the object's protected functions are the kernels.
Their mangled names (nvcc's device names) are demangled to name each kernel in C++, and the
source is compiled again with a table entry per kernel appended. A last translation unit holds
the table the sim looks up (`crac_kernels_table`, include/crac_kernels_abi.h) and the block
runner. Host code is hidden and dropped by the linker (--gc-sections).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

from elftools.elf.elffile import ELFFile
from elftools.elf.sections import SymbolTableSection

from crac_py import paths

HEADER = "crac_cuda_kernel.h"
CXXFLAGS = (
    "-std=c++17",
    "-O2",
    "-fPIC",
    "-fvisibility=hidden",
    "-fsemantic-interposition",  # __device__ variables are reached through the GOT (patched)
    "-ffunction-sections",
    "-fdata-sections",
    "-Wno-attributes",  # visibility on static functions is ignored, harmlessly
)
LAUNCH_RE = re.compile(r"<<<.*?>>>", re.DOTALL)
# `extern __shared__ [__align__(N)] TYPE NAME[];` (dynamic shared memory): no storage of its own,
# it is the launch's sharedMem bytes, so it becomes a pointer to them.
DYN_SHARED_RE = re.compile(
    r"\bextern\s+__shared__\s+(?:__align__\s*\(\s*\w+\s*\)\s*)?([^;\[\]]+?)\s*\b(\w+)\s*\[\s*\]\s*;"
)


def rewrite(text: str) -> str:
    """The source as g++ sees it: launch configurations removed, dynamic shared memory bound."""
    text = LAUNCH_RE.sub("", text)
    return DYN_SHARED_RE.sub(
        lambda m: (
            f"{m.group(1)} *const {m.group(2)} = "
            f"reinterpret_cast<{m.group(1)} *>(crac_dynamic_shared());"
        ),
        text,
    )


class KernelsError(RuntimeError):
    """A source does not compile for the CPU, or no compiler/header is found."""


@dataclass(frozen=True)
class Kernel:
    mangled: str
    pretty: str
    expr: str | None  # a C++ expression naming the function, or None when it cannot be named
    symbol: str = ""


def include_dir() -> Path:
    """Directory holding crac_cuda_kernel.h (installed next to the native parts, or the repo's)."""
    for d in (paths.native_dir() / "include", Path(__file__).resolve().parents[2] / "include"):
        if (d / HEADER).is_file():
            return d
    raise KernelsError(f"{HEADER} not found; reinstall crac (pip install .)")


def cuda_include_dir() -> Path:
    from crac_py.codegen.cudart_locate import CudaNotFoundError, find_cuda

    try:
        return find_cuda().include_dir
    except CudaNotFoundError as exc:
        raise KernelsError(str(exc)) from None


def find_cxx(cxx: str | None) -> str:
    for cand in [c for c in (cxx, os.environ.get("CXX"), "g++", "clang++") if c]:
        path = shutil.which(cand)
        if path:
            return path
    raise KernelsError("no C++ compiler found (g++ or clang++; or set --cxx / $CXX)")


def _run(cmd: list[str], what: str) -> None:
    res = subprocess.run(cmd, capture_output=True, text=True)
    if res.returncode != 0:
        raise KernelsError(f"{what} failed:\n{' '.join(cmd)}\n{res.stderr.strip()}")


def _protected_functions(obj: Path) -> list[str]:
    with open(obj, "rb") as fh:
        elf = ELFFile(fh)
        names: list[str] = []
        for sec in elf.iter_sections():
            if not isinstance(sec, SymbolTableSection) or sec.name != ".symtab":
                continue
            for sym in sec.iter_symbols():
                if (
                    sym["st_info"]["type"] == "STT_FUNC"
                    and sym["st_shndx"] != "SHN_UNDEF"
                    and sym["st_other"]["visibility"] == "STV_PROTECTED"
                ):
                    names.append(sym.name)
    return sorted(set(names))


def _split_top(text: str, sep: str) -> list[str]:
    parts, depth, cur = [], 0, ""
    for ch in text:
        if ch in "<([":
            depth += 1
        elif ch in ">)]":
            depth -= 1
        if ch == sep and depth == 0:
            parts.append(cur)
            cur = ""
        else:
            cur += ch
    parts.append(cur)
    return parts


def kernel_expr(pretty: str) -> str | None:
    """`ns::k<float>(float*, int)` or `void k<int>(int*)` -> a C++ expression for the function
    pointer, or None when the function cannot be named from outside (anonymous namespace, ...)."""
    if "(anonymous namespace)" in pretty or "{lambda" in pretty or not pretty.endswith(")"):
        return None
    depth = 0
    for i in range(len(pretty) - 1, -1, -1):
        ch = pretty[i]
        if ch == ")":
            depth += 1
        elif ch == "(":
            depth -= 1
            if depth == 0:
                break
    else:
        return None
    name_part, params = pretty[:i], pretty[i + 1 : -1]
    name = _split_top(name_part.strip(), " ")[-1]  # templates carry their return type first
    if not name or "(" in name:
        return None
    return f"static_cast<void (*)({params})>(&{name})"


def _demangle(names: list[str]) -> list[str]:
    cxxfilt = shutil.which("c++filt")
    if not cxxfilt or not names:
        return list(names)
    res = subprocess.run([cxxfilt], input="\n".join(names) + "\n", capture_output=True, text=True)
    out = res.stdout.splitlines()
    return out if res.returncode == 0 and len(out) == len(names) else list(names)


def _c_string(s: str) -> str:
    return '"' + s.replace("\\", "\\\\").replace('"', '\\"') + '"'


def build(
    sources: list[Path],
    output: Path,
    *,
    cxx: str | None = None,
    extra: list[str] | None = None,
    keep: Path | None = None,
) -> list[Kernel]:
    """Compile sources into the kernels library output; returns the kernels it holds."""
    compiler = find_cxx(cxx)
    inc = [f"-I{include_dir()}", f"-I{cuda_include_dir()}"]
    for src in sources:
        if not src.is_file():
            raise KernelsError(f"{src}: no such file")
    tmp = Path(tempfile.mkdtemp(prefix="crac-kernels-", dir=keep))
    try:
        objects: list[Path] = []
        kernels: list[Kernel] = []
        for i, src in enumerate(sources):
            src = src.resolve()
            text = rewrite(src.read_text())
            body = f'#line 1 "{src}"\n{text}\n'
            flags = [
                *CXXFLAGS,
                "-include",
                HEADER,
                *inc,
                f"-iquote{src.parent}",
                f"-I{src.parent}",
                *(extra or []),
            ]
            p1 = tmp / f"src{i}.cpp"
            p1.write_text(body)
            o1 = tmp / f"src{i}.probe.o"
            _run(
                [compiler, *flags, "-c", str(p1), "-o", str(o1)],
                f"compiling {src.name} for the CPU",
            )
            names = _protected_functions(o1)
            pretties = _demangle(names)
            table: list[str] = []
            for j, (m, p) in enumerate(zip(names, pretties, strict=True)):
                k = Kernel(m, p, kernel_expr(p), f"crac_k_{i}_{j}")
                kernels.append(k)
                if k.expr is None:
                    continue
                table.append(
                    f'extern "C" __attribute__((visibility("hidden"))) const crac_kernel_entry '
                    f"{k.symbol} = crac::kernel_of<{k.expr}>::entry({_c_string(m)}, "
                    f"{_c_string(p)});"
                )
            p2 = tmp / f"src{i}.table.cpp"
            p2.write_text(body + "\n" + "\n".join(table) + "\n")
            o2 = tmp / f"src{i}.o"
            _run(
                [compiler, *flags, "-c", str(p2), "-o", str(o2)],
                f"compiling {src.name} for the CPU",
            )
            objects.append(o2)
        usable = [k for k in kernels if k.expr is not None]
        decls = "\n".join(
            f'extern "C" __attribute__((visibility("hidden"))) const crac_kernel_entry {k.symbol};'
            for k in usable
        )
        refs = ", ".join(f"&{k.symbol}" for k in usable) or "nullptr"
        tu = tmp / "table.cpp"
        tu.write_text(
            f"{decls}\n"
            f"static const crac_kernel_entry *const crac_entries[] = {{{refs}}};\n"
            'extern "C" __attribute__((visibility("default"))) const crac_kernels_table '
            f"crac_kernels_table = {{CRAC_KERNELS_ABI, {len(usable)}u, crac_entries, "
            "crac::run_block};\n"
        )
        ot = tmp / "table.o"
        _run(
            [
                compiler,
                *CXXFLAGS,
                "-DCRAC_KERNELS_TABLE_TU=1",
                "-include",
                HEADER,
                *inc,
                "-c",
                str(tu),
                "-o",
                str(ot),
            ],
            "compiling the kernel table",
        )
        output.parent.mkdir(parents=True, exist_ok=True)
        _run(
            [
                compiler,
                "-shared",
                "-o",
                str(output),
                *map(str, objects),
                str(ot),
                "-Wl,--gc-sections",
                "-lm",
            ],
            "linking the kernels library",
        )
        return kernels
    finally:
        if keep is None:
            shutil.rmtree(tmp, ignore_errors=True)
