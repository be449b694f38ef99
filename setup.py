"""Build the compiled core cgrad._C (csrc/cg_graph.c, cg_engine.c + cgrad/_C.pyx, which
includes cgrad/_C_*.pxi: cythonize tracks those includes, so editing one rebuilds _C) and the
sparse kernel module cgrad._sparse (csrc/cg_sparse.c + cgrad/_sparse.pyx), the array buffer
cache cgrad._memory (csrc/cg_memory.c + cgrad/_memory.pyx) and the fused recurrent-step
kernels cgrad._fused (csrc/cg_fused.c + cgrad/_fused.pyx).

Metadata lives in pyproject.toml; this file only declares the extension.
Switches (environment variables, as msgspec):
  CGRAD_DEBUG=1     -O0 -g, assertions on, Cython bound checks, -Wall -Wextra
  CGRAD_SANITIZE=1  -fsanitize=address,undefined (with -g)
  CGRAD_TSAN=1      -fsanitize=thread (with -g; ThreadSanitizer, run with LD_PRELOAD of
                    libtsan: see .ci/tsan; cannot be combined with CGRAD_SANITIZE)
  (neither)         a release build: no debug information (-g0, overriding the -g that
                    Python's own CFLAGS usually carry) and, on Linux, symbols stripped at
                    link time (-s): the .so files are several times smaller
  CGRAD_ANNOTATE=1  write Cython's annotated HTML next to the .pyx
Both modules get the same switches; cgrad._sparse is built with -O3 (portable: never
-march=native) and POSIX threads.
"""
import os
import sys
from glob import glob

import numpy
from Cython.Build import cythonize
from setuptools import Extension, setup


def _flag(name):
    return os.environ.get(name, "") not in ("", "0")


def get_ext_options(opt="-O2", threads=False):
    compile_args = ["-std=c11"] if os.name != "nt" else []
    link_args = []
    directives = {"language_level": 3, "boundscheck": False, "wraparound": False,
                  "cdivision": True, "embedsignature": True}
    macros = [("NPY_NO_DEPRECATED_API", "NPY_1_7_API_VERSION"),
              ("NPY_TARGET_VERSION", "NPY_1_25_API_VERSION")]
    if _flag("CGRAD_DEBUG"):
        compile_args += ["-O0", "-g", "-UNDEBUG", "-Wall", "-Wextra"]
        directives["boundscheck"] = True
    else:
        compile_args += [opt]
    if _flag("CGRAD_SANITIZE") and _flag("CGRAD_TSAN"):
        raise SystemExit("CGRAD_SANITIZE and CGRAD_TSAN cannot be combined")
    if _flag("CGRAD_SANITIZE"):
        compile_args += ["-fsanitize=address,undefined", "-fno-omit-frame-pointer", "-g"]
        link_args += ["-fsanitize=address,undefined"]
    elif _flag("CGRAD_TSAN"):
        compile_args += ["-fsanitize=thread", "-fno-omit-frame-pointer", "-g"]
        link_args += ["-fsanitize=thread"]
    elif not _flag("CGRAD_DEBUG") and os.name != "nt":
        compile_args += ["-g0"]
        if sys.platform.startswith("linux"):
            link_args += ["-s"]
    if threads and os.name != "nt":
        compile_args += ["-pthread"]
        link_args += ["-pthread"]
    return dict(include_dirs=["csrc", numpy.get_include()], define_macros=macros,
                extra_compile_args=compile_args, extra_link_args=link_args), directives


opts, directives = get_ext_options()
ext = Extension(
    "cgrad._C",
    sources=["cgrad/_C.pyx", "csrc/cg_graph.c", "csrc/cg_engine.c", "csrc/cg_apply.c",
             "csrc/cg_tfn.c", "csrc/cg_untracked.c"],
    depends=glob("csrc/*.h") + ["cgrad/_C.pxd", "cgrad/_csrc.pxd"],
    **opts,
)

sparse_opts, _ = get_ext_options(opt="-O3", threads=True)
sparse_ext = Extension(
    "cgrad._sparse",
    sources=["cgrad/_sparse.pyx", "csrc/cg_sparse.c"],
    depends=["csrc/cg_sparse.h"],
    **sparse_opts,
)

memory_opts, _ = get_ext_options(threads=True)
memory_ext = Extension(
    "cgrad._memory",
    sources=["cgrad/_memory.pyx", "csrc/cg_memory.c"],
    depends=["csrc/cg_memory.h"],
    **memory_opts,
)

# -fno-trapping-math lets GCC if-convert the branch-free selects of the float32 exp/tanh
# (it changes no result; cgrad never reads the floating-point exception flags)
fused_opts, _ = get_ext_options(opt="-O3")
fused_opts["extra_compile_args"] += ["-fno-trapping-math"] if os.name != "nt" else []
fused_ext = Extension(
    "cgrad._fused",
    sources=["cgrad/_fused.pyx", "csrc/cg_fused.c", "csrc/cg_gemm.c", "csrc/cg_attn.c"],
    depends=["csrc/cg_fused.h", "csrc/cg_gemm.h", "csrc/cg_attn.h", "csrc/cg_expf.h"],
    **fused_opts,
)

setup(ext_modules=cythonize([ext, sparse_ext, memory_ext, fused_ext], compiler_directives=directives,
                            annotate=_flag("CGRAD_ANNOTATE")))
