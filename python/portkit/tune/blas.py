"""The BLAS library's own thread pool, where it has one that torch.set_num_threads does not govern.

torch.set_num_threads sets torch's OpenMP count and, in builds linked with MKL, MKL's count. A
build linked with OpenBLAS's pthreads variant (Debian's python3-torch 1.13: ``BLAS_INFO=generic``,
``libblas.so.3`` -> ``openblas-pthread``) keeps a second pool: OpenBLAS's own threads, as many as
the cores by default, which every fp32 matrix product torch hands to BLAS uses whatever torch's
count is. This module finds that library among the process's loaded ones and reads and sets its
count through its C API (``openblas_get_num_threads`` / ``openblas_set_num_threads``), so the
tuner can time (and a plan can fix) the BLAS count beside torch's. OpenBLAS's OpenMP variant
follows omp_set_num_threads (torch's count) and its sequential variant has no pool: neither is
reported as separate.
"""
import ctypes
import os

_CACHE = {}


def _loaded_libraries():
    try:
        with open("/proc/self/maps", encoding="utf-8") as f:
            paths = {line.split()[-1] for line in f if "/" in line and ".so" in line}
    except OSError:
        return []
    # Only OpenBLAS's own names: other BLAS-like libraries mapped in (cuBLAS, a Python package's
    # renamed OpenBLAS) are not torch's CPU BLAS.
    return sorted(p for p in paths if "openblas" in os.path.basename(p).lower()
                  or os.path.basename(p).startswith("libblas.so"))


def _find():
    """(ctypes library, info dict) of a loaded OpenBLAS with its own pthreads pool, or (None, None)."""
    if "lib" in _CACHE:
        return _CACHE["lib"], _CACHE["info"]
    import torch  # noqa: F401 - torch loads its BLAS

    lib = info = None
    for path in _loaded_libraries():
        try:
            candidate = ctypes.CDLL(path)
            get, setter, parallel = (candidate.openblas_get_num_threads, candidate.openblas_set_num_threads,
                                     candidate.openblas_get_parallel)
        except (OSError, AttributeError):
            continue
        get.restype, get.argtypes = ctypes.c_int, []
        setter.restype, setter.argtypes = None, [ctypes.c_int]
        parallel.restype, parallel.argtypes = ctypes.c_int, []
        mode = parallel()  # 0 sequential, 1 pthreads, 2 OpenMP
        config = ""
        if hasattr(candidate, "openblas_get_config"):
            candidate.openblas_get_config.restype = ctypes.c_char_p
            candidate.openblas_get_config.argtypes = []
            config = (candidate.openblas_get_config() or b"").decode("ascii", "replace")
        if mode == 1:
            lib = candidate
            info = {"library": "openblas", "threading": "pthreads", "path": os.path.realpath(path),
                    "config": config, "default_threads": int(get())}
            break
    _CACHE["lib"], _CACHE["info"] = lib, info
    return lib, info


def separate_pool():
    """Information on the BLAS library whose thread count torch.set_num_threads does not set
    ({library, threading, path, config, default_threads}), or None when there is none."""
    return _find()[1]


def get_threads():
    """The separate BLAS pool's thread count, or None without one."""
    lib, _ = _find()
    return int(lib.openblas_get_num_threads()) if lib is not None else None


def set_threads(n):
    """Sets the separate BLAS pool's thread count (process-wide); returns False without one."""
    lib, _ = _find()
    if lib is None or n is None:
        return False
    lib.openblas_set_num_threads(int(n))
    return True
