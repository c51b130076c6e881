"""Every mapping the program makes lands inside W, and the kernel [heap] (the lower half's) does not
grow because of the program (docs/ARCHITECTURE.md "Windows", invariants 2 and 4). A native run is
the control: the same checks must fail there."""

from __future__ import annotations

import os
import re
from dataclasses import dataclass

from conftest import W_END, W_START, describe, in_w, run_crac, run_native

LIBC_RE = re.compile(r"/libc(\.so\.6|-[0-9.]+\.so)$")
LDSO_RE = re.compile(r"/ld-linux-x86-64\.so\.2$|/ld-[0-9.]+\.so$")


@dataclass
class Mapping:
    start: int
    end: int
    perms: str
    path: str

    def inside_w(self) -> bool:
        return W_START <= self.start and self.end <= W_END

    def __str__(self) -> str:
        return f"{self.start:#x}-{self.end:#x} {self.perms} {self.path}"


@dataclass
class Report:
    maps: list[Mapping]
    addrs: dict[str, int]
    heap: dict[str, int]


def parse(stdout: bytes) -> Report:
    maps: list[Mapping] = []
    addrs: dict[str, int] = {}
    heap: dict[str, int] = {}
    in_maps = False
    for line in stdout.decode(errors="replace").splitlines():
        if line == "MAPS BEGIN":
            in_maps = True
        elif line == "MAPS END":
            in_maps = False
        elif in_maps:
            fields = line.split(maxsplit=5)
            lo, hi = fields[0].split("-")
            path = fields[5] if len(fields) > 5 else ""
            maps.append(Mapping(int(lo, 16), int(hi, 16), fields[1], path))
        elif line.startswith("ADDR "):
            _, name, value = line.split()
            addrs[name] = int(value, 16)
        elif line.startswith("HEAP "):
            _, when, size = line.split()
            heap[when] = int(size)
    assert maps, "no /proc/self/maps in the output"
    assert set(heap) == {"before", "after"}, f"HEAP lines missing: {heap}"
    expected = {
        "main", "printf", "main_stack", "argv", "malloc_small", "malloc_64m", "sbrk_before",
        "sbrk_after", "tls_main", "dlopen_func", "dlopen_data", "dlopen_tls", "anon_mmap",
        "file_mmap", "mremap_moved", "memalign_2m", "thread_stack", "tls_thread",
    }  # fmt: skip
    missing = expected - set(addrs)
    assert not missing, f"maps_check printed no ADDR line for {sorted(missing)}"
    return Report(maps, addrs, heap)


def confinement_problems(r: Report, binary: str, lib: str) -> list[str]:
    """Everything that violates confinement; empty when the run is confined."""
    problems = []
    for name, addr in r.addrs.items():
        if not in_w(addr):
            problems.append(f"ADDR {name} {addr:#x} is outside W")
    own = [m for m in r.maps if m.path in (binary, lib)]
    for path in (binary, lib):
        if not any(m.path == path for m in own):
            problems.append(f"no mapping of {path} at all")
    problems += [f"mapping outside W: {m}" for m in own if not m.inside_w()]
    if not any(LIBC_RE.search(m.path) and m.inside_w() for m in r.maps):
        problems.append("no libc.so.6 mapping inside W (the upper libc)")
    if not any(LDSO_RE.search(m.path) and m.inside_w() for m in r.maps):
        problems.append("no ld.so mapping inside W (the upper ld.so)")
    if r.heap["after"] != r.heap["before"]:
        problems.append(
            f"kernel [heap] changed from {r.heap['before']} to {r.heap['after']} bytes "
            "while the program malloc'd 200 MiB"
        )
    return problems


def _paths(apps) -> tuple[str, str]:
    return os.path.realpath(apps["maps_check"]), os.path.realpath(apps["dlopen_lib"])


def test_everything_inside_w(apps):
    binary, lib = _paths(apps)
    cp = run_crac([binary, lib], timeout=120)
    assert cp.returncode == 0, describe(cp)
    r = parse(cp.stdout)
    problems = confinement_problems(r, binary, lib)
    maps = "\n".join(map(str, r.maps))
    assert not problems, "\n".join(problems) + f"\n--- maps ---\n{maps}"


def test_native_control_fails_the_checks(apps):
    """Natively nothing is in W and the kernel heap grows: the checks above can fail."""
    binary, lib = _paths(apps)
    cp = run_native([binary, lib], timeout=120)
    assert cp.returncode == 0, describe(cp)
    r = parse(cp.stdout)
    inside = {name: hex(a) for name, a in r.addrs.items() if in_w(a)}
    assert not inside, f"natively these addresses are inside W: {inside}"
    assert r.heap["after"] > r.heap["before"], f"natively the kernel heap did not grow: {r.heap}"
    problems = confinement_problems(r, binary, lib)
    assert any("ADDR" in p for p in problems) and any("[heap]" in p for p in problems), problems
