"""Where the TCP connections between processes of a restarted job meet again (docs/HOSTS.md,
"Connections between hosts"): each restarting process (a tree's root for its whole tree) reports
the connections its image holds that leave its tree, as the two addresses they had and the
address where it now listens for each; once every process the restart announced (`expect`) has
reported, each is told, per connection, the new address of its peer and whether it connects or
accepts, or that the peer is not part of the job (the connection then fails as a dropped one)."""

from __future__ import annotations

import asyncio
import contextlib
import time
from dataclasses import dataclass, field
from typing import Any

from crac_py.coord.proto import MAX_EXPECT

MAX_ENDS = 4096  # connections one report may carry
MAX_NAME = 128  # hex digits of a saved socket address
MAX_ADDR = 80  # "host:port" where an end listens now


def _valid_end(end: Any) -> bool:
    if not isinstance(end, dict):
        return False
    local, peer, addr = end.get("local"), end.get("peer"), end.get("addr")
    return (
        all(isinstance(x, str) and 0 < len(x) <= MAX_NAME for x in (local, peer))
        and all(c in "0123456789abcdef" for c in local + peer)
        and isinstance(addr, str)
        and 0 < len(addr) <= MAX_ADDR
    )


@dataclass
class Meeting:
    """One restart's reports: `expected` processes, until `deadline` (monotonic)."""

    expected: int
    deadline: float
    reports: list[tuple[int, list[dict[str, str]]]] = field(default_factory=list)
    wake: asyncio.Event = field(default_factory=asyncio.Event)

    def reported(self) -> int:
        return sum(n for n, _ in self.reports)

    def open(self, expected: int) -> bool:
        """Whether this meeting is still gathering the reports of a restart of EXPECTED."""
        return (
            self.expected == expected
            and self.reported() < self.expected
            and time.monotonic() < self.deadline
        )

    async def report(self, msg: dict[str, Any], timeout: float) -> dict[str, Any]:
        processes, ends = msg.get("processes"), msg.get("ends")
        if not (
            isinstance(processes, int)
            and 1 <= processes <= MAX_EXPECT
            and isinstance(ends, list)
            and len(ends) <= MAX_ENDS
            and all(_valid_end(e) for e in ends)
        ):
            return {"ok": False, "error": "connections needs processes and ends"}
        mine = [{k: e[k] for k in ("local", "peer", "addr")} for e in ends]
        self.reports.append((processes, mine))
        self.wake.set()
        deadline = min(self.deadline, time.monotonic() + timeout) if self.expected else 0.0
        while self.reported() < self.expected and time.monotonic() < deadline:
            self.wake.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.wake.wait(), max(0.0, deadline - time.monotonic()))
        self.wake.set()  # the others waiting see the count too
        others = [e for n, es in self.reports if es is not mine for e in es]
        answers = []
        for e in mine:
            peer = next(
                (o for o in others if o["local"] == e["peer"] and o["peer"] == e["local"]), None
            )
            if peer is None:
                answers.append({"addr": None})
            else:  # the end with the smaller saved name connects, the other accepts
                answers.append({"addr": peer["addr"], "connect": e["local"] < e["peer"]})
        return {"ok": True, "peers": answers, "complete": self.reported() >= self.expected}
