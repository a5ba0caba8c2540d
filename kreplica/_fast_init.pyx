# cython: language_level=3
"""The loop behind :func:`kreplica.fast_init.fast_init`: set a frozen dataclass's
fields in C.  ``PyObject_GenericSetAttr`` is exactly what the dataclass's own
``object.__setattr__(self, name, value)`` calls ends in (the slot's descriptor);
only the Python-level lookups and calls in between are gone."""
from cpython.object cimport PyObject_GenericSetAttr


def set_fields(obj, tuple names, tuple values):
    """``object.__setattr__(obj, names[i], values[i])`` for every i."""
    cdef Py_ssize_t i
    if len(names) != len(values):
        raise ValueError(f"{len(names)} field names for {len(values)} values")
    for i in range(len(names)):
        PyObject_GenericSetAttr(obj, names[i], values[i])
