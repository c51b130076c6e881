"""`crac doctor`: can this machine run crac, and with which backends?

Each check returns a Check(name, status, detail). Status is OK, WARN, FAIL or INFO; a FAIL of a
required check (native parts built, kernel seccomp, windows free) makes `crac doctor` exit 1.
"""

from __future__ import annotations

import ctypes
import mmap
import os
import platform
import struct
import subprocess
from collections.abc import Callable
from dataclasses import asdict, dataclass

from crac_py import paths
from crac_py.launch import devices

OK, WARN, FAIL, INFO = "OK", "WARN", "FAIL", "INFO"

AT_HWCAP2 = 26
HWCAP2_FSGSBASE = 1 << 1
PM_SOFT_DIRTY = 1 << 55
PROBE_TIMEOUT_S = 20


@dataclass(frozen=True)
class Check:
    name: str
    status: str
    detail: str
    required: bool = False

    def as_json(self) -> dict[str, str]:
        d = asdict(self)
        del d["required"]
        return d

    @property
    def failed(self) -> bool:
        return self.required and self.status == FAIL


def _read(path: str) -> str | None:
    try:
        with open(path) as fh:
            return fh.read()
    except OSError:
        return None


def check_kernel() -> Check:
    release = platform.release()
    try:
        major, minor = (int(x) for x in release.split("-")[0].split(".")[:2])
    except ValueError:
        return Check("kernel", WARN, f"{release}: cannot parse the version; 5.9+ recommended")
    if (major, minor) >= (5, 9):
        return Check("kernel", OK, release)
    return Check("kernel", WARN, f"{release}: 5.9+ recommended (user-space FSGSBASE)")


def auxv_value(key: int) -> int | None:
    try:
        with open("/proc/self/auxv", "rb") as fh:
            data = fh.read()
    except OSError:
        return None
    for a_type, a_val in struct.iter_unpack("<QQ", data[: len(data) // 16 * 16]):
        if a_type == key:
            return a_val
    return None


def check_fsgsbase() -> Check:
    hwcap2 = auxv_value(AT_HWCAP2)
    if hwcap2 is None:
        return Check("FSGSBASE", WARN, "no AT_HWCAP2 in /proc/self/auxv; fs switches use a syscall")
    if hwcap2 & HWCAP2_FSGSBASE:
        return Check("FSGSBASE", OK, "wrfsbase usable: fast fs switch on crossings")
    return Check("FSGSBASE", WARN, "not enabled by the kernel; fs switches use arch_prctl (slower)")


def check_seccomp() -> Check:
    status = _read("/proc/self/status") or ""
    has_line = any(line.startswith("Seccomp:") for line in status.splitlines())
    actions = (_read("/proc/sys/kernel/seccomp/actions_avail") or "").split()
    if has_line and "trap" in actions:
        return Check("seccomp filter", OK, "SECCOMP_RET_TRAP available", required=True)
    if not has_line:
        detail = "kernel built without seccomp (no Seccomp: in /proc/self/status)"
    else:
        detail = f"SECCOMP_RET_TRAP not in actions_avail ({' '.join(actions) or 'unreadable'})"
    return Check("seccomp filter", FAIL, detail + "; crac needs seccomp-BPF", required=True)


def check_userfaultfd() -> Check:
    value = _read("/proc/sys/vm/unprivileged_userfaultfd")
    if value is None:
        return Check("userfaultfd", INFO, "no /proc/sys/vm/unprivileged_userfaultfd")
    who = "everyone" if value.strip() == "1" else "privileged users only"
    return Check("userfaultfd", INFO, f"available to {who}")


def soft_dirty_state() -> str:
    """'on' if the kernel tracks soft-dirty bits (checked on a page of our own), else 'off'."""
    try:
        with mmap.mmap(-1, mmap.PAGESIZE) as page:
            addr = ctypes.addressof(ctypes.c_char.from_buffer(page))
            with open("/proc/self/clear_refs", "w") as fh:
                fh.write("4")
            page[0] = 1
            with open("/proc/self/pagemap", "rb") as fh:
                fh.seek(addr // mmap.PAGESIZE * 8)
                (entry,) = struct.unpack("<Q", fh.read(8))
            return "on" if entry & PM_SOFT_DIRTY else "off"
    except (OSError, ValueError, TypeError, struct.error, BufferError):
        return "unknown"


def check_soft_dirty() -> Check:
    return Check("soft-dirty", INFO, soft_dirty_state())


def check_native() -> Check:
    try:
        loader = paths.loader()
        upper = paths.upper_runtime()
    except paths.NativeMissingError as exc:
        return Check("native parts", FAIL, str(exc), required=True)
    return Check("native parts", OK, f"{loader}, {upper.name}", required=True)


def probe_loader() -> dict[str, str]:
    """Run `crac-loader --probe` and parse its key=value lines; raises RuntimeError."""
    try:
        loader = paths.loader()
    except paths.NativeMissingError as exc:
        raise RuntimeError(str(exc)) from None
    try:
        proc = subprocess.run(
            [str(loader), "--probe"], capture_output=True, text=True, timeout=PROBE_TIMEOUT_S
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise RuntimeError(f"crac-loader --probe failed: {exc}") from None
    if proc.returncode != 0:
        last = (proc.stderr.strip() or proc.stdout.strip() or "no output").splitlines()[-1]
        raise RuntimeError(f"crac-loader --probe exited {proc.returncode}: {last}")
    values: dict[str, str] = {}
    for line in proc.stdout.splitlines():
        key, sep, value = line.partition("=")
        if sep:
            values[key.strip()] = value.strip()
    return values


def check_windows(probe: dict[str, str] | RuntimeError) -> Check:
    if isinstance(probe, RuntimeError):
        return Check("windows W/D free", FAIL, str(probe), required=True)
    w, d = probe.get("window_w", "?"), probe.get("window_d", "?")
    detail = f"W: {w}, D: {d}"
    extra = {k: v for k, v in probe.items() if k not in ("window_w", "window_d")}
    if extra:
        detail += " (" + ", ".join(f"{k}={v}" for k, v in extra.items()) + ")"
    status = OK if w == "free" and d == "free" else FAIL
    return Check("windows W/D free", status, detail, required=True)


def check_cuda_driver() -> Check:
    ctl = os.path.exists(devices.NVIDIACTL)
    lib = devices.find_libcuda()
    if ctl and lib:
        return Check("CUDA driver", OK, f"{devices.NVIDIACTL}, {lib}")
    missing = [n for n, ok in ((devices.NVIDIACTL, ctl), ("libcuda.so.1", lib)) if not ok]
    return Check("CUDA driver", INFO, f"not found ({', '.join(missing)}); sim backend only")


def check_gpus() -> Check:
    nodes = devices.gpu_nodes()
    return Check("GPUs", INFO, f"{len(nodes)}" + (f" ({', '.join(nodes)})" if nodes else ""))


def check_cuda_runtimes() -> Check:
    found = devices.cuda_runtimes()
    if not found:
        return Check("CUDA runtimes", INFO, "none (looked in CUDA_HOME, /usr/local/cuda, wheels)")
    return Check("CUDA runtimes", INFO, ", ".join(str(p) for p in found))


def check_cuda_backend() -> Check:
    why = devices.cuda_backend_note()
    if why is None:
        return Check("cuda backend", OK, "can drive this machine's GPUs (--device cuda)")
    return Check(
        "cuda backend",
        INFO,
        f"cannot reach a GPU here: {why}; --device cuda still loads NVIDIA's runtime, whose calls "
        "then fail as they do without crac",
    )


def check_backends() -> Check:
    backends = devices.usable_backends()
    if not backends:
        return Check("usable backends", WARN, "none (build the native parts: pip install .)")
    return Check("usable backends", OK, ", ".join(backends))


def run_checks() -> list[Check]:
    probe: dict[str, str] | RuntimeError
    try:
        probe = probe_loader()
    except RuntimeError as exc:
        probe = exc
    checks: list[Callable[[], Check]] = [
        check_kernel,
        check_fsgsbase,
        check_seccomp,
        check_userfaultfd,
        check_soft_dirty,
        check_native,
        lambda: check_windows(probe),
        check_cuda_driver,
        check_gpus,
        check_cuda_runtimes,
        check_cuda_backend,
        check_backends,
    ]
    return [check() for check in checks]


def exit_code(results: list[Check]) -> int:
    return 1 if any(c.failed for c in results) else 0
