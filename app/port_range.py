"""A UDP port range, as ``serve --whip-udp-ports 50000-50100`` names it: the ports a
container's host publishes, which WHIP's ICE sockets bind within (``app.live.whip.ice``).
Pure Python, so the settings can check a range without aiortc installed."""

from __future__ import annotations

import random
from collections.abc import Iterator
from dataclasses import dataclass


@dataclass(frozen=True)
class PortRange:
    """Ports ``low`` to ``high``, both included."""

    low: int
    high: int

    @classmethod
    def parse(cls, text: str) -> PortRange:
        """``"50000-50100"``; ``ValueError`` with one line saying what is wrong."""
        low, sep, high = text.strip().partition("-")
        if not sep or not low.strip().isdigit() or not high.strip().isdigit():
            raise ValueError(f"'{text}' is not a port range: use LOW-HIGH, e.g. 50000-50100")
        first, last = int(low), int(high)
        if not 1024 <= first <= last <= 65535:
            raise ValueError(f"'{text}': ports must be 1024-65535, the first not above "
                             "the last")
        return cls(first, last)

    def __str__(self) -> str:
        return f"{self.low}-{self.high}"

    def __len__(self) -> int:
        return self.high - self.low + 1

    def candidates(self) -> Iterator[int]:
        """Every port once, from a random one on, wrapping around."""
        start = random.randrange(len(self))
        for i in range(len(self)):
            yield self.low + (start + i) % len(self)
