"""The TLS-free build rule (docs/DECISIONS.md, "TLS-free build rule"): build_native.py checks the
undefined symbols of every TLS-free object against an allow-list and fails the build, naming the
file and the symbol, when one calls into libc (or into code outside the TLS-free group)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
import build_native  # noqa: E402

GOOD = """
#include <string.h>
#include "crac_rawsys.h"
extern int lower_counter;           /* data of the target: allowed */
int helper(int x);                  /* defined by another file of the group: allowed */
long tls_free_ok(char *dst, const char *src, int n)
{
    memcpy(dst, src, (size_t)n);
    return raw_syscall3(1 /* write */, 2, (long)dst, n) + lower_counter + helper(n);
}
"""
HELPER = "int helper(int x) { return x + 1; }\n"
DATA = "int lower_counter = 3;\nint not_tls_free(void) { return 0; }\n"
BAD = """
#include <stdio.h>
int not_tls_free(void);
int tls_free_bad(int x)
{
    printf("%d\\n", x);             /* stdio: locks and errno in TLS */
    return not_tls_free();          /* lower code outside the group */
}
"""


def _compile(tmp: Path, name: str, text: str) -> Path:
    src, obj = tmp / f"{name}.c", tmp / f"{name}.o"
    src.write_text(text)
    cmd = [
        "gcc",
        *build_native.COMMON_CFLAGS,
        *build_native.TLS_FREE_CFLAGS,
        f"-I{ROOT / 'include'}",
        "-c",
        str(src),
        "-o",
        str(obj),
    ]
    res = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr
    return obj


def test_violation_names_file_and_symbol(tmp_path: Path) -> None:
    bad = _compile(tmp_path, "bad", BAD)
    data = _compile(tmp_path, "data", DATA)
    errors = build_native.tls_free_violations({"loader/x/bad.c": bad}, [data])
    assert any("loader/x/bad.c" in e and "`printf`" in e for e in errors), errors
    assert any("`not_tls_free`" in e for e in errors), errors
    assert len(errors) == 2, errors


def test_allowed_symbols_pass(tmp_path: Path) -> None:
    group = {
        "good.c": _compile(tmp_path, "good", GOOD),
        "helper.c": _compile(tmp_path, "helper", HELPER),
    }
    assert build_native.tls_free_violations(group, [_compile(tmp_path, "data", DATA)]) == []


def test_build_fails_with_clear_message(tmp_path: Path) -> None:
    """check_tls_free, as build() calls it, raises NativeBuildError naming the file and symbol."""
    bad = _compile(tmp_path, "bad", BAD)
    target = build_native.Target(
        output="t", source_globs=(), cflags=(), tls_free=("loader/x/bad.c",)
    )
    unit = build_native.CompileUnit(bad, ["gcc", "-c", "loader/x/bad.c", "-o", str(bad)])
    with pytest.raises(build_native.NativeBuildError) as exc:
        build_native.check_tls_free(target, [unit])
    assert "TLS-free rule is broken" in str(exc.value)
    assert "loader/x/bad.c: uses `printf`" in str(exc.value)


def test_real_groups_hold() -> None:
    """Every TLS-free source the targets name exists; the built tree passes the rule (build()
    already checked it: this only guards against an empty or stale list)."""
    named = [s for t in build_native.TARGETS.values() for s in t.tls_free]
    assert "loader/confine/confine_trap.c" in named
    for src in named:
        assert (ROOT / src).is_file(), src
        assert "TLS-free" in (ROOT / src).read_text(), f"{src} does not say it is TLS-free"
