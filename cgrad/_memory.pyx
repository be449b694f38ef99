# cython: language_level=3
"""cgrad._memory: the array buffer cache (csrc/cg_memory.c, Note [Array buffer cache]).

``install(limit_bytes, min_bytes)`` puts the cache in front of NumPy's default data
allocator for the calling context (NumPy's handler is a context variable: arrays made in
other threads keep NumPy's allocator; every array remembers the handler that allocated it,
so arrays of either kind are freed correctly whatever is installed later).
``configure`` changes the limits, ``empty_cache`` releases the cached blocks, ``stats``
returns the counters. Reference contract: the handler capsule is a new reference owned by
this module (kept in ``_HANDLER`` for the process's life: arrays hold their own references
to it); the default handler capsule is borrowed only for the duration of ``install``.
"""
cimport numpy as cnp
from cpython.pycapsule cimport PyCapsule_GetPointer, PyCapsule_New
from cpython.ref cimport PyObject
from libc.stdint cimport uint64_t, uint8_t
from libc.string cimport strncpy

cnp.import_array()

cdef extern from "cg_memory.h" nogil:
    ctypedef struct cg_mem_base:
        void *ctx
        void *(*malloc)(void *ctx, size_t size)
        void *(*calloc)(void *ctx, size_t nelem, size_t elsize)
        void *(*realloc)(void *ctx, void *ptr, size_t new_size)
        void (*free)(void *ctx, void *ptr, size_t size)
    void cg_mem_set_base(const cg_mem_base *base)
    void *cg_mem_malloc(void *ctx, size_t size)
    void *cg_mem_calloc(void *ctx, size_t nelem, size_t elsize)
    void *cg_mem_realloc(void *ctx, void *ptr, size_t new_size)
    void cg_mem_free(void *ctx, void *ptr, size_t size)
    void cg_mem_configure(size_t limit, size_t min_size)
    void cg_mem_empty()
    void cg_mem_stats(uint64_t out[9])

cdef extern from "numpy/arrayobject.h":
    ctypedef struct PyDataMemAllocator:
        void *ctx
        void *(*malloc)(void *ctx, size_t size)
        void *(*calloc)(void *ctx, size_t nelem, size_t elsize)
        void *(*realloc)(void *ctx, void *ptr, size_t new_size)
        void (*free)(void *ctx, void *ptr, size_t size)
    ctypedef struct PyDataMem_Handler:
        char name[127]
        uint8_t version
        PyDataMemAllocator allocator
    object PyDataMem_SetHandler(object handler)
    object PyDataMem_GetHandler()
    PyObject *PyDataMem_DefaultHandler

cdef PyDataMem_Handler _handler
_HANDLER = None


def install(size_t limit, size_t min_size):
    """Install the cache in this context (idempotent) with the given limits."""
    global _HANDLER
    cdef PyDataMem_Handler *default
    cdef cg_mem_base b
    if _HANDLER is None:
        default = <PyDataMem_Handler *>PyCapsule_GetPointer(
            <object>PyDataMem_DefaultHandler, "mem_handler")
        b.ctx = default.allocator.ctx
        b.malloc = default.allocator.malloc
        b.calloc = default.allocator.calloc
        b.realloc = default.allocator.realloc
        b.free = default.allocator.free
        cg_mem_set_base(&b)
        strncpy(_handler.name, b"cgrad_buffer_cache", 126)
        _handler.version = 1
        _handler.allocator.ctx = NULL
        _handler.allocator.malloc = cg_mem_malloc
        _handler.allocator.calloc = cg_mem_calloc
        _handler.allocator.realloc = cg_mem_realloc
        _handler.allocator.free = cg_mem_free
        _HANDLER = PyCapsule_New(&_handler, "mem_handler", NULL)
    cg_mem_configure(limit, min_size)
    PyDataMem_SetHandler(_HANDLER)


def uninstall():
    """Make NumPy's default allocator current again in this context (cached blocks stay
    until ``empty_cache``; arrays from the cache are freed through it as before)."""
    PyDataMem_SetHandler(<object>PyDataMem_DefaultHandler)


def active():
    """True if the cache is NumPy's current allocator in this context."""
    return _HANDLER is not None and PyDataMem_GetHandler() is _HANDLER


def configure(size_t limit, size_t min_size=0):
    """Cap on cached bytes (0: cache nothing, release all) and, if > 0, the smallest block
    size cached."""
    cg_mem_configure(limit, min_size)


def empty_cache():
    """Release every cached block to the allocator below."""
    with nogil:
        cg_mem_empty()


def stats():
    """dict: cached_bytes, cached_blocks, hits, misses, released, limit, min_size,
    live_bytes, high_water_bytes."""
    cdef uint64_t out[9]
    cg_mem_stats(out)
    return {"cached_bytes": out[0], "cached_blocks": out[1], "hits": out[2],
            "misses": out[3], "released": out[4], "limit": out[5], "min_size": out[6],
            "live_bytes": out[7], "high_water_bytes": out[8]}


def install_default():
    """At ``import cgrad``: install with the limit from ``CGRAD_ARRAY_CACHE_MB`` (default: a
    quarter of physical memory; 0: not installed). Returns True if installed."""
    import os
    v = os.environ.get("CGRAD_ARRAY_CACHE_MB", "").strip()
    if v:
        try:
            mb = float(v)
        except ValueError:
            raise ValueError(f"CGRAD_ARRAY_CACHE_MB must be a number of MiB, got {v!r}") from None
        if mb <= 0:
            return False
        limit = int(mb * 2 ** 20)
    else:
        try:
            limit = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE") // 4
        except (AttributeError, ValueError, OSError):   # pragma: no cover - non-POSIX
            limit = 1 << 30
    install(limit, 1 << 20)
    return True
