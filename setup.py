"""Build the native log core.

Every ``kreplica/**/*.pyx`` becomes an extension module, linked with all of
``csrc/*.c``.  The extension is mandatory: there is no pure-Python fallback,
so a failed compile fails the install.
"""
import os
from glob import glob
from pathlib import Path

import numpy
from Cython.Build import cythonize
from setuptools import Extension, setup

HERE = Path(__file__).parent
C_SOURCES = sorted(str(p) for p in Path("csrc").glob("*.c"))
CFLAGS = ["-O3", "-std=c11", "-Wall", "-Wno-unused-function"]


def _extensions():
    # KREPLICA_BUILD_ONLY=path.pyx[,path.pyx] limits a developer build to some modules.
    only = {p for p in os.environ.get("KREPLICA_BUILD_ONLY", "").split(",") if p}
    exts = []
    for pyx in sorted(glob("kreplica/**/*.pyx", recursive=True)):
        if only and pyx not in only:
            continue
        module = pyx[:-4].replace("/", ".")
        exts.append(
            Extension(
                module,
                sources=[pyx, *C_SOURCES],
                include_dirs=["csrc", numpy.get_include()],
                extra_compile_args=CFLAGS,
                define_macros=[("NPY_NO_DEPRECATED_API", "NPY_1_7_API_VERSION")],
            )
        )
    return exts


setup(
    ext_modules=cythonize(
        _extensions(),
        language_level=3,
        compiler_directives={"boundscheck": False, "wraparound": False, "cdivision": True},
    ),
)
