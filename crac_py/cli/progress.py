"""Progress shown on standard error only when it is a terminal and the work has already taken
more than a second (quick commands and scripts never see it)."""

from __future__ import annotations

import sys
import threading
from types import TracebackType

from rich.console import Console
from rich.progress import (
    BarColumn,
    DownloadColumn,
    Progress,
    SpinnerColumn,
    TextColumn,
    TimeElapsedColumn,
)

DELAY_S = 1.0


class DelayedProgress:
    """A rich progress line (a bar when TOTAL bytes are known, else a spinner) that appears after
    DELAY seconds when standard error is a terminal, and vanishes when the work is done."""

    def __init__(
        self,
        description: str,
        total: float | None = None,
        *,
        delay: float = DELAY_S,
        enabled: bool | None = None,
    ):
        self.enabled = sys.stderr.isatty() if enabled is None else enabled
        columns: list = [SpinnerColumn(), TextColumn("{task.description}")]
        if total is not None:
            columns += [BarColumn(), DownloadColumn()]
        columns.append(TimeElapsedColumn())
        self._progress = Progress(*columns, console=Console(stderr=True), transient=True)
        self._task = self._progress.add_task(description, total=total)
        self._lock = threading.Lock()
        self._shown = False
        self._closed = False
        self._timer = threading.Timer(delay, self._show)
        self._timer.daemon = True

    @property
    def shown(self) -> bool:
        return self._shown

    def _show(self) -> None:
        with self._lock:
            if not self._closed:
                self._progress.start()
                self._shown = True

    def advance(self, amount: float) -> None:
        self._progress.advance(self._task, amount)

    def describe(self, description: str) -> None:
        self._progress.update(self._task, description=description)

    def __enter__(self) -> DelayedProgress:
        if self.enabled:
            self._timer.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._timer.cancel()
        with self._lock:
            self._closed = True
            if self._shown:
                self._progress.stop()
