/* cg_engine.h: the backward engine.
 *
 * cg_engine_run walks the graph from the roots iteratively, counts dependencies, and runs
 * nodes from a ready queue ordered by sequence number (the most recently created ready node
 * first, as torch's ReadyQueue). Gradients arriving at the same node input are summed in a
 * per-input buffer (Note [Grad buffer ownership]). It never recurses and never calls back
 * into Python except through the callbacks below.
 */
#ifndef CGRAD_CG_ENGINE_H
#define CGRAD_CG_ENGINE_H

#include "cg_graph.h"

/* One gradient slot. `g` is an OWNED reference or NULL.
 *
 * Note [Grad buffer ownership]: `owned` is 1 only when `g` was allocated by the engine
 * itself (as the sum of two gradients); only such a buffer may be updated in place. The
 * first gradient that arrives is stored as is (owned = 0) and is never modified, since the
 * backward that produced it may return the same object for several inputs (Add returns
 * g, g) or keep it. This is the add_outgrads rule of HIPS autograd. */
typedef struct {
    PyObject *g;
    int owned;
} cg_buf_t;

typedef struct {
    void *ctx;
    /* Run a function node's backward. bufs[0 .. node->n_outputs) are BORROWED (g may be
     * NULL: no gradient arrived). Must write node->n_edges NEW references or NULLs into
     * out[]; the engine owns them afterwards. `needed` is NULL in a full run; in a pruned
     * run needed[e] says whether edge e leads to a target (gradients sent along other edges
     * are dropped, so the backward may skip them: exact needs_input_grad). Returns 0, or -1
     * with an exception set (the engine then releases whatever out[] holds). */
    int (*apply)(void *ctx, cg_node_t *node, cg_buf_t *bufs, const unsigned char *needed,
                 PyObject **out);
    /* Run an AccumulateGrad node: accumulate a gradient into its leaf. `grad` is BORROWED,
     * or NULL when no gradient arrived (only the hooks run then); `owned` says whether the
     * engine allocated it (then it may be stolen). 0 / -1. */
    int (*accumulate)(void *ctx, cg_node_t *node, PyObject *grad, int owned);
    /* Return a NEW reference to a + b (both BORROWED). If a_owned, a may be updated in place
     * and returned. NULL on error. */
    PyObject *(*add)(void *ctx, PyObject *a, PyObject *b, int a_owned);
    /* Free the saved tensors of a function node that has run (retain_graph=False). 0 / -1. */
    int (*release)(void *ctx, cg_node_t *node);
    /* Run the tensor hooks on the gradients in bufs[0 .. max(n_outputs, 1)) of a capture
     * target that the run does not execute (a leaf's hooks for an AccumulateGrad node), so
     * that what is captured is what they return, as torch. It may replace any bufs[i].g
     * (releasing the old reference, storing a NEW one, owned = 0). 0 / -1. */
    int (*hooks)(void *ctx, cg_node_t *node, cg_buf_t *bufs);
} cg_callbacks_t;

/* Run backward.
 *   roots[i], root_nrs[i], root_grads[i]: the gradient root_grads[i] (BORROWED, never NULL)
 *     flows into input root_nrs[i] of node roots[i] (never NULL).
 *   targets / target_nrs (n_targets >= 0): when n_targets > 0 the run is pruned to the nodes
 *     on a path to a target. Then:
 *     - run_targets == 0 (autograd.grad): AccumulateGrad nodes are not run, and the gradient
 *       that reaches input target_nrs[i] of targets[i] is written to captured[i] as a NEW
 *       reference (NULL when none arrived), after cb->hooks when targets[i] is not run
 *       itself. captured must have room for n_targets pointers.
 *     - run_targets == 1 (backward(inputs=)): the targets run too (an AccumulateGrad target
 *       accumulates, a function target runs its backward and hooks) when their gradient is
 *       ready, as torch; nothing is captured and captured may be NULL.
 *   keep_graph: when 0, cb->release is called on each function node after it runs.
 * Returns 0, or -1 with the exception raised by a callback (or MemoryError); on error every
 * buffer is released and captured[] (if any) holds only NULLs. Reentrant: see Note [Run claims]. */
int cg_engine_run(cg_node_t **roots, const Py_ssize_t *root_nrs, PyObject **root_grads,
                  Py_ssize_t n_roots, cg_node_t **targets, const Py_ssize_t *target_nrs,
                  Py_ssize_t n_targets, PyObject **captured, int run_targets, int keep_graph,
                  const cg_callbacks_t *cb);

/* Number of runs registered now, over all threads (each run is registered from its start to
 * its return, whether it succeeds or fails). For tests: it must be 0 when no backward is in
 * progress. */
Py_ssize_t cg_engine_active_runs(void);

/* In a child process after fork(): forget the runs of every thread but the calling one (see
 * Note [Runs across fork] in cg_engine.c). Call with the GIL held, before any backward. */
void cg_engine_after_fork_child(void);

#endif /* CGRAD_CG_ENGINE_H */
