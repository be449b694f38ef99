/* cg_engine.c: dependency counting, ready queue, gradient buffers, pruning.
 *
 * Note [Run claims]: all per-run state lives in the run (slots, buffers, and an open-
 * addressing table from node address to slot index), never in the nodes. So runs may nest
 * (a backward called from inside a backward) and runs on different threads may interleave
 * whenever a callback releases the GIL, even over shared nodes, without disturbing each
 * other. Each claimed node is INCREF'd for the duration of the run, so a callback can never
 * free a node the run still refers to.
 *
 * Note [Run hints]: finding a node's slot through the table costs a hash and a probe into a
 * table as large as the graph (a cache miss per lookup on big graphs), so a claim also
 * records (run id, slot) in the node itself, and lookups try that first. The hint is only a
 * cache: when a run claims a node whose hint belongs to another run that is still active
 * (a nested backward, or another thread's run over shared nodes), it first writes the
 * other run's slot into that run's table, where the other run's lookups will find it once
 * the hint no longer names it. Run ids are never reused, so a hint naming a finished run is
 * simply overwritten. Every step runs with the GIL held.
 *
 * Note [Signals in the engine]: discovery and pruning run no Python code, nor does a node
 * whose backward is not called (Note [Pass-through backward] in cgrad/_C_engine.pxi), so on a
 * long graph a pending signal (Ctrl-C) would only be handled once the run ends, after every
 * gradient was computed and accumulated. Each loop over nodes therefore calls
 * PyErr_CheckSignals every CG_SIGNAL_PERIOD steps: a handler that raises (KeyboardInterrupt)
 * fails the run exactly as an exception from a callback does. The handler may run any
 * Python code, including another backward; it runs between two steps, where the run's state
 * is as consistent as around a callback. Only the main thread handles signals; in any other
 * thread, and when no signal is pending, the call returns 0 at once.
 */
#include "cg_engine.h"

#include <string.h>

typedef struct {
    cg_node_t *node;      /* claimed: holds a strong ref to node->self */
    Py_ssize_t deps;      /* edges still to deliver into this node */
    Py_ssize_t buf_off;   /* first of node->n_outputs buffers in run.bufs */
    unsigned char on_path;  /* pruned runs: reaches a target (or is one) */
    unsigned char exec;     /* pruned runs: must run (reaches a target, or is one that runs) */
    unsigned char target;   /* is a capture target */
} cg_slot_t;

typedef struct {
    cg_node_t **keys;     /* open addressing, linear probing; NULL = empty */
    Py_ssize_t *vals;
    Py_ssize_t cap;       /* power of two */
    Py_ssize_t n;
} cg_map_t;

typedef struct {
    uint64_t prio;        /* see prio() */
    Py_ssize_t idx;       /* slot index */
} cg_hent_t;

typedef struct {
    uint64_t id;          /* unique, never 0; see Note [Run hints] */
    unsigned long owner;  /* the thread running it (PyThread_get_thread_ident) */
    cg_map_t map;         /* only nodes whose hint another run took over */
    cg_slot_t *slots;
    Py_ssize_t n_slots, cap_slots;
    cg_buf_t *bufs;
    Py_ssize_t n_bufs, cap_bufs;
    cg_hent_t *heap;      /* max-heap on prio, priorities stored inline (no pointer chasing) */
    Py_ssize_t n_heap, cap_heap;
    Py_ssize_t *stack;
    Py_ssize_t n_stack, cap_stack;
    /* Pruned runs: the capture targets of each slot as a chain (Note [Target chains]). */
    Py_ssize_t *first_target;   /* n_slots entries: first index into targets, or -1 */
    Py_ssize_t *next_target;    /* n_targets entries: next index with the same slot, or -1 */
} cg_run_t;

#define CG_SIGNAL_PERIOD 1024

/* Note [Signals in the engine]: 0, or -1 with the handler's exception set. */
static inline int check_signals(Py_ssize_t *countdown)
{
    if (--*countdown > 0) {
        return 0;
    }
    *countdown = CG_SIGNAL_PERIOD;
    return PyErr_CheckSignals();
}

/* Active runs (any thread), for Note [Run hints]. Protected by the GIL. */
static uint64_t cg_run_counter = 0;
static cg_run_t **cg_active = NULL;
static Py_ssize_t cg_n_active = 0, cg_cap_active = 0;

static int grow(void **arr, Py_ssize_t *cap, Py_ssize_t need, size_t elem)
{
    if (need <= *cap) {
        return 0;
    }
    Py_ssize_t ncap = *cap < 16 ? 16 : *cap;
    while (ncap < need) {
        ncap *= 2;
    }
    void *p = PyMem_Realloc(*arr, elem * (size_t)ncap);
    if (p == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    *arr = p;
    *cap = ncap;
    return 0;
}

static inline size_t map_hash(const cg_node_t *p)
{
    uint64_t h = (uint64_t)(uintptr_t)p;
    h ^= h >> 33;
    h *= 0xff51afd7ed558ccdULL;
    h ^= h >> 33;
    return (size_t)h;
}

/* Slot index of `node` in this run, or -1 if the run has not claimed it. */
static inline Py_ssize_t map_get(const cg_run_t *run, const cg_node_t *node)
{
    const cg_map_t *m = &run->map;
    if (m->cap == 0) {
        return -1;
    }
    size_t mask = (size_t)m->cap - 1, i = map_hash(node) & mask;
    while (m->keys[i] != NULL) {
        if (m->keys[i] == node) {
            return m->vals[i];
        }
        i = (i + 1) & mask;
    }
    return -1;
}

static int map_put(cg_map_t *m, cg_node_t *node, Py_ssize_t val)
{
    if (2 * (m->n + 1) > m->cap) {
        Py_ssize_t ncap = m->cap ? 2 * m->cap : 64;
        cg_node_t **keys = (cg_node_t **)PyMem_Calloc((size_t)ncap, sizeof(cg_node_t *));
        Py_ssize_t *vals = (Py_ssize_t *)PyMem_Malloc(sizeof(Py_ssize_t) * (size_t)ncap);
        if (keys == NULL || vals == NULL) {
            PyMem_Free(keys);
            PyMem_Free(vals);
            PyErr_NoMemory();
            return -1;
        }
        size_t mask = (size_t)ncap - 1;
        for (Py_ssize_t j = 0; j < m->cap; j++) {
            if (m->keys[j] != NULL) {
                size_t i = map_hash(m->keys[j]) & mask;
                while (keys[i] != NULL) {
                    i = (i + 1) & mask;
                }
                keys[i] = m->keys[j];
                vals[i] = m->vals[j];
            }
        }
        PyMem_Free(m->keys);
        PyMem_Free(m->vals);
        m->keys = keys;
        m->vals = vals;
        m->cap = ncap;
    }
    size_t mask = (size_t)m->cap - 1, i = map_hash(node) & mask;
    while (m->keys[i] != NULL) {
        i = (i + 1) & mask;
    }
    m->keys[i] = node;
    m->vals[i] = val;
    m->n++;
    return 0;
}

/* Slot index of `node` in this run, or -1 if the run has not claimed it. */
static inline Py_ssize_t slot_of(const cg_run_t *run, const cg_node_t *node)
{
    if (node->run_id == run->id) {
        return node->run_slot;
    }
    return map_get(run, node);
}

static cg_run_t *find_active(uint64_t id)
{
    for (Py_ssize_t i = 0; i < cg_n_active; i++) {
        if (cg_active[i]->id == id) {
            return cg_active[i];
        }
    }
    return NULL;
}

static int register_run(cg_run_t *run)
{
    if (grow((void **)&cg_active, &cg_cap_active, cg_n_active + 1, sizeof(cg_run_t *)) < 0) {
        return -1;
    }
    run->id = ++cg_run_counter;
    run->owner = PyThread_get_thread_ident();
    cg_active[cg_n_active++] = run;
    return 0;
}

/* Note [Runs across fork]: a run lives on its thread's stack. In a child made by fork() only
 * the forking thread exists, and the C library recycles (or unmaps) the other threads'
 * stacks, so the runs they were executing must leave the registry: otherwise find_active
 * reads them through dangling pointers the first time a node claimed by any earlier run is
 * claimed again (a crash seen with 8 threads running backward at the fork). What those runs
 * claimed stays referenced in the child, as everything the dead threads' frames held does.
 * Runs of the forking thread itself (fork() from inside a backward) carry on. */
void cg_engine_after_fork_child(void)
{
    unsigned long me = PyThread_get_thread_ident();
    Py_ssize_t kept = 0;
    for (Py_ssize_t i = 0; i < cg_n_active; i++) {
        if (cg_active[i]->owner == me) {
            cg_active[kept++] = cg_active[i];
        }
    }
    cg_n_active = kept;
}

static void unregister_run(cg_run_t *run)
{
    for (Py_ssize_t i = 0; i < cg_n_active; i++) {
        if (cg_active[i] == run) {
            cg_active[i] = cg_active[--cg_n_active];
            return;
        }
    }
}

Py_ssize_t cg_engine_active_runs(void)
{
    return cg_n_active;
}

/* Claim `node` for the run if it is not claimed yet. Returns its slot index, or -1. */
static Py_ssize_t claim(cg_run_t *run, cg_node_t *node)
{
    Py_ssize_t have = slot_of(run, node);
    if (have >= 0) {
        return have;
    }
    if (grow((void **)&run->slots, &run->cap_slots, run->n_slots + 1, sizeof(cg_slot_t)) < 0) {
        return -1;
    }
    Py_ssize_t nb = node->n_outputs < 1 ? 1 : node->n_outputs;
    if (grow((void **)&run->bufs, &run->cap_bufs, run->n_bufs + nb, sizeof(cg_buf_t)) < 0) {
        return -1;
    }
    Py_ssize_t idx = run->n_slots;
    if (node->run_id != 0) {
        cg_run_t *other = find_active(node->run_id);
        if (other != NULL && map_put(&other->map, node, node->run_slot) < 0) {
            return -1;
        }
    }
    node->run_id = run->id;
    node->run_slot = idx;
    run->n_slots++;
    cg_slot_t *s = &run->slots[idx];
    s->node = node;
    s->deps = 0;
    s->buf_off = run->n_bufs;
    s->on_path = 1;
    s->exec = 1;
    s->target = 0;
    for (Py_ssize_t i = 0; i < nb; i++) {
        run->bufs[run->n_bufs + i].g = NULL;
        run->bufs[run->n_bufs + i].owned = 0;
    }
    run->n_bufs += nb;
    Py_INCREF(node->self);
    return idx;
}

static int stack_push(cg_run_t *run, Py_ssize_t idx)
{
    if (grow((void **)&run->stack, &run->cap_stack, run->n_stack + 1, sizeof(Py_ssize_t)) < 0) {
        return -1;
    }
    run->stack[run->n_stack++] = idx;
    return 0;
}

/* Ready queue: AccumulateGrad nodes sort as UINT64_MAX (run as soon as ready), as torch. */
static inline uint64_t prio(const cg_run_t *run, Py_ssize_t idx)
{
    const cg_node_t *n = run->slots[idx].node;
    return n->kind == CG_NODE_ACCUMULATE ? UINT64_MAX : n->seq_nr;
}

static int heap_push(cg_run_t *run, Py_ssize_t idx)
{
    if (grow((void **)&run->heap, &run->cap_heap, run->n_heap + 1, sizeof(cg_hent_t)) < 0) {
        return -1;
    }
    Py_ssize_t i = run->n_heap++;
    uint64_t p = prio(run, idx);
    while (i > 0) {
        Py_ssize_t parent = (i - 1) / 2;
        if (run->heap[parent].prio >= p) {
            break;
        }
        run->heap[i] = run->heap[parent];
        i = parent;
    }
    run->heap[i].prio = p;
    run->heap[i].idx = idx;
    return 0;
}

static Py_ssize_t heap_pop(cg_run_t *run)
{
    Py_ssize_t top = run->heap[0].idx;
    cg_hent_t last = run->heap[--run->n_heap];
    Py_ssize_t n = run->n_heap, i = 0;
    for (;;) {
        Py_ssize_t c = 2 * i + 1;
        if (c >= n) {
            break;
        }
        if (c + 1 < n && run->heap[c + 1].prio > run->heap[c].prio) {
            c++;
        }
        if (run->heap[c].prio <= last.prio) {
            break;
        }
        run->heap[i] = run->heap[c];
        i = c;
    }
    if (n > 0) {
        run->heap[i] = last;
    }
    return top;
}

/* Add `g` (NEW reference, stolen) into buffer b. See Note [Grad buffer ownership]. */
static int buf_add(cg_buf_t *b, PyObject *g, const cg_callbacks_t *cb)
{
    if (b->g == NULL) {
        b->g = g;
        b->owned = 0;
        return 0;
    }
    PyObject *sum = cb->add(cb->ctx, b->g, g, b->owned);
    Py_DECREF(g);
    if (sum == NULL) {
        return -1;
    }
    Py_SETREF(b->g, sum);
    b->owned = 1;
    return 0;
}

static void run_free(cg_run_t *run)
{
    for (Py_ssize_t i = 0; i < run->n_bufs; i++) {
        Py_CLEAR(run->bufs[i].g);
    }
    PyMem_Free(run->map.keys);
    PyMem_Free(run->map.vals);
    for (Py_ssize_t i = run->n_slots - 1; i >= 0; i--) {
        Py_DECREF(run->slots[i].node->self);
    }
    PyMem_Free(run->slots);
    PyMem_Free(run->bufs);
    PyMem_Free(run->heap);
    PyMem_Free(run->stack);
    PyMem_Free(run->first_target);
    PyMem_Free(run->next_target);
}

/* Claim everything reachable from the roots and count dependencies. Iterative DFS. */
static int discover(cg_run_t *run, cg_node_t **roots, Py_ssize_t n_roots)
{
    Py_ssize_t countdown = CG_SIGNAL_PERIOD;
    for (Py_ssize_t r = 0; r < n_roots; r++) {
        if (slot_of(run, roots[r]) >= 0) {
            continue;
        }
        Py_ssize_t idx = claim(run, roots[r]);
        if (idx < 0 || stack_push(run, idx) < 0) {
            return -1;
        }
        while (run->n_stack > 0) {
            if (check_signals(&countdown) < 0) {
                return -1;
            }
            cg_node_t *n = run->slots[run->stack[--run->n_stack]].node;
            for (Py_ssize_t e = 0; e < n->n_edges; e++) {
                cg_node_t *t = n->edges[e].node;
                if (t == NULL) {
                    continue;
                }
                Py_ssize_t ti = slot_of(run, t);
                if (ti < 0) {
                    ti = claim(run, t);
                    if (ti < 0 || stack_push(run, ti) < 0) {
                        return -1;
                    }
                }
                run->slots[ti].deps++;
            }
        }
    }
    return 0;
}

/* Pruned runs: mark on_path / exec, then recount dependencies over the executed part.
 * run_targets: the targets are executed too (see cg_engine_run). */
static int prune(cg_run_t *run, cg_node_t **targets, Py_ssize_t n_targets, int run_targets)
{
    Py_ssize_t n = run->n_slots;
    /* Note [Target chains]: run_node finds the targets of a slot by following a chain
     * (a slot may be several targets: one tensor passed twice, or two outputs of one node)
     * instead of scanning every target for every target node, which was quadratic in the
     * number of inputs (grad() of 70,000 leaves took seconds). Built back to front so that
     * each chain is in increasing target order. */
    run->first_target = (Py_ssize_t *)PyMem_Malloc(sizeof(Py_ssize_t) * (size_t)(n ? n : 1));
    run->next_target = (Py_ssize_t *)PyMem_Malloc(
        sizeof(Py_ssize_t) * (size_t)(n_targets ? n_targets : 1));
    if (run->first_target == NULL || run->next_target == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        run->first_target[i] = -1;
    }
    for (Py_ssize_t t = n_targets - 1; t >= 0; t--) {
        Py_ssize_t ti = slot_of(run, targets[t]);
        run->next_target[t] = -1;
        if (ti >= 0) {
            run->slots[ti].target = 1;
            run->next_target[t] = run->first_target[ti];
            run->first_target[ti] = t;
        }
    }
    /* Topological order (Kahn) into run->stack, using a copy of deps in `left`. */
    Py_ssize_t *left = (Py_ssize_t *)PyMem_Malloc(sizeof(Py_ssize_t) * (size_t)(n ? n : 1));
    if (left == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    if (grow((void **)&run->stack, &run->cap_stack, n, sizeof(Py_ssize_t)) < 0) {
        PyMem_Free(left);
        return -1;
    }
    Py_ssize_t head = 0, tail = 0, countdown = CG_SIGNAL_PERIOD;
    for (Py_ssize_t i = 0; i < n; i++) {
        left[i] = run->slots[i].deps;
        if (left[i] == 0) {
            run->stack[tail++] = i;
        }
    }
    while (head < tail) {
        if (check_signals(&countdown) < 0) {
            PyMem_Free(left);
            return -1;
        }
        cg_node_t *nd = run->slots[run->stack[head++]].node;
        for (Py_ssize_t e = 0; e < nd->n_edges; e++) {
            cg_node_t *t = nd->edges[e].node;
            if (t != NULL) {
                Py_ssize_t ti = slot_of(run, t);
                if (--left[ti] == 0) {
                    run->stack[tail++] = ti;
                }
            }
        }
    }
    PyMem_Free(left);
    /* Reverse topological order: children before parents. */
    for (Py_ssize_t k = tail - 1; k >= 0; k--) {
        cg_slot_t *s = &run->slots[run->stack[k]];
        int reach = 0;
        for (Py_ssize_t e = 0; e < s->node->n_edges; e++) {
            cg_node_t *t = s->node->edges[e].node;
            if (t != NULL && run->slots[slot_of(run, t)].on_path) {
                reach = 1;
                break;
            }
        }
        s->exec = (unsigned char)(reach || (run_targets && s->target));
        s->on_path = (unsigned char)(reach || s->target);
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        run->slots[i].deps = 0;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        cg_slot_t *s = &run->slots[i];
        if (!s->exec) {
            continue;
        }
        for (Py_ssize_t e = 0; e < s->node->n_edges; e++) {
            cg_node_t *t = s->node->edges[e].node;
            if (t != NULL) {
                Py_ssize_t ti = slot_of(run, t);
                if (run->slots[ti].on_path) {
                    run->slots[ti].deps++;
                }
            }
        }
    }
    run->n_stack = 0;
    return 0;
}

static int run_node(cg_run_t *run, Py_ssize_t idx, int pruned, cg_node_t **targets,
                    const Py_ssize_t *target_nrs, Py_ssize_t n_targets, PyObject **captured,
                    int keep_graph, const cg_callbacks_t *cb, PyObject **scratch,
                    unsigned char *needed)
{
    cg_slot_t *s = &run->slots[idx];
    cg_node_t *node = s->node;
    Py_ssize_t off = s->buf_off;
    if (s->target && captured != NULL) {
        /* A target that is not run gets its tensor hooks here; one that is run captures
         * the gradient before its hooks, as torch does. */
        if (!s->exec && cb->hooks(cb->ctx, node, &run->bufs[off]) < 0) {
            return -1;
        }
        for (Py_ssize_t t = run->first_target[idx]; t >= 0; t = run->next_target[t]) {
            PyObject *g = run->bufs[off + target_nrs[t]].g;
            Py_XINCREF(g);
            Py_XSETREF(captured[t], g);
        }
    }
    if (pruned && !s->exec) {
        return 0;
    }
    if (node->kind == CG_NODE_ACCUMULATE) {
        /* Called even when no gradient arrived (every edge into it delivered none): torch
         * runs the node, and its hooks see None. */
        cg_buf_t *b = &run->bufs[off];
        return cb->accumulate(cb->ctx, node, b->g, b->g != NULL && b->owned);
    }
    Py_ssize_t ne = node->n_edges;
    for (Py_ssize_t e = 0; e < ne; e++) {
        scratch[e] = NULL;
        if (pruned) {
            cg_node_t *t = node->edges[e].node;
            needed[e] = (unsigned char)(t != NULL && run->slots[slot_of(run, t)].on_path);
        }
    }
    if (cb->apply(cb->ctx, node, &run->bufs[off], pruned ? needed : NULL, scratch) < 0) {
        /* the callback may have written some gradients before it failed */
        for (Py_ssize_t e = 0; e < ne; e++) {
            Py_CLEAR(scratch[e]);
        }
        return -1;
    }
    /* The node's inputs are consumed: drop them before its outputs are delivered. */
    Py_ssize_t nb = node->n_outputs < 1 ? 1 : node->n_outputs;
    for (Py_ssize_t i = 0; i < nb; i++) {
        Py_CLEAR(run->bufs[off + i].g);
    }
    int rc = 0;
    for (Py_ssize_t e = 0; e < ne; e++) {
        PyObject *g = scratch[e];
        scratch[e] = NULL;
        cg_node_t *t = node->edges[e].node;
        if (t == NULL || rc < 0) {
            Py_XDECREF(g);
            continue;
        }
        Py_ssize_t ti = slot_of(run, t);
        cg_slot_t *ts = &run->slots[ti];
        if (pruned && !ts->on_path) {
            Py_XDECREF(g);
            continue;
        }
        if (g != NULL && buf_add(&run->bufs[ts->buf_off + node->edges[e].input_nr], g, cb) < 0) {
            rc = -1;
            continue;
        }
        if (--ts->deps == 0 && heap_push(run, ti) < 0) {
            rc = -1;
        }
    }
    if (rc == 0 && !keep_graph) {
        rc = cb->release(cb->ctx, node);
    }
    return rc;
}

int cg_engine_run(cg_node_t **roots, const Py_ssize_t *root_nrs, PyObject **root_grads,
                  Py_ssize_t n_roots, cg_node_t **targets, const Py_ssize_t *target_nrs,
                  Py_ssize_t n_targets, PyObject **captured, int run_targets, int keep_graph,
                  const cg_callbacks_t *cb)
{
    cg_run_t run;
    memset(&run, 0, sizeof(run));
    PyObject **scratch = NULL;
    unsigned char *needed = NULL;
    Py_ssize_t n_scratch = 0;
    int pruned = n_targets > 0;
    if (run_targets) {
        captured = NULL;
    }
    for (Py_ssize_t t = 0; captured != NULL && t < n_targets; t++) {
        captured[t] = NULL;
    }
    if (register_run(&run) < 0) {
        return -1;
    }
    if (discover(&run, roots, n_roots) < 0) {
        goto error;
    }
    if (pruned && prune(&run, targets, n_targets, run_targets) < 0) {
        goto error;
    }
    for (Py_ssize_t r = 0; r < n_roots; r++) {
        cg_slot_t *s = &run.slots[slot_of(&run, roots[r])];
        Py_INCREF(root_grads[r]);
        if (buf_add(&run.bufs[s->buf_off + root_nrs[r]], root_grads[r], cb) < 0) {
            goto error;
        }
    }
    if (pruned && n_roots == 1) {
        /* Note [Capture hooks]: a lone root on no path to a target does not run, but its
         * tensor hooks (and retain_grad) see the gradient it received, as in torch (whose
         * graph task then starts at that node; with several roots it starts at a dummy
         * node that passes nothing to nodes that need not run, and no hook is called). */
        cg_slot_t *s = &run.slots[slot_of(&run, roots[0])];
        if (!s->on_path && cb->hooks(cb->ctx, s->node, &run.bufs[s->buf_off]) < 0) {
            goto error;
        }
    }
    for (Py_ssize_t i = 0; i < run.n_slots; i++) {
        cg_slot_t *s = &run.slots[i];
        if (s->deps == 0 && s->on_path && heap_push(&run, i) < 0) {
            goto error;
        }
    }
    for (Py_ssize_t i = 0; i < run.n_slots; i++) {
        if (run.slots[i].node->n_edges > n_scratch) {
            n_scratch = run.slots[i].node->n_edges;
        }
    }
    scratch = (PyObject **)PyMem_Malloc(sizeof(PyObject *) * (size_t)(n_scratch ? n_scratch : 1));
    needed = (unsigned char *)PyMem_Malloc((size_t)(n_scratch ? n_scratch : 1));
    if (scratch == NULL || needed == NULL) {
        PyErr_NoMemory();
        goto error;
    }
    Py_ssize_t countdown = CG_SIGNAL_PERIOD;
    while (run.n_heap > 0) {
        if (check_signals(&countdown) < 0) {
            goto error;
        }
        Py_ssize_t idx = heap_pop(&run);
        if (run_node(&run, idx, pruned, targets, target_nrs, n_targets, captured, keep_graph,
                     cb, scratch, needed) < 0) {
            goto error;
        }
    }
    PyMem_Free(scratch);
    PyMem_Free(needed);
    unregister_run(&run);
    run_free(&run);
    return 0;
error:
    PyMem_Free(scratch);
    PyMem_Free(needed);
    for (Py_ssize_t t = 0; captured != NULL && t < n_targets; t++) {
        Py_CLEAR(captured[t]);
    }
    {
        /* Keep the exception across the releases below (they may run deallocators). */
        PyObject *et, *ev, *tb;
        PyErr_Fetch(&et, &ev, &tb);
        unregister_run(&run);
        run_free(&run);
        PyErr_Restore(et, ev, tb);
    }
    return -1;
}
