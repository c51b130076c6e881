"""The CUDA runtime API functions crac supports (crossing the split process).

Preflight refuses a program that imports a `cuda*`/`__cuda*` function not listed here.
Empty for now: there is no CUDA backend yet. The API-spec engineer fills this set (and may
generate it from the spec).
"""

SUPPORTED: frozenset[str] = frozenset()
