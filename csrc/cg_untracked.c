/* cg_untracked.c: see cg_untracked.h. */
#include "cg_untracked.h"

typedef struct {
    PyObject *obj;        /* borrowed */
    Py_ssize_t *slot;     /* inside obj: this entry's index + 1 */
} cg_reg_entry_t;

static cg_reg_entry_t *reg = NULL;
static Py_ssize_t reg_n = 0, reg_cap = 0;

int cg_reg_add(PyObject *o, Py_ssize_t *slot)
{
    if (reg_n == reg_cap) {
        Py_ssize_t cap = reg_cap ? 2 * reg_cap : 1024;
        if ((size_t)cap > PY_SSIZE_T_MAX / sizeof(cg_reg_entry_t)) {
            return -1;
        }
        cg_reg_entry_t *r = (cg_reg_entry_t *)PyMem_RawRealloc(
            reg, (size_t)cap * sizeof(cg_reg_entry_t));
        if (r == NULL) {
            return -1;
        }
        reg = r;
        reg_cap = cap;
    }
    reg[reg_n].obj = o;
    reg[reg_n].slot = slot;
    reg_n++;
    *slot = reg_n;
    return 0;
}

void cg_reg_remove(Py_ssize_t *slot)
{
    Py_ssize_t i = *slot - 1;
    if (i < 0) {
        return;
    }
    *slot = 0;
    reg_n--;
    if (i != reg_n) {
        reg[i] = reg[reg_n];
        *reg[i].slot = i + 1;
    }
    /* Give the memory of a large graph back once most of it is gone (amortised O(1)). */
    if (reg_cap > 4096 && reg_n < reg_cap / 4) {
        cg_reg_entry_t *r = (cg_reg_entry_t *)PyMem_RawRealloc(
            reg, (size_t)(reg_cap / 2) * sizeof(cg_reg_entry_t));
        if (r != NULL) {
            reg = r;
            reg_cap /= 2;
        }
    }
}

void cg_reg_flush(void)
{
    /* Empty the registry before tracking: nothing below calls back, but keep the state
     * consistent at every step anyway. */
    cg_reg_entry_t *r = reg;
    Py_ssize_t n = reg_n;
    reg = NULL;
    reg_n = 0;
    reg_cap = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *o = r[i].obj;
        *r[i].slot = 0;
        if (Py_REFCNT(o) > 0 && !PyObject_GC_IsTracked(o)) {
            PyObject_GC_Track(o);
        }
    }
    PyMem_RawFree(r);
}

Py_ssize_t cg_reg_count(void)
{
    return reg_n;
}

Py_ssize_t cg_reg_capacity(void)
{
    return reg_cap;
}

int cg_node_edges_untracked(const cg_node_t *node)
{
    for (Py_ssize_t i = 0; i < node->n_edges; i++) {
        const cg_node_t *t = node->edges[i].node;
        if (t != NULL && PyObject_GC_IsTracked(t->self)) {
            return 0;
        }
    }
    return 1;
}
