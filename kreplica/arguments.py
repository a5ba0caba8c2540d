"""Type checks for the embedding API's arguments (``Cluster``, the admin calls, store addresses).

A wrong type must be refused at the door, naming the argument, instead of failing
deep inside with an unrelated ``TypeError`` or -- worse -- passing for a value:
``"0"`` is not partition 0 (it would be retried for two minutes as an unknown
partition), ``True`` is not partition 1, and the string ``"1001"`` is not the
broker list ``[1, 0, 0, 1]``.

Integers are taken as Python takes an index (``operator.index``: ``int`` and
NumPy's integers, never floats or strings) and returned as plain ``int``; ``bool``
is refused.  Each check raises the error class its caller names -- the Kafka
error of the call (INVALID_PARTITIONS for a partition count, say), or
``ValueError`` where the module already speaks in those.  Callers on the hot path
test ``type(x) is int`` themselves and only call in here when that fails.
"""
from __future__ import annotations

import operator
import re
from collections.abc import Iterable, Mapping
from typing import Any

from . import errors

Error = type[Exception]


def _shown(value: Any) -> str:
    return f"{type(value).__name__} {value!r}"


#: What Java's ``String.trim`` removes from both ends (U+0000 to U+0020, no more: a
#: no-break space stays), as Kafka's ConfigDef and its tools trim their text.
JAVA_BLANKS = "".join(map(chr, range(0x21)))

_JAVA_INTEGER = re.compile(r"[+-]?\d+")


def java_integer(text: str) -> bool:
    """Is ``text`` a number as Java's ``Integer.parseInt`` (Kafka's tools, its ConfigDef,
    Scala's ``toInt``) reads one, range aside: an optional sign, then decimal digits of any
    script -- but only of the Basic Multilingual Plane, since Java reads the text one
    UTF-16 unit at a time and a digit beyond it is two halves that are no digits.  Python's
    ``int()`` also takes ``1_000``, blanks around the digits and those other digits."""
    return _JAVA_INTEGER.fullmatch(text) is not None and all(c < "\U00010000" for c in text)


def java_split(text: str, separator: str) -> list[str]:
    """Java's ``String.split`` (limit 0), which kafka-topics.sh splits with: as str.split,
    but trailing empty strings are dropped (``"a,b,"`` is two items, ``","`` none); a text
    without the separator is itself (``""`` is one empty item)."""
    parts = text.split(separator)
    if len(parts) > 1:
        while parts and not parts[-1]:
            parts.pop()
    return parts


def _one(mapped: str, c: str) -> str:
    # Java's Character case mappings take one char to one char: where Python's would
    # give several (U+00DF to "SS"), Java's leaves the char as it is.
    return mapped if len(mapped) == 1 else c


def java_boolean(text: str) -> bool | None:
    """``text`` as Kafka's ConfigDef reads a boolean, blanks trimmed first by the caller:
    True or False where it equals "true" or "false" ignoring case as Java's
    ``String.equalsIgnoreCase`` ignores it (char by char, alike once upper-cased or once
    lower-cased after that, so U+017F LATIN SMALL LETTER LONG S, upper-cased to S, spells
    "falſe"), else None.  Python's ``lower()`` keeps the long s."""
    for word, value in (("true", True), ("false", False)):
        if len(text) == len(word) and all(
                a == b or _one(a.upper(), a) == b.upper()
                or _one(_one(a.upper(), a).lower(), a) == b
                for a, b in zip(text, word)):
            return value
    return None


def digits(text: str) -> bool:
    """Is ``text`` a whole number as files and addresses spell one: ASCII digits only?
    ``str.isdigit`` also takes "\u00b2", which ``int()`` refuses, and "\u0661", which it reads as 1."""
    return text.isascii() and text.isdigit()


def integer(value: Any, name: str, error: Error = errors.InvalidRequest, minimum: int | None = None) -> int:
    """``value`` as an ``int`` (not a bool, at least ``minimum``), or ``error`` naming ``name``."""
    if type(value) is not int:
        if isinstance(value, bool):
            raise error(f"{name} must be an integer, got {_shown(value)}")
        try:
            value = operator.index(value)
        except TypeError:
            raise error(f"{name} must be an integer, got {_shown(value)}") from None
    if minimum is not None and value < minimum:
        raise error(f"{name} must be an integer >= {minimum}, got {value}")
    return value


def integers(value: Any, name: str, error: Error = errors.InvalidRequest,
             minimum: int | None = None) -> list[int]:
    """A collection of integers (a list, tuple, set...; not a string) as a list of ``int``."""
    if isinstance(value, (str, bytes, bytearray, Mapping)) or not isinstance(value, Iterable):
        raise error(f"{name} must be a list of integers, got {_shown(value)}")
    return [integer(v, f"{name}[{i}]", error, minimum) for i, v in enumerate(value)]


def text(value: Any, name: str, error: Error = errors.InvalidRequest) -> str:
    """A str, handed on as a plain one: a subclass (a ``(str, Enum)`` member, say) may hash
    otherwise than its text, and would then miss, as a key, what is kept under the text."""
    if type(value) is str:
        return value
    if not isinstance(value, str):
        raise error(f"{name} must be a str, got {_shown(value)}")
    return str.__str__(value)


def texts(value: Any, name: str, error: Error = errors.InvalidRequest) -> list[str]:
    """A collection of strings; a bare string is refused rather than read as its characters."""
    if isinstance(value, (str, bytes, bytearray, Mapping)) or not isinstance(value, Iterable):
        raise error(f"{name} must be a list of str, got {_shown(value)}")
    return [text(v, f"{name}[{i}]", error) for i, v in enumerate(value)]


def mapping(value: Any, name: str, error: Error = errors.InvalidRequest) -> Mapping[Any, Any]:
    """A mapping, ``None`` meaning empty; a list of pairs is refused, not turned into a dict."""
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise error(f"{name} must be a dict, got {_shown(value)}")
    return value
