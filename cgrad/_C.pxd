# cython: language_level=3
# Object layouts of cgrad._C (the fields are private to the package).
cimport cython
from cgrad._csrc cimport cg_node_t


cdef class _VersionCounter:
    cdef public Py_ssize_t version


cdef class Node
cdef class _NodeExtra


cdef class TensorBase:
    cdef object _data                    # the ndarray (exact np.ndarray); a property for
                                         # Python (Note [Untracked graphs])
    cdef object _grad                    # Tensor or None
    cdef Node _grad_fn                   # producer node, or None for a leaf
    cdef Py_ssize_t _output_nr           # which output of _grad_fn this is
    cdef bint _requires_grad
    cdef bint _retains_grad
    cdef object _accum_ref               # weakref to this leaf's AccumulateGrad, or None
    cdef _VersionCounter _vc             # created lazily; shared by views and detach()
    cdef object _hooks                   # dict id -> hook (leaves), or None
    cdef object _post_acc_hooks          # dict id -> hook, or None
    cdef object _base_t                  # the Tensor whose storage this view shares, or None
    cdef Py_ssize_t _view_ver            # version at which a view's grad_fn was (re)made
    cdef public char _cmeta              # a view's creation meta (Note [View creation meta])
    cdef Py_ssize_t _reg                 # Note [Untracked graphs]: registry index + 1, or 0
    cdef bint _cref                      # ... held by an untracked node or tensor, ever
    cdef object __weakref__
    cdef _set_requires_grad(self, bint value)
    cdef _VersionCounter _get_vc(self)


cdef class Node:
    cdef cg_node_t c                     # graph record (edges, output metadata, seq_nr)
    cdef object _fn                      # the Function class whose backward this runs
    cdef object _saved                   # tuple given to save_for_backward, or None
    cdef bint _has_saved
    cdef bint _released
    cdef object _needs                   # needs_input_grad tuple (computed lazily)
    cdef object _args                    # forward arguments while forward runs
    cdef public object _aux              # op-private slot for built-in ops (no dict)
    cdef object _arg_pos                 # edge index -> forward-argument position, or None
    cdef Py_ssize_t _n_args
    cdef bint _materialize
    cdef _NodeExtra _x                   # rarely used state, or None (Note [Compact node])
    cdef Py_ssize_t _reg                 # Note [Untracked graphs]: registry index + 1, or 0
    cdef bint _attrs                     # an attribute was ever set (instance dict in use)
    cdef object __weakref__
    cdef tuple _unpack_saved(self)
    cdef _NodeExtra _extra(self)


@cython.final
cdef class _NodeExtra:
    # Note [Compact node]: the state that most nodes never use lives in this record,
    # allocated on first use, so that a node spans fewer cache lines. The cycle collector
    # visits every live node several times as a graph grows, and it is memory-bound: its
    # cost per node follows the node's size.
    cdef object saved_vers               # list of versions at save time, or None (all 0)
    cdef object saved_fwd                # save_for_forward's tensors
    cdef object non_diff                 # list of outputs marked non-differentiable
    cdef object dirty                    # list of inputs marked dirty
    cdef object tensor_pre               # dict output_nr -> {id: hook} (tensor hooks)
    cdef object retain                   # dict output_nr -> weakref to a retain_grad tensor
    cdef object pre_hooks                # dict id -> node pre-hook
    cdef object post_hooks               # dict id -> node post-hook
    cdef object metadata                 # dict, or None
    cdef bint copy_fn                    # the op node of an in-place op on a view
                                         # (Note [Copy slices fn] in ops/inplace.py)


cdef class AccumulateGrad(Node):
    cdef object _variable                # the leaf (strong); the leaf holds us weakly
