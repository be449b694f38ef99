# cython: language_level=3
# Mirror of csrc/*.h, one to one. Reference-ownership contracts are in the headers.
from cpython.object cimport PyObject, visitproc
from libc.stdint cimport uint64_t

cdef extern from "cg_graph.h":
    ctypedef struct cg_node_t

    ctypedef struct cg_edge_t:
        cg_node_t *node
        Py_ssize_t input_nr

    ctypedef struct cg_meta_t:
        int ndim
        Py_ssize_t *dims
        PyObject *dtype

    enum:
        CG_NODE_FUNCTION
        CG_NODE_ACCUMULATE

    ctypedef struct cg_node_t:
        PyObject *self
        uint64_t seq_nr
        int kind
        Py_ssize_t n_edges
        cg_edge_t *edges
        Py_ssize_t n_outputs
        cg_meta_t *meta

    void cg_node_init(cg_node_t *node, PyObject *self, int kind, uint64_t seq_nr) noexcept
    int cg_node_alloc_edges(cg_node_t *node, Py_ssize_t n) except -1
    void cg_node_set_edge(cg_node_t *node, Py_ssize_t i, cg_node_t *target,
                          Py_ssize_t input_nr) noexcept
    int cg_node_alloc_outputs(cg_node_t *node, Py_ssize_t n) except -1
    int cg_node_set_meta(cg_node_t *node, Py_ssize_t i, int ndim, const Py_ssize_t *dims,
                         PyObject *dtype) except -1
    int cg_node_meta_matches(const cg_node_t *node, Py_ssize_t i, int ndim,
                             const Py_ssize_t *dims) noexcept
    int cg_node_traverse(cg_node_t *node, visitproc visit, void *arg) noexcept
    void cg_node_clear(cg_node_t *node) noexcept
    uint64_t cg_next_seq() noexcept
    int cg_grad_enabled() noexcept
    void cg_set_grad_enabled(int enabled) noexcept
    int cg_saved_hooks_depth() noexcept
    void cg_set_saved_hooks_depth(int depth) noexcept

cdef extern from "cg_engine.h":
    ctypedef struct cg_buf_t:
        PyObject *g
        int owned

    ctypedef struct cg_callbacks_t:
        void *ctx
        int (*apply)(void *ctx, cg_node_t *node, cg_buf_t *bufs, const unsigned char *needed,
                     PyObject **out) except -1
        int (*accumulate)(void *ctx, cg_node_t *node, PyObject *grad, int owned) except -1
        PyObject *(*add)(void *ctx, PyObject *a, PyObject *b, int a_owned) except NULL
        int (*release)(void *ctx, cg_node_t *node) except -1
        int (*pre_capture)(void *ctx, cg_node_t *node, cg_buf_t *bufs) except -1

    int cg_engine_run(cg_node_t **roots, const Py_ssize_t *root_nrs, PyObject **root_grads,
                      Py_ssize_t n_roots, cg_node_t **targets, const Py_ssize_t *target_nrs,
                      Py_ssize_t n_targets, PyObject **captured, int keep_graph,
                      const cg_callbacks_t *cb) except -1

cdef extern from "cg_apply.h":
    ctypedef object (*cg_apply_impl_t)(object info, PyObject **args, Py_ssize_t nargs,
                                       PyObject *kwnames)
    int cg_apply_type_ready() except -1
    object cg_apply_new(object info, object owner, object fallback, cg_apply_impl_t impl)
    int cg_apply_check(object o) noexcept


cdef extern from "cg_tfn.h":
    int cg_tfn_type_ready() except -1
    object cg_tfn_new(object fn, object name, object tensor_type)


cdef extern from "cg_untracked.h":
    int cg_reg_add(PyObject *o, Py_ssize_t *slot) noexcept
    void cg_reg_remove(Py_ssize_t *slot) noexcept
    void cg_reg_flush() noexcept
    Py_ssize_t cg_reg_count() noexcept
    Py_ssize_t cg_reg_capacity() noexcept
    int cg_node_edges_untracked(const cg_node_t *node) noexcept
