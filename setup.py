"""Build hook for the compiled core; the metadata lives in pyproject.toml (PEP 621).

``cffi_modules`` (a setup() keyword cffi adds; it has no pyproject.toml form) compiles
analyzer/spigap/native/spigap_core.c at install time (see analyzer/spigap/native/build.py
for why cffi). The extension is optional: when no C compiler is there (an sdist on a bare
machine) the install still succeeds and spigap uses its numpy engine.
"""

from __future__ import annotations

from setuptools import setup
from setuptools.command.build_ext import build_ext


class OptionalBuildExt(build_ext):
    """build_ext whose extensions may fail to build (no compiler): warn and go on."""

    def run(self):
        for ext in self.extensions:
            ext.optional = True
        try:
            super().run()
        except Exception as e:  # a missing compiler can surface before per-extension handling
            self.warn(f"spigap: the compiled core was not built ({e}); spigap will use its numpy engine")


setup(
    cffi_modules=["analyzer/spigap/native/build.py:ffibuilder"],
    cmdclass={"build_ext": OptionalBuildExt},
)
