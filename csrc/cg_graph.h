/* cg_graph.h: the backward-graph record embedded in every graph node.
 *
 * Each Python graph node (cgrad._C.Node, which is also the `ctx` of a Function) embeds one
 * cg_node_t. The struct keeps:
 *   - `self`: a BORROWED back-pointer to the Python object that embeds it;
 *   - `edges`: one per differentiable input of the forward op. Each edge holds a STRONG
 *     reference to the target node's Python object (Py_INCREF(target->self)) or is empty
 *     (target == NULL) when that input does not require grad;
 *   - `meta`: shape and dtype of each forward output, used to validate the gradients that
 *     flow into this node (the input-metadata of torch's engine). dtype is an OWNED ref.
 * The engine keeps no state in nodes (see Note [Run claims] in cg_engine.c).
 *
 * Note [No recursion on teardown]: releasing an edge may drop the last reference to a
 * node, whose dealloc releases its edges, and so on. The Python type that embeds cg_node_t
 * uses CPython's trashcan (Py_TRASHCAN_BEGIN) around its dealloc, which bounds the C stack
 * depth for arbitrarily long chains.
 */
#ifndef CGRAD_CG_GRAPH_H
#define CGRAD_CG_GRAPH_H

#include "cg_common.h"

typedef struct cg_node cg_node_t;

typedef struct {
    cg_node_t *node;      /* target, or NULL; holds a strong ref to node->self */
    Py_ssize_t input_nr;  /* which output of the target's forward this edge feeds */
} cg_edge_t;

typedef struct {
    int ndim;                               /* -1: unknown (no validation) */
    Py_ssize_t *dims;                       /* inline_dims or heap */
    Py_ssize_t inline_dims[CG_INLINE_DIMS];
    PyObject *dtype;                        /* owned, may be NULL */
} cg_meta_t;

enum { CG_NODE_FUNCTION = 0, CG_NODE_ACCUMULATE = 1 };

/* The fields the cycle collector reads (self, n_edges, edges, inline_edges) come first, so
 * that they share cache lines with the object's header; see Note [Compact node] in
 * cgrad/_C.pxd. */
struct cg_node {
    PyObject *self;        /* borrowed: the object embedding this struct */
    Py_ssize_t n_edges;
    cg_edge_t *edges;
    cg_edge_t inline_edges[CG_INLINE_EDGES];
    uint64_t seq_nr;
    int kind;              /* CG_NODE_FUNCTION or CG_NODE_ACCUMULATE */
    int meta_gc;           /* 1 if some meta[i].dtype is a GC object (never, for NumPy's) */
    Py_ssize_t n_outputs;
    cg_meta_t *meta;
    cg_meta_t inline_meta;
    /* Note [Run hints]: the id of the engine run that last claimed this node (0: none) and
     * the node's slot in that run. A lookup shortcut for the engine only; see cg_engine.c. */
    uint64_t run_id;
    Py_ssize_t run_slot;
};

/* Initialise a zeroed struct. `self` is borrowed. Cannot fail. */
void cg_node_init(cg_node_t *node, PyObject *self, int kind, uint64_t seq_nr);

/* Allocate n edges, all empty. Returns 0, or -1 (MemoryError). Must be called once. */
int cg_node_alloc_edges(cg_node_t *node, Py_ssize_t n);

/* Point edge i at `target` (may be NULL). Takes a new strong reference to target->self and
 * releases the edge's previous target, if any. Cannot fail. */
void cg_node_set_edge(cg_node_t *node, Py_ssize_t i, cg_node_t *target, Py_ssize_t input_nr);

/* Allocate n output metadata records (ndim = -1). Returns 0, or -1 (MemoryError). */
int cg_node_alloc_outputs(cg_node_t *node, Py_ssize_t n);

/* Record output i's shape (copied) and dtype (new reference taken; may be NULL).
 * Returns 0, or -1 (MemoryError). */
int cg_node_set_meta(cg_node_t *node, Py_ssize_t i, int ndim, const Py_ssize_t *dims,
                     PyObject *dtype);

/* 1 if output i's recorded shape equals (ndim, dims) or is unknown, else 0. */
int cg_node_meta_matches(const cg_node_t *node, Py_ssize_t i, int ndim, const Py_ssize_t *dims);

/* Visit every PyObject the struct owns (for tp_traverse). Returns the visit result. */
int cg_node_traverse(cg_node_t *node, visitproc visit, void *arg);

/* Drop every reference the struct owns and free its arrays; idempotent. May run arbitrary
 * deallocators (see Note [No recursion on teardown]). */
void cg_node_clear(cg_node_t *node);

/* Next sequence number (global counter, protected by the GIL). */
uint64_t cg_next_seq(void);

/* Thread-local grad mode. */
int cg_grad_enabled(void);
void cg_set_grad_enabled(int enabled);

/* Thread-local count of active saved-tensor hook contexts (torch's default hooks are
 * thread-local): 0 means save_for_backward stores tensors directly, with no Python call. */
int cg_saved_hooks_depth(void);
void cg_set_saved_hooks_depth(int depth);

#endif /* CGRAD_CG_GRAPH_H */
