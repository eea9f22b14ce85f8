"""Builds chaossloth._core: the C engine (engine/*.c) plus the CPython bridge (ext/*.c)."""

from glob import glob

from setuptools import Extension, setup

sources = sorted(glob("engine/*.c")) + sorted(glob("ext/*.c"))

setup(
    ext_modules=[
        Extension(
            "chaossloth._core",
            sources=sources,
            include_dirs=["include", "ext"],
            extra_compile_args=["-std=c11", "-O2", "-Wall", "-Wextra", "-Werror"],
            depends=sorted(glob("include/*.h") + glob("engine/*.h") + glob("ext/*.h")),
        )
    ]
)
