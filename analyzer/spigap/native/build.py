"""cffi build script for the compiled core (run by setup.py at install time).

Why cffi's out-of-line API mode and not a setuptools ``Extension`` with the
CPython C API or ctypes: the core is plain C99 with no Python objects, so
cffi lets it stay that way, while ``cdef`` is read from spigap_core.h, the
same header spigap_core.c includes, and the generated wrapper is compiled
against it: a struct that Python sees differently from C cannot build.
(ctypes needed a hand-kept copy of the struct; a CPython extension would need
hand-written argument parsing for every function.)

The result is the extension module ``spigap.native._spigap_core``, built by
setup.py as an *optional* extension: without a C compiler the install still
succeeds and spigap runs on its numpy engine (analyzer/spigap/native/__init__.py
says so once on stderr).
"""

from __future__ import annotations

import pathlib

import cffi

HERE = pathlib.Path(__file__).resolve().parent
ROOT = HERE.parents[2]        # the project root, where setup.py runs (analyzer/spigap/native/..)
HEADER = HERE / "spigap_core.h"
SOURCE = HERE / "spigap_core.c"

ffibuilder = cffi.FFI()
ffibuilder.cdef(HEADER.read_text())
ffibuilder.set_source(
    "spigap.native._spigap_core",
    '#include <stdint.h>\n#include "spigap_core.h"\n',
    # paths relative to the project root, where setup.py runs
    sources=[str(SOURCE.relative_to(ROOT))],
    include_dirs=[str(HEADER.parent.relative_to(ROOT))],
    extra_compile_args=["-O2", "-std=c99"],
)

if __name__ == "__main__":       # a developer's in-place build: python analyzer/spigap/native/build.py
    import os

    os.chdir(ROOT)
    ffibuilder.compile(tmpdir="analyzer", verbose=True)    # -> analyzer/spigap/native/_spigap_core*.so
