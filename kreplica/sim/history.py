"""The recorded history of one simulated run: typed events, JSON lines, one hash.

Theory of operation (TigerBeetle VOPR).  Everything the simulator observes or
does -- a fault, an election, an acknowledged write, a consumer read, a
truncation, a violation -- is appended here as an :class:`Event` with the
virtual time it happened at.  Each event is serialised once to a canonical JSON
line (sorted keys, no spaces) and fed to a running SHA-256, so the history hash
is the fingerprint of the whole run: the same seed and options must give the
same hash, byte for byte, and ``--replay`` checks exactly that.  Nothing
nondeterministic (wall time, temporary paths, object ids) may enter an event.
"""
from __future__ import annotations

import hashlib
import json
from collections import deque
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Iterator

from ..fast_init import fast_init

HEADER_KIND = "run"


@fast_init
@dataclass(frozen=True, slots=True)
class Event:
    seq: int
    time_ms: int
    kind: str
    broker: int | None = None
    tp: str | None = None  # "topic-partition", as Kafka names partition dirs
    data: dict[str, Any] | None = None

    def to_json(self) -> str:
        row = {"seq": self.seq, "t": self.time_ms, "kind": self.kind}
        if self.broker is not None:
            row["broker"] = self.broker
        if self.tp is not None:
            row["tp"] = self.tp
        if self.data:
            row["data"] = self.data
        return _ENCODE(row)

    @classmethod
    def from_json(cls, line: str) -> "Event":
        row = json.loads(line)
        return cls(row["seq"], row["t"], row["kind"], row.get("broker"), row.get("tp"), row.get("data"))


def _plain(value: Any) -> Any:
    if isinstance(value, (tuple, set, frozenset)):
        return sorted(value) if isinstance(value, (set, frozenset)) else list(value)
    if hasattr(value, "topic") and hasattr(value, "partition"):
        return f"{value.topic}-{value.partition}"
    raise TypeError(f"{type(value).__name__} cannot enter the history")


# One canonical encoder for every line (json.dumps would build one per call).
_ENCODE = json.JSONEncoder(sort_keys=True, separators=(",", ":"), default=_plain).encode


class History:
    """Append-only events with a running hash; ``tail`` keeps the last events per partition."""

    def __init__(self, keep_all: bool = True, tail_per_partition: int = 40) -> None:
        self.keep_all = keep_all
        self.events: list[Event] = []
        self.lines: list[str] = []
        self._hash = hashlib.sha256()
        self._seq = 0
        self._tails: dict[str, deque[Event]] = {}
        self._tail_n = tail_per_partition
        # Kept even without keep_all, for violation traces: the last events of any kind, and
        # the last events touching no partition (crashes, pauses, partitions, phases).
        self._recent: deque[Event] = deque(maxlen=tail_per_partition)
        self._untargeted: deque[Event] = deque(maxlen=tail_per_partition)
        self.counts: dict[str, int] = {}

    def record(self, time_ms: int, kind: str, broker: int | None = None, tp: str | None = None,
               **data: Any) -> Event:
        ev = Event(self._seq, time_ms, kind, broker, tp, data or None)
        self._seq += 1
        line = ev.to_json()
        self._hash.update(line.encode())
        self._hash.update(b"\n")
        self.counts[kind] = self.counts.get(kind, 0) + 1
        if self.keep_all:
            self.events.append(ev)
            self.lines.append(line)
        self._recent.append(ev)
        if tp is not None:
            tail = self._tails.get(tp)
            if tail is None:
                tail = self._tails[tp] = deque(maxlen=self._tail_n)
            tail.append(ev)
        else:
            self._untargeted.append(ev)
        return ev

    @property
    def hash(self) -> str:
        return self._hash.hexdigest()

    def __len__(self) -> int:
        return self._seq

    def tail(self, tp: str | None, n: int | None = None) -> list[Event]:
        """The minimal trace around a violation: the last ``n`` events touching ``tp``, with
        the faults and phase changes (events touching no partition) recorded among them --
        the crash that caused a loss is part of its story.  For ``tp=None`` (a violation of
        the whole cluster: liveness, controller epoch) the last ``n`` events of any kind."""
        n = n or self._tail_n
        if tp is None:
            return list(self._recent)[-n:]
        events = list(self._tails.get(tp, ()))[-n:]
        if not events:
            return []
        first = events[0].seq
        return sorted(events + [e for e in self._untargeted if e.seq >= first], key=lambda e: e.seq)

    def of_kind(self, *kinds: str) -> Iterator[Event]:
        wanted = set(kinds)
        return (e for e in self.events if e.kind in wanted)

    def write_jsonl(self, path: str | Path) -> None:
        Path(path).write_text("".join(line + "\n" for line in self.lines))


def read_jsonl(path: str | Path) -> list[Event]:
    events = []
    for n, line in enumerate(Path(path).read_text().splitlines(), 1):
        if line.strip():
            try:
                events.append(Event.from_json(line))
            except (ValueError, KeyError, TypeError) as e:
                raise ValueError(f"line {n} is not a history event ({type(e).__name__}: {e})") from None
    return events


def hash_lines(lines: Iterable[str]) -> str:
    h = hashlib.sha256()
    for line in lines:
        h.update(line.encode())
        h.update(b"\n")
    return h.hexdigest()


def run_header(events: list[Event]) -> dict[str, Any]:
    """The seed and options of a recorded run (its first event), for ``--replay``."""
    if not events or events[0].kind != HEADER_KIND:
        raise ValueError("not a kreplica simulation history: the first event must be the run header")
    return dict(events[0].data or {})
