/* cg_untracked.h: the registry of graph objects kept out of the cycle collector.
 *
 * Note [Untracked graphs] (cgrad/_C_untracked.pxi) explains the scheme: a node or tensor that
 * can only reach other such objects and immutable values cannot be on a reference cycle, so it is
 * untracked (PyObject_GC_UnTrack) and entered here. Whenever any of them is about to gain a
 * reference that could close a cycle, cg_reg_flush() tracks every registered object again.
 *
 * References: the registry holds BORROWED pointers. An object in it must call
 * cg_reg_remove() from its deallocator; cg_reg_flush() skips objects whose reference count
 * is already 0 (a deallocation the trashcan deferred). Each entry also remembers `slot`, a
 * Py_ssize_t inside the object that holds the entry's index + 1 (0: not registered), so that
 * removal is O(1). All functions are called with the GIL held; the registry is process-wide
 * because objects move between threads.
 */
#ifndef CGRAD_CG_UNTRACKED_H
#define CGRAD_CG_UNTRACKED_H

#include "cg_common.h"
#include "cg_graph.h"

/* Enter `o` (borrowed) with its index slot (*slot must be 0). Returns 0, or -1 when the
 * registry cannot grow (no exception set: the caller then leaves `o` tracked). Does not
 * untrack `o`: the caller does. */
int cg_reg_add(PyObject *o, Py_ssize_t *slot);

/* Remove the entry whose index is in *slot (no-op if *slot is 0) and set *slot to 0. */
void cg_reg_remove(Py_ssize_t *slot);

/* Track every registered object that is alive and untracked, and empty the registry.
 * Cannot fail and calls no Python code. */
void cg_reg_flush(void);

/* Number of registered objects, and of entries allocated. */
Py_ssize_t cg_reg_count(void);
Py_ssize_t cg_reg_capacity(void);

/* 1 if every edge of `node` is empty or leads to an untracked node, else 0. */
int cg_node_edges_untracked(const cg_node_t *node);

#endif /* CGRAD_CG_UNTRACKED_H */
