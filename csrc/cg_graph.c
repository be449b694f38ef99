/* cg_graph.c: node records, edges, output metadata, sequence numbers, grad mode. */
#include "cg_graph.h"

#include <string.h>

static uint64_t cg_seq_counter = 0; /* protected by the GIL */
static CG_THREAD_LOCAL int cg_grad_mode_off = 0; /* 0 = enabled (the default in each thread) */

uint64_t cg_next_seq(void) { return ++cg_seq_counter; }

int cg_grad_enabled(void) { return !cg_grad_mode_off; }

void cg_set_grad_enabled(int enabled) { cg_grad_mode_off = !enabled; }

static CG_THREAD_LOCAL int cg_hooks_depth = 0;

int cg_saved_hooks_depth(void) { return cg_hooks_depth; }

void cg_set_saved_hooks_depth(int depth) { cg_hooks_depth = depth; }

void cg_node_init(cg_node_t *node, PyObject *self, int kind, uint64_t seq_nr)
{
    node->self = self;
    node->kind = kind;
    node->meta_gc = 0;
    node->seq_nr = seq_nr;
    node->n_edges = 0;
    node->edges = NULL;
    node->n_outputs = 0;
    node->meta = NULL;
    node->run_id = 0;
    node->run_slot = -1;
}

int cg_node_alloc_edges(cg_node_t *node, Py_ssize_t n)
{
    if (node->edges != NULL) {
        PyErr_SetString(PyExc_RuntimeError, "cgrad: node edges already allocated");
        return -1;
    }
    if (n <= CG_INLINE_EDGES) {
        node->edges = node->inline_edges;
    }
    else {
        node->edges = (cg_edge_t *)PyMem_Malloc(sizeof(cg_edge_t) * (size_t)n);
        if (node->edges == NULL) {
            PyErr_NoMemory();
            return -1;
        }
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        node->edges[i].node = NULL;
        node->edges[i].input_nr = 0;
    }
    node->n_edges = n;
    return 0;
}

void cg_node_set_edge(cg_node_t *node, Py_ssize_t i, cg_node_t *target, Py_ssize_t input_nr)
{
    cg_node_t *old = node->edges[i].node;
    if (target != NULL) {
        Py_INCREF(target->self);
    }
    node->edges[i].node = target;
    node->edges[i].input_nr = input_nr;
    if (old != NULL) {
        Py_DECREF(old->self);
    }
}

int cg_node_alloc_outputs(cg_node_t *node, Py_ssize_t n)
{
    if (node->meta != NULL) {
        PyErr_SetString(PyExc_RuntimeError, "cgrad: node outputs already allocated");
        return -1;
    }
    if (n <= 1) {
        node->meta = &node->inline_meta;
    }
    else {
        node->meta = (cg_meta_t *)PyMem_Malloc(sizeof(cg_meta_t) * (size_t)n);
        if (node->meta == NULL) {
            PyErr_NoMemory();
            return -1;
        }
    }
    for (Py_ssize_t i = 0; i < (n < 1 ? 1 : n); i++) {
        node->meta[i].ndim = -1;
        node->meta[i].dims = node->meta[i].inline_dims;
        node->meta[i].dtype = NULL;
    }
    node->n_outputs = n;
    return 0;
}

int cg_node_set_meta(cg_node_t *node, Py_ssize_t i, int ndim, const Py_ssize_t *dims,
                     PyObject *dtype)
{
    cg_meta_t *m = &node->meta[i];
    if (m->dims != m->inline_dims) {
        PyMem_Free(m->dims);
        m->dims = m->inline_dims;
    }
    if (ndim > CG_INLINE_DIMS) {
        m->dims = (Py_ssize_t *)PyMem_Malloc(sizeof(Py_ssize_t) * (size_t)ndim);
        if (m->dims == NULL) {
            m->dims = m->inline_dims;
            m->ndim = -1;
            PyErr_NoMemory();
            return -1;
        }
    }
    if (ndim > 0) {
        memcpy(m->dims, dims, sizeof(Py_ssize_t) * (size_t)ndim);
    }
    m->ndim = ndim;
    if (dtype != NULL && PyObject_IS_GC(dtype)) {
        node->meta_gc = 1;
    }
    Py_XINCREF(dtype);
    Py_XSETREF(m->dtype, dtype);
    return 0;
}

int cg_node_meta_matches(const cg_node_t *node, Py_ssize_t i, int ndim, const Py_ssize_t *dims)
{
    const cg_meta_t *m = &node->meta[i];
    if (m->ndim < 0) {
        return 1;
    }
    if (m->ndim != ndim) {
        return 0;
    }
    for (int d = 0; d < ndim; d++) {
        if (m->dims[d] != dims[d]) {
            return 0;
        }
    }
    return 1;
}

int cg_node_traverse(cg_node_t *node, visitproc visit, void *arg)
{
    for (Py_ssize_t i = 0; i < node->n_edges; i++) {
        if (node->edges[i].node != NULL) {
            Py_VISIT(node->edges[i].node->self);
        }
    }
    /* NumPy's dtypes are not GC objects: visiting them would do nothing but read one more
     * cache line of every node. */
    if (node->meta != NULL && node->meta_gc) {
        Py_ssize_t n = node->n_outputs < 1 ? 1 : node->n_outputs;
        for (Py_ssize_t i = 0; i < n; i++) {
            Py_VISIT(node->meta[i].dtype);
        }
    }
    return 0;
}

void cg_node_clear(cg_node_t *node)
{
    /* Detach the arrays from the struct first: a deallocator run by a Py_DECREF below may
     * reach this node again (through a weakref callback, say) and must see it empty. */
    cg_edge_t *edges = node->edges;
    Py_ssize_t n_edges = node->n_edges;
    cg_meta_t *meta = node->meta;
    Py_ssize_t n_meta = node->n_outputs < 1 ? 1 : node->n_outputs;
    node->edges = NULL;
    node->n_edges = 0;
    node->meta = NULL;
    node->n_outputs = 0;
    if (meta != NULL) {
        for (Py_ssize_t i = 0; i < n_meta; i++) {
            if (meta[i].dims != meta[i].inline_dims) {
                PyMem_Free(meta[i].dims);
            }
            Py_CLEAR(meta[i].dtype);
        }
        if (meta != &node->inline_meta) {
            PyMem_Free(meta);
        }
    }
    if (edges != NULL) {
        for (Py_ssize_t i = 0; i < n_edges; i++) {
            cg_node_t *t = edges[i].node;
            edges[i].node = NULL;
            if (t != NULL) {
                Py_DECREF(t->self);
            }
        }
        if (edges != node->inline_edges) {
            PyMem_Free(edges);
        }
    }
}
