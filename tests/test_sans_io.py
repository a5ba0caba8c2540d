"""DESIGN.md's sans-I/O rule, enforced: replica/ and controller/ never open a socket, start a
thread, sleep, read the wall clock or draw global randomness -- time and randomness come in
through the injected Clock/Scheduler and random.Random, so the simulator can drive them."""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

import kreplica

ROOT = Path(kreplica.__file__).parent
FORBIDDEN = {"socket", "threading", "asyncio", "time", "datetime", "random", "subprocess", "select",
             "selectors", "concurrent", "multiprocessing", "signal"}


def _imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(), str(path))
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module.split(".")[0])
    return names


@pytest.mark.parametrize("package", ["replica", "controller"])
def test_the_sans_io_layers_import_no_clock_thread_socket_or_global_randomness(package):
    modules = sorted((ROOT / package).glob("*.py"))
    assert modules
    offenders = {p.name: sorted(_imports(p) & FORBIDDEN) for p in modules if _imports(p) & FORBIDDEN}
    assert not offenders, offenders
