"""Build spnc's Cython extensions; OpenMP is added only when the compiler can link it."""
import glob
import os
import sys
import tempfile

from Cython.Build import cythonize
from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

# (module, uses OpenMP). New compiled modules are added here.
MODULES = [
    ("spnc._graph", False),
    ("spnc._structure", False),
    ("spnc._infer", True),
    ("spnc._route", True),
    ("spnc._probe", False),
    ("spnc._data", True),
    ("spnc.leaves._kernels", True),
    ("spnc.leaves._cltree", True),
    ("spnc.leaves._cltree_order", False),
    ("spnc._counts", True),
    ("spnc._mi", True),
    ("spnc.learn._oslrau", False),
    ("spnc.learn._learnspn", True),
    ("spnc.learn._prometheus", True),
    ("spnc.learn._routing", False),
    ("spnc.learn._pairs", False),
    ("spnc.learn._redirect_graph", False),
]

DIRECTIVES = {
    "language_level": "3",
    "boundscheck": False,
    "wraparound": False,
    "cdivision": True,
    "initializedcheck": False,
    "embedsignature": True,
}
if os.environ.get("SPNC_DEBUG_CYTHON") == "1":
    DIRECTIVES.update(boundscheck=True, wraparound=True, initializedcheck=True)

# -O3 vectorises the block loops; -fno-trapping-math lets the branch-free exp/log if-convert
# (FP flags are read only after a whole plain-double sweep, where a spurious one costs a
# redone block, never a wrong value); no -ffast-math: the kernels rely on IEEE inf/NaN.
CFLAGS = ["-O3", "-fno-math-errno", "-fno-trapping-math", "-Wno-unused-function", "-Wno-unreachable-code"]

OMP_PROBE = """#include <omp.h>
int main(void) { int n = 0;
#pragma omp parallel reduction(+:n)
n += 1;
return n > 0 ? 0 : 1; }
"""


def openmp_flags(compiler):
    """Return ['-fopenmp'] if a tiny OpenMP program compiles and links, else []."""
    if os.environ.get("SPNC_NO_OPENMP") == "1" or compiler.compiler_type != "unix":
        return []
    with tempfile.TemporaryDirectory() as tmp:
        src = os.path.join(tmp, "omp_probe.c")
        with open(src, "w") as f:
            f.write(OMP_PROBE)
        try:
            objs = compiler.compile([src], output_dir=tmp, extra_postargs=["-fopenmp"])
            compiler.link_executable(objs, os.path.join(tmp, "omp_probe"), extra_postargs=["-fopenmp"])
        except Exception:  # CompileError, LinkError, missing omp.h
            return []
    return ["-fopenmp"]


class BuildExt(build_ext):
    def build_extensions(self):
        flags = openmp_flags(self.compiler)
        if not flags:
            print("spnc: OpenMP unavailable, building serial kernels", file=sys.stderr)
        parallel = {name for name, uses_omp in MODULES if uses_omp}
        for ext in self.extensions:
            ext.extra_compile_args += CFLAGS
            if ext.name in parallel:
                ext.extra_compile_args += flags
                ext.extra_link_args += flags
        super().build_extensions()


# the C headers the kernels include: an edit to one alone must rebuild (setuptools compares
# the .so with its sources and these, not with what the C file includes)
HEADERS = sorted(glob.glob("spnc/**/*.h", recursive=True))

extensions = [
    Extension(name, [name.replace(".", "/") + ".pyx"], include_dirs=["spnc"], depends=HEADERS)
    for name, _ in MODULES
    if os.path.exists(name.replace(".", "/") + ".pyx")
]
setup(ext_modules=cythonize(extensions, compiler_directives=DIRECTIVES), cmdclass={"build_ext": BuildExt})
