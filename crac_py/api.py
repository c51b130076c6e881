"""crac's API for Python programs: what include/crac.h gives C programs.

    import crac_py.api as crac

    if crac.enabled():
        print("generation", crac.generation())

    @crac.before_checkpoint
    def flush():            # runs before every checkpoint, while the program's threads still run
        log.flush()

    @crac.after_restart
    def reopen():           # runs after every restart (on crac's hook thread)
        dataset.reopen()

    cache = bytearray(64 << 20)
    crac.exclude(cache)     # not saved: zeros after a restart (a cache that can be rebuilt)

    if crac.checkpoint() == "restart":
        ...                 # this process was restarted from the checkpoint just taken

Outside crac every call is a harmless no-op (enabled() is False, checkpoint() returns None,
hooks are kept but never run, exclude() still marks the memory MADV_DONTDUMP). The functions come
from crac's upper runtime, which crac preloads into the program; nothing here starts a thread
or touches the process until a hook is registered.
"""

from __future__ import annotations

import ctypes
import mmap
import os
import threading
from collections.abc import Callable
from typing import Any, Literal, TypeVar

Hook = TypeVar("Hook", bound=Callable[[], Any])

# include/crac.h and include/crac_hooks.h
_AFTER_CHECKPOINT, _AFTER_RESTART = 1, 2
_EV_PRE_SUSPEND = 0
_MADV_DONTDUMP = 16
_HOOK_FN = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_int, ctypes.c_void_p)

_lock = threading.Lock()
_before: list[Callable[[], Any]] = []
_after: list[Callable[[], Any]] = []
_restart_done = threading.Condition(_lock)
_restarts_handled = 0
_c_hook: Any = None  # the ctypes callback given to the upper runtime (kept alive here)
_waiter: threading.Thread | None = None


def _symbol(name: str) -> Any:
    """A function of crac's upper runtime, or None when not running under crac."""
    try:
        return getattr(ctypes.CDLL(None), name)
    except AttributeError:
        return None


def enabled() -> bool:
    """Whether this process runs under crac."""
    fn = _symbol("crac_is_enabled")
    return bool(fn and fn())


def generation() -> int:
    """Checkpoints written so far in this computation, restarts included (0 outside crac)."""
    fn = _symbol("crac_generation")
    return int(fn()) if fn and enabled() else 0


def restarts() -> int:
    """Restarts this computation has been through (0 in the original run and outside crac)."""
    fn = _symbol("crac_restart_count")
    return int(fn()) if fn and enabled() else 0


def checkpoint() -> Literal["checkpoint", "restart"] | None:
    """Checkpoints the whole process now and returns once the checkpoint is written
    ("checkpoint"), or, in a process restarted from it, once it runs again ("restart", after the
    after_restart hooks ran). None outside crac. Raises RuntimeError if the checkpoint failed
    (the program goes on; the previous checkpoint stays the one a restart finds)."""
    fn = _symbol("crac_checkpoint")
    if not fn or not enabled():
        return None
    rc = fn()
    if rc == _AFTER_CHECKPOINT:
        return "checkpoint"
    if rc == _AFTER_RESTART:
        _wait_restart_hooks()
        return "restart"
    raise RuntimeError("crac: the checkpoint failed (see crac's message on stderr)")


def before_checkpoint(fn: Hook) -> Hook:
    """Registers FN to run before every checkpoint (in registration order), while every thread
    still runs, on crac's hook thread. An exception in FN abandons that checkpoint. Usable as a
    decorator."""
    with _lock:
        _before.append(fn)
    _install()
    return fn


def after_restart(fn: Hook) -> Hook:
    """Registers FN to run after every restart (in registration order), on a thread of this
    module, as soon as the restarted process runs; checkpoint() returns "restart" only after they
    ran. Usable as a decorator."""
    with _lock:
        _after.append(fn)
    _install()
    return fn


def exclude(buffer: Any) -> int:
    """Leaves the memory of BUFFER (anything with a writable buffer interface: bytearray,
    mmap, numpy array) out of every checkpoint: after a restart it reads as zeros. Only whole
    pages inside the buffer are excluded (madvise MADV_DONTDUMP, which crac honours as a core
    dump does); returns the number of bytes excluded."""
    view = memoryview(buffer)
    if view.readonly:
        raise ValueError("crac.exclude needs writable memory")
    size = view.nbytes
    addr = ctypes.addressof(ctypes.c_char.from_buffer(view))
    page = mmap.PAGESIZE
    start = (addr + page - 1) & ~(page - 1)
    end = (addr + size) & ~(page - 1)
    if end <= start:
        return 0
    libc = ctypes.CDLL(None, use_errno=True)
    libc.madvise.argtypes = (ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int)
    if libc.madvise(ctypes.c_void_p(start), end - start, _MADV_DONTDUMP) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"madvise(MADV_DONTDUMP): {os.strerror(err)}")
    return end - start


def _run(hooks: list[Callable[[], Any]]) -> None:
    for fn in list(hooks):
        fn()


def _pre_suspend(_event: int, _arg: Any) -> int:
    try:
        _run(_before)
    except BaseException as exc:  # reported, and the checkpoint is abandoned
        import sys

        print(f"crac: error: before_checkpoint hook failed: {exc!r}", file=sys.stderr)
        return 1
    return 0


def _wait_restarts() -> None:
    global _restarts_handled
    wait = _symbol("crac_wait_for_restart")
    wait.argtypes = (ctypes.c_int,)
    seen = restarts()
    while True:
        seen = wait(seen)  # ctypes lets other Python threads run while this one waits
        if seen < 0:
            return
        try:
            _run(_after)
        finally:
            with _lock:
                _restarts_handled = seen
                _restart_done.notify_all()


def _wait_restart_hooks() -> None:
    if _waiter is None:
        return
    target = restarts()
    with _lock:
        _restart_done.wait_for(lambda: _restarts_handled >= target, timeout=600)


def _install() -> None:
    """Hooks into crac the first time one is registered (nothing outside crac)."""
    global _c_hook, _waiter
    if not enabled():
        return
    with _lock:
        if _c_hook is None and _before:
            register = _symbol("crac_upper_hook_register")
            if register is not None:
                register.argtypes = (
                    ctypes.c_char_p,
                    ctypes.c_int,
                    ctypes.c_int,
                    ctypes.c_uint,
                    _HOOK_FN,
                    ctypes.c_void_p,
                )
                hook = _HOOK_FN(_pre_suspend)
                if register(b"python.before_checkpoint", _EV_PRE_SUSPEND, 100, 0, hook, None) == 0:
                    _c_hook = hook
        if _waiter is None and _after:
            _waiter = threading.Thread(target=_wait_restarts, name="crac-restart", daemon=True)
            _waiter.start()
