"""Checking a batch of state-machine transitions against a legal-previous-state table.

Both state machines (partitions, replicas) write their table once, as data
(``VALID_PREVIOUS_STATES[target] = {legal previous states}``), and pass every
requested transition through :func:`split_legal` -- seed 000's
``assertValidPreviousStates``.  An illegal transition becomes a
:class:`~kreplica.errors.StateChangeFailed` for that key alone; the key's state
is left as it was and the legal ones proceed.
"""
from __future__ import annotations

import enum
from typing import Callable, Hashable, Iterable, Mapping, TypeVar

from .. import errors

K = TypeVar("K", bound=Hashable)
S = TypeVar("S", bound=enum.Enum)


def split_legal(
    keys: Iterable[K],
    state_of: Callable[[K], S],
    target: S,
    table: Mapping[S, frozenset[S]],
    describe: Callable[[K], str],
) -> tuple[list[K], dict[K, errors.KReplicaError]]:
    """(keys whose transition to ``target`` is legal, in sorted order; {illegal key: error})."""
    allowed = table[target]
    legal: list[K] = []
    failed: dict[K, errors.KReplicaError] = {}
    for key in sorted(set(keys)):  # type: ignore[type-var]
        current = state_of(key)
        if current in allowed:
            legal.append(key)
        else:
            failed[key] = errors.StateChangeFailed(
                f"{describe(key)}: illegal transition {current.value} -> {target.value}"
            )
    return legal, failed


def raise_if_failed(key: K, failed: Mapping[K, errors.KReplicaError]) -> None:
    if key in failed:
        raise failed[key]
