"""Check a program before the loader is exec'd, so bad input gets a clear one-line error.

Checks, in order: found, regular file, executable, ELF, 64-bit x86-64,
a program rather than an object/library, dynamically linked (PT_INTERP), CUDA runtime not linked
in statically, every imported CUDA function supported (crac_py.codegen.cuda_spec.SUPPORTED).
Each failure raises PreflightError("<program>: <problem>; <fix>"). A "#!" script is run as the
kernel runs it: resolve_script gives its interpreter (which preflight then checks) and the
arguments that go before the script's own.
"""

from __future__ import annotations

import mmap
import os
import shlex
import stat
import struct
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from elftools.elf.dynamic import DynamicSection
from elftools.elf.elffile import ELFFile
from elftools.elf.sections import Section

from crac_py.codegen import cuda_spec
from crac_py.launch import cuda12

# The CUDA runtimes crac stands in for (docs/CUDA.md): CUDA 13's, and the CUDA 12 layer over it.
CUDART_SONAMES = ("libcudart.so.13", cuda12.SONAME)

ELF_MAGIC = b"\x7fELF"
MAX_LISTED = 5

# Symbols that only a statically linked CUDA runtime defines inside a program.
_CUDART_DEFINED_MARKERS = frozenset(
    {
        "cudaGetDeviceCount",
        "cudaMalloc",
        "cudaLaunchKernel",
        "cudaMemcpy",
        "cudaGetLastError",
        "__cudaRegisterFatBinary",
        "__cudaRegisterFunction",
    }
)
_CUDART_STATIC_STRING = b"libcudart_static"


class PreflightError(Exception):
    """The program cannot run under crac; str() is one line naming the problem and the fix."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


@dataclass
class ProgramInfo:
    path: str  # absolute (not resolved through symlinks)
    interp: str  # PT_INTERP, e.g. /lib64/ld-linux-x86-64.so.2
    needed: list[str] = field(default_factory=list)  # DT_NEEDED, in order
    cuda_imports: list[str] = field(default_factory=list)  # undefined cuda*/__cuda* dynamic symbols
    # argv[0]: the program as launched, or a script's interpreter as its #! line names it
    argv0: str = ""
    script_args: list[str] = field(default_factory=list)  # a script's: [#! argument, script path]


def resolve_program(program: str, path_env: str | None = None) -> Path:
    """Find program the way a shell does: a name with '/' is a path, anything else is searched
    in PATH (first executable regular file wins; failing that, the first regular file, so the
    caller can say it is not executable)."""
    if program == "":
        raise PreflightError("empty program name; give the program to launch: crac launch PROGRAM")
    if "/" in program:
        path = Path(program)
        if not os.path.lexists(path):
            raise PreflightError(f"{program}: no such file; check the path")
        return path
    search = os.environ.get("PATH", os.defpath) if path_env is None else path_env
    fallback: Path | None = None
    for directory in search.split(os.pathsep):
        candidate = Path(directory or ".") / program
        if candidate.is_file():
            if os.access(candidate, os.X_OK):
                return candidate
            fallback = fallback or candidate
    if fallback is not None:
        return fallback
    raise PreflightError(
        f"{program}: command not found in PATH; give its path (e.g. ./{program}) or fix PATH"
    )


# How deep a #! script may name another script as its interpreter (the kernel's limit).
MAX_SCRIPT_DEPTH = 4


def _shebang(path: Path) -> tuple[str, list[str]] | None:
    """The interpreter and its optional argument a "#!" first line names, split as the kernel
    splits it (the interpreter up to the first blank, the rest of the line one argument); None
    when the file does not start with "#!"."""
    try:
        with open(path, "rb") as fh:
            head = fh.read(256)
    except OSError:
        return None
    if not head.startswith(b"#!"):
        return None
    line = head[2:].split(b"\n", 1)[0].decode(errors="surrogateescape").strip(" \t\r")
    cut = next((i for i, c in enumerate(line) if c in " \t"), len(line))
    arg = line[cut:].strip(" \t")
    return line[:cut], [arg] if arg else []


def resolve_script(program: str, path_env: str | None = None) -> tuple[str, list[str]]:
    """What the kernel's exec of PROGRAM runs: (PROGRAM, []) for a compiled program; for a "#!"
    script, (its interpreter as the line names it, [optional argument, the script's path]) to go
    before the script's own arguments, following an interpreter that is a script itself."""
    path = resolve_program(program, path_env)
    run, prefix = program, []
    script = program if "/" in program else str(path)  # a shell passes the path it found
    for depth in range(MAX_SCRIPT_DEPTH + 1):
        line = _shebang(Path(script))
        if line is None:
            return run, prefix
        if depth == MAX_SCRIPT_DEPTH:
            break
        interp, arg = line
        if not interp:
            raise PreflightError(f"{program}: its #! line names no interpreter; fix its first line")
        if not os.path.lexists(interp):
            raise PreflightError(
                f"{program}: its interpreter {interp} (the #! line) does not exist; install it or "
                "fix the #! line"
            )
        run, prefix = interp, [*arg, script, *prefix]
        script = interp
    raise PreflightError(
        f"{program}: its #! interpreters name each other more than {MAX_SCRIPT_DEPTH} deep; "
        "launch the last one directly"
    )


# Elf64_Sym: st_name, st_info, st_other, st_shndx, st_value, st_size.
_ELF64_SYM = struct.Struct("<IBBHQQ")
_STT_FUNC = 2
_SHN_UNDEF = 0


def _symbols(
    elf: ELFFile, data: bytes | mmap.mmap, section: Section
) -> Iterator[tuple[bytes, int, int]]:
    """(name, type, section index) of each symbol of SECTION, read straight from the file:
    pyelftools builds an object per symbol, seconds for a program that exports 100,000 of
    them (node). Names are bytes; a table or name outside the file raises ValueError."""
    offset, size = section["sh_offset"], section["sh_size"]
    if section["sh_entsize"] != _ELF64_SYM.size or offset + size > len(data):
        raise ValueError(f"symbol table {section.name} lies outside the file")
    names = elf.get_section(section["sh_link"])
    names_at, names_end = names["sh_offset"], names["sh_offset"] + names["sh_size"]
    if names_end > len(data):
        raise ValueError(f"string table of {section.name} lies outside the file")
    table = data[offset : offset + size - size % _ELF64_SYM.size]
    for name_at, info, _other, shndx, _value, _size in _ELF64_SYM.iter_unpack(table):
        start = names_at + name_at
        end = data.find(b"\0", start, names_end)
        if start >= names_end or end < 0:
            raise ValueError(f"a symbol name of {section.name} lies outside its string table")
        yield data[start:end], info & 0xF, shndx


def _symbol_tables(elf: ELFFile) -> list[Section]:
    return [s for s in elf.iter_sections() if s["sh_type"] in ("SHT_SYMTAB", "SHT_DYNSYM")]


GO_BUILD = (
    "CGO_ENABLED=1 go build -buildmode=pie (a program that uses no cgo package also needs "
    'import _ "runtime/cgo")'
)


def _check_go(program: str, elf: ELFFile, e_type: str, needed: list[str], *, static: bool) -> None:
    """A program built by Go's toolchain (its build id note) runs under crac built as a cgo PIE:
    Go links statically unless cgo is in the build; at a fixed address (Go's default) its own
    system calls come from outside crac's window and escape it (an exit during a checkpoint's
    write, its children's execs, ids after a restart); without cgo it sets its own thread
    pointer, which is not the C library's (docs/DECISIONS.md "Go programs")."""
    try:
        if elf.get_section_by_name(".note.go.buildid") is None:
            return
    except Exception:  # damaged section headers: the other checks say what is wrong
        return
    if static:
        why = "is a statically linked Go program (no PT_INTERP); crac needs a dynamic one"
    elif e_type == "ET_EXEC":
        why = (
            "is a Go program linked at a fixed address: its own system calls would not go "
            "through crac"
        )
    elif "libc.so.6" not in needed:
        why = "is a Go program built without cgo: its threads' pointer is not the C library's"
    else:
        return
    raise PreflightError(f"{program}: {why}; build it with {GO_BUILD}")


def _has_static_cudart(elf: ELFFile, data: bytes | mmap.mmap) -> bool:
    # Every name below has "cuda" in it: most programs end here. (mmap.find without a start
    # searches from the stream position, where pyelftools left it.)
    if data.find(b"cuda", 0) == -1:
        return False
    for section in _symbol_tables(elf):
        for name, typ, shndx in _symbols(elf, data, section):
            if typ != _STT_FUNC or shndx == _SHN_UNDEF or b"cuda" not in name:
                continue
            text = name.decode(errors="surrogateescape")
            if (
                text in _CUDART_DEFINED_MARKERS
                or text.startswith("__cudart")
                or ("cudart_static" in text)
            ):
                return True
    return data.find(_CUDART_STATIC_STRING, 0) != -1


DF_1_PIE = 0x08000000


def _dynamic_info(elf: ELFFile, data: bytes | mmap.mmap) -> tuple[list[str], list[str], bool, bool]:
    """(DT_NEEDED, undefined CUDA imports, has DT_SONAME, DF_1_PIE set)."""
    needed: list[str] = []
    has_soname = pie = False
    for section in elf.iter_sections():
        if isinstance(section, DynamicSection):
            for tag in section.iter_tags():
                if tag.entry.d_tag == "DT_NEEDED":
                    needed.append(tag.needed)
                elif tag.entry.d_tag == "DT_SONAME":
                    has_soname = True
                elif tag.entry.d_tag == "DT_FLAGS_1":
                    pie = bool(tag.entry.d_val & DF_1_PIE)
    imports: set[str] = set()
    dynsym = elf.get_section_by_name(".dynsym")
    if dynsym is not None and dynsym["sh_type"] == "SHT_DYNSYM" and data.find(b"cuda", 0) != -1:
        for name, _typ, shndx in _symbols(elf, data, dynsym):
            if shndx == _SHN_UNDEF and name.startswith((b"cuda", b"__cuda")):
                imports.add(name.decode(errors="surrogateescape"))
    return needed, sorted(imports), has_soname, pie


def _check_elf(program: str, path: Path, data: mmap.mmap, supported: frozenset[str]) -> ProgramInfo:
    try:
        elf = ELFFile(data)  # type: ignore[arg-type]  # mmap is a fine binary stream
        ei_class = elf["e_ident"]["EI_CLASS"]
        machine = elf["e_machine"]
        e_type = elf["e_type"]
    except Exception as exc:  # pyelftools raises several kinds on truncated/garbage input
        raise PreflightError(
            f"{program}: is not a valid ELF file ({exc}); give a compiled x86-64 Linux program"
        ) from None
    if ei_class != "ELFCLASS64":
        raise PreflightError(
            f"{program}: is a 32-bit program ({machine}); crac runs 64-bit x86-64 programs only: "
            "rebuild it for x86-64 (gcc -m64)"
        )
    if machine != "EM_X86_64":
        raise PreflightError(
            f"{program}: is built for {machine}, not x86-64; rebuild it for x86-64"
        )
    if e_type == "ET_REL":
        raise PreflightError(f"{program}: is an object file, not a program; link it first")
    if e_type not in ("ET_EXEC", "ET_DYN"):
        raise PreflightError(f"{program}: is an ELF {e_type} file, not a program")
    try:
        interp_seg = next(
            (seg for seg in elf.iter_segments() if seg["p_type"] == "PT_INTERP"), None
        )
        needed, cuda_imports, has_soname, pie = _dynamic_info(elf, data)
        static_cudart = _has_static_cudart(elf, data)
    except Exception as exc:  # damaged headers: any parse failure means the same thing
        raise PreflightError(f"{program}: is a damaged ELF file ({exc}); rebuild it") from None
    if interp_seg is None:
        if e_type == "ET_DYN" and has_soname:
            raise PreflightError(
                f"{program}: is a shared library, not a program; launch the program that uses it"
            )
        _check_go(program, elf, e_type, needed, static=True)
        raise PreflightError(
            f"{program}: is statically linked (no PT_INTERP); crac needs a dynamically linked "
            "program: link it dynamically (drop -static)"
        )
    _check_go(program, elf, e_type, needed, static=False)
    if e_type == "ET_DYN" and has_soname and not pie:
        # A library with an entry point and a PT_INTERP (libc.so.6, ld.so's friends) runs when
        # exec'd, but is no program to load (docs/DECISIONS.md, "Inputs that are not programs").
        raise PreflightError(
            f"{program}: is a shared library, not a program; launch the program that uses it"
        )
    interp = interp_seg.get_interp_name()
    if not os.path.exists(interp):
        raise PreflightError(
            f"{program}: its interpreter {interp} does not exist here; "
            "rebuild it against this system's libc"
        )
    if static_cudart:
        raise PreflightError(
            f"{program}: has the CUDA runtime linked in statically; "
            "rebuild with `nvcc -cudart shared` (then `crac kernels` builds its kernels for the "
            "sim: docs/SIM.md)"
        )
    other_cudart = [n for n in needed if n.startswith("libcudart.so.") and n not in CUDART_SONAMES]
    if other_cudart:
        # crac's runtimes are CUDA 13's libcudart.so.13 and its CUDA 12 layer: another major
        # version's runtime would be loaded into the program beside them (docs/CUDA.md).
        raise PreflightError(
            f"{program}: needs {other_cudart[0]}, but crac provides CUDA 13's libcudart.so.13 "
            "and CUDA 12's libcudart.so.12; rebuild it with CUDA 12 or 13 (`nvcc -cudart shared`)"
        )
    if cuda12.SONAME in needed and cuda_imports:
        # Its cuda* imports are libcudart.so.12's (CUDA 12 names: cudaGetDeviceProperties_v2 ...).
        try:
            supported = cuda12.supported()
        except cuda12.Cuda12Missing as exc:
            raise PreflightError(f"{program}: needs libcudart.so.12, but {exc}") from None
    unsupported = [name for name in cuda_imports if name not in supported]
    if unsupported:
        listed = ", ".join(unsupported[:MAX_LISTED])
        more = (
            f" (and {len(unsupported) - MAX_LISTED} more)" if len(unsupported) > MAX_LISTED else ""
        )
        why = "crac supports none yet" if not supported else f"crac supports {len(supported)}"
        raise PreflightError(
            f"{program}: imports CUDA functions crac does not support: {listed}{more}; "
            f"{why} (listed in docs/SIM.md and crac_py/codegen/cuda_spec.py): rewrite those "
            "calls with supported functions (or drop the CUDA feature that makes nvcc generate "
            "them: textures, surfaces, cooperative launches), or run the program without crac"
        )
    return ProgramInfo(
        path=os.path.abspath(path),
        interp=interp,
        needed=needed,
        cuda_imports=cuda_imports,
    )


def preflight(
    program: str,
    *,
    path_env: str | None = None,
    supported: frozenset[str] | None = None,
) -> ProgramInfo:
    """Resolve program like a shell and check that crac can launch it: the program itself, or
    for a "#!" script the interpreter that runs it (ProgramInfo.argv0 and script_args say how)."""
    supported = cuda_spec.SUPPORTED if supported is None else supported
    run, script_args = resolve_script(program, path_env)
    try:
        info = _check_file(run, path_env, supported)
    except PreflightError as exc:
        if not script_args:
            raise
        raise PreflightError(f"{program}: its interpreter {exc.message}") from None
    info.argv0 = run if script_args else program
    info.script_args = script_args
    return info


def _check_file(program: str, path_env: str | None, supported: frozenset[str]) -> ProgramInfo:
    path = resolve_program(program, path_env)
    try:
        st = path.stat()
    except OSError as exc:
        raise PreflightError(
            f"{program}: cannot be opened ({exc.strerror}); check the path"
        ) from None
    if stat.S_ISDIR(st.st_mode):
        raise PreflightError(f"{program}: is a directory; give the program file inside it")
    if not stat.S_ISREG(st.st_mode):
        raise PreflightError(f"{program}: is not a regular file; give a compiled program")
    if not os.access(path, os.X_OK):
        raise PreflightError(f"{program}: is not executable; make it so: chmod +x {program}")
    try:
        with open(path, "rb") as fh:
            head = fh.readline(256)
            if not head:
                raise PreflightError(f"{program}: is empty; give a compiled program")
            if not head.startswith(ELF_MAGIC):
                if b"\0" not in head:
                    raise PreflightError(
                        f"{program}: is a text file without a #! line, not an ELF program; "
                        f"if it is a shell script: crac launch /bin/sh {shlex.quote(program)}"
                    )
                raise PreflightError(
                    f"{program}: is not an ELF program; crac launches compiled x86-64 Linux "
                    "programs"
                )
            with mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) as data:
                return _check_elf(program, path, data, supported)
    except OSError as exc:
        raise PreflightError(
            f"{program}: cannot be read ({exc.strerror}); crac needs read permission on it"
        ) from None
