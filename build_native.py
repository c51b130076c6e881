"""Compile crac's native parts (the loader executable and the upper-half runtime) with gcc.

Used by setup.py's build_ext, and runnable by hand:

    python build_native.py [OUT_DIR]        # default: crac_py/_native

Each target is one entry of TARGETS: its source globs (relative to the repository root) and its
gcc flags. A target whose source list is empty is skipped, so a partial tree still builds.

The build is incremental and parallel: every source is compiled to its own object under
build/obj/<target>/ (one gcc per file, as many at once as there are CPUs), with gcc's dependency
list (-MMD) and the command beside it; an object is compiled again only when its source, a header it
includes or its command changed, and a target is linked again only when one of its objects or its
link command changed.

Every target finds build/crac_gen/crac_image_gen.h, the image records generated from
crac_py/image/format.py (include/crac_image.h includes it). Targets with uses_cuda need the CUDA
13 runtime headers and the real libcudart.so.13 (found by
crac_py.codegen.cudart_locate: $CUDA_HOME, /usr/local/cuda, or the nvidia-cuda-runtime/-crt
wheels that pyproject.toml's build requirements install) and the C sources
crac_py.codegen.generate generates from the API spec into build/crac_gen/ before they are
compiled.
"""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
import tomllib
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from crac_py.codegen.cuda12 import Gen12
    from crac_py.codegen.generate import GenResult

ROOT = Path(__file__).resolve().parent
DEFAULT_OUT = ROOT / "crac_py" / "_native"
GEN_DIR = ROOT / "build" / "crac_gen"
OBJ_DIR = ROOT / "build" / "obj"
# CRAC_BUILD_VERBOSE=1 prints every gcc command (a failing one is always printed in full).
VERBOSE = os.environ.get("CRAC_BUILD_VERBOSE", "") not in ("", "0")

# crac's version has one source, pyproject.toml; the loader gets it as CRAC_VERSION
# (include/crac_version.h) and Python reads the package metadata (crac_py.version()).
with (ROOT / "pyproject.toml").open("rb") as _f:
    VERSION: str = tomllib.load(_f)["project"]["version"]

COMMON_CFLAGS: tuple[str, ...] = (
    "-std=c11",
    "-D_GNU_SOURCE",
    "-O2",
    "-g",
    "-Wall",
    "-Wextra",
    "-Werror",
    "-fno-stack-protector",
)


# The TLS-free rule (docs/DECISIONS.md, "TLS-free build rule"): code that runs in the SIGSYS
# handler or with the upper fs live may not touch the lower libc (its errno, locks and caches live
# in TLS it does not have). Such files are listed in their target's `tls_free`, compiled with
# TLS_FREE_CFLAGS, and every symbol their objects leave undefined must be in TLS_FREE_ALLOWED,
# defined by another object of the group, or data of the same target (reading a lower variable
# needs no TLS). The model is CRIU's criu/pie/, checked the same way.
TLS_FREE_CFLAGS: tuple[str, ...] = (
    "-fno-tree-loop-distribute-patterns",  # no memset/memcpy calls made up from plain loops
    "-DCRAC_TLS_FREE=1",
)
# Pure functions gcc may emit or inline code may call: no errno, no locks, no TLS (IFUNC-resolved).
TLS_FREE_ALLOWED: frozenset[str] = frozenset(
    {"memcpy", "memset", "memmove", "memcmp", "strlen", "_GLOBAL_OFFSET_TABLE_"}
)
_DATA_TYPES = frozenset("BDRCGSV")  # nm: bss, data, read-only, common, small data, weak object


def _nm_symbols(obj: Path) -> list[tuple[str, str]]:
    """(name, nm type letter) of every symbol of OBJ, undefined ones with type U or w."""
    res = subprocess.run(["nm", "-P", str(obj)], capture_output=True, text=True, check=False)
    if res.returncode != 0:
        raise NativeBuildError(f"build_native: nm {obj} failed:\n{res.stderr}")
    out = []
    for line in res.stdout.splitlines():
        parts = line.split()
        if len(parts) >= 2:
            out.append((parts[0], parts[1]))
    return out


def tls_free_violations(
    group: dict[str, Path], others: Sequence[Path] = (), allowed: frozenset[str] = TLS_FREE_ALLOWED
) -> list[str]:
    """For GROUP (source -> object), one "SOURCE: uses SYMBOL ..." line per undefined symbol that
    is not allowed; OTHERS are the target's remaining objects (their data may be referenced)."""
    syms = {src: _nm_symbols(obj) for src, obj in group.items()}
    ok = set(allowed)
    for entries in syms.values():
        ok.update(name for name, kind in entries if kind not in "Uw")
    for obj in others:
        ok.update(name for name, kind in _nm_symbols(obj) if kind in _DATA_TYPES)
    return [
        f"{src}: uses `{name}`, which is neither allowed (TLS_FREE_ALLOWED) nor TLS-free code"
        for src, entries in syms.items()
        for name, kind in entries
        if kind in "Uw" and name not in ok
    ]


def check_tls_free(target: Target, units: list[CompileUnit], root: Path = ROOT) -> None:
    """Fails the build when TARGET's TLS-free sources reference anything outside the rule."""
    if not target.tls_free:
        return
    by_src = {u.cmd[u.cmd.index("-c") + 1]: u.obj for u in units}
    missing = [s for s in target.tls_free if s not in by_src]
    if missing:
        raise NativeBuildError(f"build_native: TLS-free sources not in {target.output}: {missing}")
    group = {s: by_src[s] for s in target.tls_free}
    others = [o for s, o in by_src.items() if s not in group]
    bad = tls_free_violations(group, others)
    if bad:
        raise NativeBuildError(
            "build_native: the TLS-free rule is broken (docs/DECISIONS.md, "
            '"TLS-free build rule"):\n  ' + "\n  ".join(bad)
        )


@dataclass(frozen=True)
class Target:
    """One gcc invocation: SOURCES -> OUT/output."""

    output: str
    source_globs: tuple[str, ...]
    cflags: tuple[str, ...]
    ldflags: tuple[str, ...] = ()
    libs: tuple[str, ...] = ()
    exclude: tuple[str, ...] = ()  # paths (relative to root) the globs must not pick up
    generated: tuple[
        str, ...
    ] = ()  # sources crac_py.codegen.generate writes into the gen directory
    uses_cuda: bool = False  # CUDA headers + generated sources (see the module docstring)
    cudart_abi: bool = False  # soname and symbol versions of the real libcudart.so.13
    static_fallback: bool = False  # linked without -static where no static libc is installed
    tls_free: tuple[str, ...] = ()  # sources held to the TLS-free rule (see check_tls_free)
    # The CUDA 12 layer (crac_py/codegen/cuda12.py): compiled against CUDA 12's headers, soname
    # libcudart.so.12, linked to this target's 13 library (built first). Skipped without CUDA 12.
    cudart12_over: str = ""
    needs_cuda12: bool = False  # built only where CUDA 12 is found (its generated headers)
    # A library of the output directory this one links (DT_NEEDED, found beside it): linked
    # after it (the MPICH-ABI MPI shim over shim/libmpi.so.40).
    links_shim: str = ""

    def sources(self, root: Path = ROOT) -> list[str]:
        """Source paths relative to root; each glob sorted, globs kept in the given order."""
        found: list[str] = []
        for pattern in self.source_globs:
            found.extend(
                sorted(
                    rel
                    for p in root.glob(pattern)
                    if (rel := str(p.relative_to(root))) not in self.exclude
                )
            )
        return found

    def _cuda_parts(self, gen: GenResult | None) -> tuple[list[str], list[str], list[str]]:
        """(include flags, generated sources, link flags) of a uses_cuda / cudart_abi target."""
        includes: list[str] = []
        generated: list[str] = []
        link: list[str] = []
        if self.uses_cuda:
            if gen is None:
                raise NativeBuildError(f"{self.output} needs the generated CUDA sources")
            includes = [f"-I{gen.out_dir}", f"-I{gen.cuda.include_dir}"]
            generated = [str(gen.out_dir / g) for g in self.generated]
        if self.cudart_abi and gen is not None:
            link = [f"-Wl,-soname,{gen.lib.soname}", f"-Wl,--version-script={gen.version_script}"]
        return includes, generated, link

    def _cuda12_parts(self, gen12: Gen12 | None) -> tuple[list[str], list[str]]:
        """(include flags, generated sources) of a cudart12_over target."""
        if not self.cudart12_over:
            return [], []
        if gen12 is None:
            raise NativeBuildError(f"{self.output} needs the generated CUDA 12 sources")
        return [f"-I{d}" for d in gen12.includes], [str(gen12.out_dir / "cudart12_fwd_gen.c")]

    def compile_units(
        self,
        obj_dir: Path,
        root: Path = ROOT,
        gen: GenResult | None = None,
        gen12: Gen12 | None = None,
    ) -> list[CompileUnit]:
        """One gcc -c per source file, each with its object and dependency file."""
        includes, generated, _ = self._cuda_parts(gen)
        if self.cudart12_over:
            includes, generated = self._cuda12_parts(gen12)
        units = []
        for src in [*self.sources(root), *generated]:
            stem = src.replace("/", "__").removesuffix(".c")
            obj = obj_dir / f"{stem}.o"
            cmd = [
                "gcc",
                *self.cflags,
                *(TLS_FREE_CFLAGS if src in self.tls_free else ()),
                "-Iinclude",
                f"-I{GEN_DIR.relative_to(ROOT)}",  # crac_image_gen.h, generated for every target
                *includes,
                "-MMD",
                "-MF",
                str(obj.with_suffix(".d")),
                "-c",
                src,
                "-o",
                str(obj),
            ]
            units.append(CompileUnit(obj, cmd))
        return units

    def link_command(
        self,
        objects: list[Path],
        out_dir: Path,
        gen: GenResult | None = None,
        gen12: Gen12 | None = None,
    ) -> list[str]:
        _, _, link = self._cuda_parts(gen)
        if self.cudart12_over and gen12 is not None:
            link = [
                "-Wl,-soname,libcudart.so.12",
                f"-Wl,--version-script={gen12.version_script}",
                "-Wl,-rpath,$ORIGIN",
            ]
        return [
            "gcc",
            *self.cflags,
            *self.ldflags,
            *link,
            *map(str, objects),
            # after the objects: ld binds their name@libcudart.so.13 references to it only then
            *([str(out_dir / self.cudart12_over)] if self.cudart12_over else []),
            *([str(out_dir / self.links_shim)] if self.links_shim else []),
            "-o",
            str(out_dir / self.output),
            *self.libs,
        ]


@dataclass(frozen=True)
class CompileUnit:
    obj: Path
    cmd: list[str]


# loader/ is one binary in folders by part (loader/README.md); its headers are found by name.
LOADER_INCLUDES: tuple[str, ...] = tuple(
    f"-Iloader/{part}" for part in ("boot", "confine", "cross", "ckpt", "image", "state", "restart")
)

TARGETS: dict[str, Target] = {
    # The `crac` command (setup.py installs it as the console script): it blocks the checkpoint
    # signal at its entry point, before the C library and Python start, then runs the Python CLI
    # with the interpreter crac is installed for (docs/DECISIONS.md).
    "crac": Target(
        output="crac",
        source_globs=("front/*.c",),
        cflags=(
            *COMMON_CFLAGS,
            "-fno-tree-loop-distribute-patterns",  # no memcpy/memset calls before libc is set up
            f'-DCRAC_PYTHON="{sys.executable}"',
        ),
        ldflags=("-static", "-Wl,-e,crac_front_entry"),
        static_fallback=True,
    ),
    "crac-loader": Target(
        output="crac-loader",
        source_globs=("loader/*/*.c",),
        cflags=(*COMMON_CFLAGS, "-fno-pie", *LOADER_INCLUDES, f'-DCRAC_VERSION="{VERSION}"'),
        # pthread_create is exported so every thread a lower-half library starts is registered
        # as lower (loader/cross/lower_spawn.c).
        ldflags=(
            "-no-pie",
            "-Wl,-Ttext-segment=0x10000000",
            "-Wl,--dynamic-list=loader/cross/lower_exports.list",
        ),
        libs=("-lpthread", "-ldl"),
        tls_free=(
            "loader/confine/confine_exe.c",
            "loader/confine/confine_listen.c",
            "loader/confine/confine_procpath.c",
            "loader/confine/confine_procview.c",
            "loader/confine/confine_seccomp.c",
            "loader/confine/confine_trap.c",
            "loader/confine/fork_advice.c",
            "loader/confine/peer_signal.c",
            "loader/confine/restorer.c",
            "loader/confine/signal_wrap.c",
            "loader/confine/upper_alloc.c",
            "loader/confine/vdso_stubs.c",
            "loader/cross/shadow_borrow.c",
            "loader/image/image_splicer.c",
        ),
    ),
    "libcrac-upper.so": Target(
        output="libcrac-upper.so",
        source_globs=("upperhalf/*.c",),
        cflags=(*COMMON_CFLAGS, "-fPIC"),
        ldflags=("-shared",),
        libs=("-lpthread",),
        tls_free=("upperhalf/suspend.c", "upperhalf/suspend_pending.c"),
    ),
}

# The simulated CUDA device (docs/SIM.md): two lower-half backend versions, the upper libcudart
# shim, and the same sim as a plain libcudart (the native baseline).
_SIM_BACKEND_EXCLUDE = ("backends/sim/sim_native.c", "backends/sim/sim_native_vars.c")
_SIM_NATIVE_EXCLUDE = ("backends/sim/sim_backend.c",)
for _v in (1, 2):
    TARGETS[f"libcrac-sim{_v}.so"] = Target(
        output=f"libcrac-sim{_v}.so",
        source_globs=("backends/sim/*.c",),
        cflags=(*COMMON_CFLAGS, "-fPIC", "-fvisibility=hidden", f"-DCRAC_SIM_VERSION={_v}"),
        ldflags=("-shared", "-Wl,-z,defs"),
        libs=("-lpthread",),
        exclude=_SIM_BACKEND_EXCLUDE,
        generated=("cudart_lower_gen.c",),
        uses_cuda=True,
    )
# The real CUDA runtime as a backend (docs/CUDA.md): built against the CUDA 13 headers; it loads
# NVIDIA's libcudart.so.13 and the driver at run time, so it builds on machines without either.
TARGETS["libcrac-cuda13.so"] = Target(
    output="libcrac-cuda13.so",
    source_globs=("backends/cuda/*.c",),
    cflags=(*COMMON_CFLAGS, "-fPIC", "-fvisibility=hidden", "-Ibackends/cuda"),
    ldflags=("-shared", "-Wl,-z,defs"),
    libs=("-lpthread", "-ldl"),
    generated=("cudart_cuda_gen.c",),
    uses_cuda=True,
)
# The same backend on NVIDIA's libcudart.so.12 (docs/CUDA.md "CUDA 12"): backends/cuda/cuda_v12.c
# calls the functions whose structures changed with CUDA 12's layouts.
TARGETS["libcrac-cuda12.so"] = Target(
    output="libcrac-cuda12.so",
    source_globs=("backends/cuda/*.c",),
    cflags=(
        *COMMON_CFLAGS,
        "-fPIC",
        "-fvisibility=hidden",
        "-Ibackends/cuda",
        "-DCRAC_CUDA_MAJOR=12",
    ),
    ldflags=("-shared", "-Wl,-z,defs"),
    libs=("-lpthread", "-ldl"),
    generated=("cudart_cuda_gen.c",),
    uses_cuda=True,
    needs_cuda12=True,
)
TARGETS["shim/libcudart.so.13"] = Target(
    output="shim/libcudart.so.13",
    source_globs=("upperhalf/cudart/*.c", "backends/sim/sim_errstr.c"),
    cflags=(*COMMON_CFLAGS, "-fPIC", "-Iupperhalf/cudart"),
    ldflags=("-shared",),
    libs=("-lpthread",),
    generated=("cudart_shim_gen.c",),
    uses_cuda=True,
    cudart_abi=True,
)
TARGETS["native/libcudart.so.13"] = Target(
    output="native/libcudart.so.13",
    source_globs=(
        "backends/sim/*.c",
        "upperhalf/cudart/dalloc.c",
        "upperhalf/cudart/rt_compose.c",
        "upperhalf/cudart/rt_pool.c",
    ),
    cflags=(*COMMON_CFLAGS, "-fPIC", "-DCRAC_SIM_VERSION=1", "-Iupperhalf/cudart"),
    ldflags=("-shared", "-Wl,-z,defs"),
    libs=("-lpthread",),
    exclude=_SIM_NATIVE_EXCLUDE,
    generated=("cudart_native_gen.c", "cudart_lower_gen.c"),
    uses_cuda=True,
    cudart_abi=True,
)


# The CUDA 12 layer (docs/CUDA.md "CUDA 12"): libcudart.so.12 over the shim and over the native sim.
for _kind in ("shim", "native"):
    TARGETS[f"{_kind}/libcudart.so.12"] = Target(
        output=f"{_kind}/libcudart.so.12",
        source_globs=("upperhalf/cudart12/*.c",),
        cflags=(*COMMON_CFLAGS, "-fPIC"),
        ldflags=("-shared",),
        cudart12_over=f"{_kind}/libcudart.so.13",
    )


# The upper MPI shim (docs/MPI.md): built where Open MPI's headers and library are installed
# (apt-get install libopenmpi-dev); its predefined handles are generated from them.
def _mpi_shim_target() -> None:
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    from crac_py.codegen import mpi_spec

    flavour = mpi_spec.OPENMPI
    header = mpi_spec.find_header(flavour)
    if header is None or not Path(flavour.library).exists():
        return
    TARGETS[f"shim/{flavour.soname}"] = Target(
        output=f"shim/{flavour.soname}",
        source_globs=(
            "upperhalf/mpi/*.c",
            "build/crac_gen/mpi_predef_gen.c",
            "build/crac_gen/mpi_mpich_gen.c",
            "build/crac_gen/mpi_funcs_gen.c",
            "build/crac_gen/mpi_refused_gen.c",
        ),
        # Open MPI's headers first (the shim's ABI); MPICH's after, for mpi_mpich_gen.c's
        # <mpi_proto.h> (it names MPICH's mpi.h by path).
        cflags=(
            *COMMON_CFLAGS,
            "-fPIC",
            "-Iupperhalf/mpi",
            f"-I{header.parent}",
            f"-I{mpi_spec.MPICH_HEADER.parent}",
        ),
        # -Bsymbolic-functions: the shim's own calls (MPI_Finalize's MPI_Barrier ...) stay in
        # it, never bound to the MPICH-ABI shim's functions of the same names above it.
        ldflags=("-shared", f"-Wl,-soname,{flavour.soname}", "-Wl,-Bsymbolic-functions"),
        libs=("-lpthread",),
        tls_free=("upperhalf/mpi/mpi_userop_tramp.c",),
    )
    # Programs built against MPICH (docs/MPI.md): its ABI over the shim above, under MPICH's
    # two sonames (Debian's libmpich.so.12, upstream's libmpi.so.12).
    if not mpi_spec.MPICH_HEADER.is_file():
        return
    for soname in mpi_spec.MPICH_SONAMES:
        TARGETS[f"shim/{soname}"] = Target(
            output=f"shim/{soname}",
            source_globs=(
                "upperhalf/mpich/*.c",
                "build/crac_gen/mpich_ompi_gen.c",
                "build/crac_gen/mpich_funcs_gen.c",
            ),
            # MPICH's headers only: mpich_ompi_gen.c names Open MPI's mpi.h by path.
            cflags=(
                *COMMON_CFLAGS,
                "-fPIC",
                "-Iupperhalf/mpich",
                "-Iupperhalf/mpi",
                f"-I{mpi_spec.MPICH_HEADER.parent}",
            ),
            # RPATH (not RUNPATH): the shim's libmpi.so.40 beside it, before LD_LIBRARY_PATH.
            ldflags=(
                "-shared",
                f"-Wl,-soname,{soname}",
                "-Wl,--disable-new-dtags,-rpath,$ORIGIN",
            ),
            libs=("-lpthread", "-ldl"),
            links_shim=f"shim/{flavour.soname}",
        )


def generate_mpi(root: Path = ROOT) -> None:
    """build/crac_gen/mpi_predef_gen.c, when the MPI shim is built."""
    if not any(name.startswith("shim/libmpi") for name in TARGETS):
        return
    from crac_py.codegen import mpi_spec

    try:
        mpi_spec.generate(root / GEN_DIR.relative_to(ROOT))
        mpi_spec.generate_mpich(root / GEN_DIR.relative_to(ROOT))
    except mpi_spec.MpiGenError as exc:
        raise NativeBuildError(f"cannot generate the MPI shim's handles: {exc}") from None


_mpi_shim_target()


class NativeBuildError(RuntimeError):
    """gcc failed; the message carries the command and the compiler's output."""


def generate(root: Path = ROOT) -> GenResult:
    """Run the API-spec code generator (needs the CUDA headers and the real libcudart)."""
    if str(root) not in sys.path:
        sys.path.insert(0, str(root))
    from crac_py.codegen import cuda_backend
    from crac_py.codegen.cudart_locate import CudaNotFoundError
    from crac_py.codegen.generate import CodegenError, generate

    try:
        gen = generate(root / GEN_DIR.relative_to(ROOT))
        cuda_backend.write(root / GEN_DIR.relative_to(ROOT))
    except (CudaNotFoundError, CodegenError) as exc:
        raise NativeBuildError(f"cannot generate the CUDA runtime glue: {exc}") from None
    print(f"build_native: CUDA headers from {gen.cuda.include_dir} ({gen.cuda.source})")
    print(f"build_native: {gen.coverage.line()}", flush=True)
    return gen


def generate12(root: Path, gen: GenResult) -> Gen12 | None:
    """The CUDA 12 layer's sources, or None (with a line) where CUDA 12 is not installed."""
    from crac_py.codegen.cuda12 import generate12 as gen12
    from crac_py.codegen.cudart_locate import CudaNotFoundError
    from crac_py.codegen.generate import CodegenError

    try:
        g = gen12(root / GEN_DIR.relative_to(ROOT) / "cu12", gen.cuda)
    except CudaNotFoundError as exc:
        print(f"build_native: skipping the CUDA 12 layer: {exc}")
        return None
    except CodegenError as exc:
        raise NativeBuildError(f"cannot generate the CUDA 12 layer: {exc}") from None
    print(f"build_native: CUDA 12 layer: {g.layer.coverage_line()}", flush=True)
    return g


def generate_image_header(root: Path = ROOT) -> Path:
    """build/crac_gen/crac_image_gen.h from the image format spec (crac_py/image/format.py);
    rewritten only when its text changes, so objects that include it stay up to date."""
    if str(root) not in sys.path:
        sys.path.insert(0, str(root))
    from crac_py.image.format import write_c_header

    return write_c_header(root / GEN_DIR.relative_to(ROOT))


def _fresh(output: Path, stamp: Path, cmd: list[str], inputs: list[Path]) -> bool:
    """OUTPUT exists, was made by CMD (recorded in STAMP), and is newer than every input."""
    try:
        if stamp.read_text() != shlex.join(cmd):
            return False
        built = output.stat().st_mtime_ns
        return all(p.stat().st_mtime_ns <= built for p in inputs)
    except OSError:
        return False


def _dependencies(unit: CompileUnit, root: Path) -> list[Path]:
    """What gcc listed (-MMD) as the object's inputs: its source and every header it included."""
    try:
        text = unit.obj.with_suffix(".d").read_text()
    except OSError:
        return [root / "missing-dependency-file"]
    words = text.replace("\\\n", " ").split(":", 1)[-1].split()
    return [root / w for w in words]


def _run(cmd: list[str], what: str, root: Path) -> None:
    try:
        proc = subprocess.run(cmd, cwd=root, capture_output=True, text=True)
    except FileNotFoundError as exc:
        raise NativeBuildError(f"gcc not found ({exc}); install gcc to build crac") from exc
    if proc.stdout or proc.stderr:
        sys.stdout.write(proc.stdout + proc.stderr)
    if proc.returncode != 0:
        raise NativeBuildError(
            f"building {what} failed (gcc exit {proc.returncode}):\n"
            f"{shlex.join(cmd)}\n{proc.stdout}{proc.stderr}"
        )


def _compile(unit: CompileUnit, root: Path) -> bool:
    """Compiles UNIT unless its object is up to date; True when it ran gcc."""
    stamp = unit.obj.with_suffix(".cmd")
    if _fresh(unit.obj, stamp, unit.cmd, _dependencies(unit, root)):
        return False
    unit.obj.parent.mkdir(parents=True, exist_ok=True)
    stamp.unlink(missing_ok=True)
    source = unit.cmd[unit.cmd.index("-c") + 1]
    print(shlex.join(unit.cmd) if VERBOSE else f"build_native: cc {source}", flush=True)
    _run(unit.cmd, unit.obj.name, root)
    stamp.write_text(shlex.join(unit.cmd))
    return True


def _front_for(target: Target, out_dir: Path, root: Path) -> Target:
    """The `crac` command runs `crac restart` without Python (docs/DECISIONS.md "Restart without
    Python") with the loader installed beside the Python package: the in-place crac_py/_native
    for an editable install, else the interpreter's site-packages (where pip puts this build)."""
    import sysconfig

    inplace = out_dir == (root / "crac_py" / "_native").resolve()
    native = out_dir if inplace else Path(sysconfig.get_paths()["purelib"]) / "crac_py" / "_native"
    return replace(target, cflags=(*target.cflags, f'-DCRAC_NATIVE_DIR_BUILT="{native}"'))


def build(out_dir: Path = DEFAULT_OUT, root: Path = ROOT, jobs: int | None = None) -> list[Path]:
    """Build every target with sources into out_dir; return the paths built."""
    out_dir = Path(out_dir).resolve()
    out_dir.mkdir(parents=True, exist_ok=True)
    obj_root = root / OBJ_DIR.relative_to(ROOT)
    generate_image_header(root)
    generate_mpi(root)
    gen: GenResult | None = None
    gen12: Gen12 | None = None
    plan: list[tuple[str, Target, list[CompileUnit]]] = []
    for name, target in TARGETS.items():
        if not target.sources(root):
            print(f"build_native: skipping {name}: no sources match {list(target.source_globs)}")
            continue
        if (target.uses_cuda or target.cudart12_over or target.needs_cuda12) and gen is None:
            gen = generate(root)
        if target.cudart12_over or target.needs_cuda12:
            gen12 = gen12 or (generate12(root, gen) if gen is not None else None)
            if gen12 is None:
                continue
        if name == "crac":
            target = _front_for(target, out_dir, root)
        obj_dir = obj_root / name.replace("/", "__")
        plan.append((name, target, target.compile_units(obj_dir, root, gen, gen12)))
    units = [u for _, _, us in plan for u in us]
    with ThreadPoolExecutor(max_workers=jobs or os.cpu_count() or 1) as pool:
        compiled = sum(pool.map(lambda u: _compile(u, root), units))
        for _, target, us in plan:
            check_tls_free(target, us, root)
        links = []
        for name, target, us in plan:
            output = out_dir / target.output
            output.parent.mkdir(parents=True, exist_ok=True)
            cmd = target.link_command([u.obj for u in us], out_dir, gen, gen12)
            stamp = obj_root / name.replace("/", "__") / "link.cmd"
            inputs = [u.obj for u in us]
            if target.cudart12_over:
                inputs.append(out_dir / target.cudart12_over)
            if target.links_shim:
                inputs.append(out_dir / target.links_shim)
            if not _fresh(output, stamp, cmd, inputs) or any(
                n in (TARGETS[name].cudart12_over, TARGETS[name].links_shim) for n, _, _ in links
            ):
                links.append((name, stamp, cmd))

        def link(item: tuple[str, Path, list[str]]) -> None:
            name, stamp, cmd = item
            stamp.unlink(missing_ok=True)
            print(shlex.join(cmd) if VERBOSE else f"build_native: link {name}", flush=True)
            try:
                _run(cmd, name, root)
            except NativeBuildError:
                if not TARGETS[name].static_fallback:
                    raise
                # No static C library here: ld.so then runs before the entry point (~1 ms).
                dynamic = [a for a in cmd if a != "-static"]
                print(f"build_native: linking {name} dynamically: {shlex.join(dynamic)}")
                _run(dynamic, name, root)
            stamp.write_text(shlex.join(cmd))

        # The CUDA 12 layer links against a 13 library, the MPICH shim against the MPI shim:
        # after it.
        def later(name: str) -> bool:
            return bool(TARGETS[name].cudart12_over or TARGETS[name].links_shim)

        list(pool.map(link, [x for x in links if not later(x[0])]))
        list(pool.map(link, [x for x in links if later(x[0])]))
    print(
        f"build_native: {compiled} of {len(units)} sources compiled, {len(links)} of "
        f"{len(plan)} targets linked",
        flush=True,
    )
    if gen is not None:
        # The sim kernel header, for programs built against an installed crac (sim_toolchain).
        (out_dir / "include").mkdir(exist_ok=True)
        shutil.copyfile(root / "include" / "crac_sim.h", out_dir / "include" / "crac_sim.h")
        # crac kernels (crac_py/kernels): the header its CPU compilation of .cu sources needs.
        for h in ("crac_cuda_kernel.h", "crac_kernels_abi.h"):
            shutil.copyfile(root / "include" / h, out_dir / "include" / h)
    return [out_dir / t.output for _, t, _ in plan]


def main(argv: list[str]) -> int:
    out = Path(argv[1]) if len(argv) > 1 else DEFAULT_OUT
    try:
        build(out)
    except NativeBuildError as exc:
        print(exc, file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
