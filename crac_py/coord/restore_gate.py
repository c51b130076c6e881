"""The restore barrier (docs/PROTOCOL.md "restored"): each restarted process says `restored` once
its state is back, before any of its threads runs, and waits for `go`. The coordinator gives it
once every process the restart announced (`expect N`) has said so, or the announcement's deadline
passed; a process restarted with no announcement gets its go at once. So no process of a
restarted job or tree runs while another is still being restored (Python's Manager: a worker
connected to the manager's listener before the manager had made it again, and was refused).
A process whose restart fails (it says `restore_failed`, or disconnects before `restored`) fails
the whole restart: the others are told to stop instead of going on without it."""

from __future__ import annotations

from typing import Protocol


class Waiter(Protocol):
    def send(self, msg: dict) -> None: ...


class RestoreGate:
    def __init__(self) -> None:
        self.expected: int | None = None  # processes announced and not yet restored or gone
        self.deadline = 0.0
        self.waiting: list[Waiter] = []
        self.failure: str | None = None  # why the announced restart failed, until its deadline

    def expect(self, count: int, deadline: float) -> None:
        """A restart of COUNT processes begins (a second task of the same restart, announcing
        the same count while the first's is open, keeps it)."""
        if self.expected is not None and self.expected + len(self.waiting) == count:
            return
        self.expected, self.deadline, self.failure = count, deadline, None

    def pending(self, now: float) -> bool:
        """Processes of a restart are still being restored (checkpoints wait)."""
        return self.expected is not None and now < self.deadline

    def restored(self, peer: Waiter, now: float) -> list[Waiter]:
        """PEER is back: the processes to let go now."""
        self.waiting.append(peer)
        if self.expected is not None:
            self.expected -= 1
        return self._release(now)

    def gone(
        self, peer: Waiter, was_restarted: bool, said_restored: bool, now: float
    ) -> list[Waiter]:
        """PEER disconnected: it no longer holds the others back (nor waits itself)."""
        if peer in self.waiting:
            self.waiting.remove(peer)
        elif was_restarted and not said_restored and self.expected is not None:
            self.expected -= 1
        return self._release(now)

    def fail(self, why: str, now: float) -> list[Waiter]:
        """A process of the announced restart could not be restarted: the processes waiting now,
        to stop; those that say `restored` later until the deadline are stopped too (failed)."""
        if self.expected is None and not self.waiting:
            return []  # no announced restart under way: nothing else to stop
        self.failure = why
        self.expected = None
        out, self.waiting = self.waiting, []
        return out

    def failed(self, now: float) -> str | None:
        """Why the restart under way failed, or None."""
        return self.failure if self.failure is not None and now < self.deadline else None

    def expire(self, now: float) -> list[Waiter]:
        """The deadline passed: everyone waiting goes."""
        return self._release(now)

    def _release(self, now: float) -> list[Waiter]:
        if self.expected is not None and self.expected > 0 and now < self.deadline:
            return []
        self.expected = None
        out, self.waiting = self.waiting, []
        return out


__all__ = ["RestoreGate"]
