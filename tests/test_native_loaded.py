"""The record codec that runs is the compiled extension; no Python fallback exists."""
import importlib.machinery
import inspect

import kreplica._records as native
from kreplica import records


def test_the_module_is_a_shared_library():
    assert native.__file__.endswith(tuple(importlib.machinery.EXTENSION_SUFFIXES))
    assert native.__file__.endswith(".so")
    assert native.COMPILED is True


def test_public_names_are_the_compiled_objects():
    for name in ("encode_batch", "decode_records", "scan_batches", "restamp_batches", "crc32c"):
        fn = getattr(records, name)
        assert fn is getattr(native, name)
        # Compiled Cython functions are not Python functions: no bytecode runs for them.
        assert not inspect.isfunction(fn)
        assert type(fn).__name__ == "cython_function_or_method"
    for cls in (records.Record, records.RecordBatch, records.ScanResult):
        assert cls.__module__ == "kreplica._records"


def test_record_is_an_extension_type():
    r = records.Record(1, 2, b"k", b"v")
    # An extension type has no instance __dict__ and refuses new attributes.
    assert not hasattr(r, "__dict__")
    try:
        r.offset = 5
    except AttributeError:
        pass
    else:
        raise AssertionError("Record fields must be read-only")
    assert type(records.Record).__name__ == "type"
    assert records.Record.__flags__ & (1 << 9) == 0  # not a heap type: defined in C
