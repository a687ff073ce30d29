"""Build hook for the compiled core; all metadata lives in setup.cfg.

``cffi_modules`` compiles analyzer/native/spigap_core.c at install time (see
analyzer/native/build.py for why cffi). The extension is optional: when no C
compiler is there (an sdist on a bare machine) the install still succeeds
and spigap uses its numpy engine.
"""

from __future__ import annotations

from setuptools import find_namespace_packages, setup
from setuptools.command.build_ext import build_ext

# Every folder under analyzer/ (the source of the ``spigap`` import package,
# setup.cfg's package_dir) is a package, the data-only ones included; caches are not.
PACKAGES = ["spigap"] + ["spigap." + p for p in find_namespace_packages("analyzer", exclude=["*__pycache__*"])]


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
    packages=PACKAGES,
    cffi_modules=["analyzer/native/build.py:ffibuilder"],
    cmdclass={"build_ext": OptionalBuildExt},
)
