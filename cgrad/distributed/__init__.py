"""cgrad.distributed: torch.distributed's API for the CPU, on MPI (through mpi4py).

Process groups (``init_process_group(backend="mpi")``, ``new_group``, ``get_rank``,
``get_world_size``, ``barrier``, ``destroy_process_group``) and collectives on cgrad tensors,
in place as torch's (``all_reduce`` with ``ReduceOp.SUM/AVG/PRODUCT/MIN/MAX``, ``broadcast``,
``reduce``, ``all_gather``, ``all_gather_into_tensor``, ``reduce_scatter``, ``gather``,
``scatter``, ``send``/``recv``; ``async_op=True`` returns a ``Work``), plus
``all_gather_object`` and ``broadcast_object_list``. Note [Collectives on MPI] in
cgrad/distributed/distributed_c10d.py. Importing this package needs no MPI;
``init_process_group`` without mpi4py raises an ImportError that says what to install.
Launch with ``mpirun -n N python script.py``.
"""
from cgrad.distributed.distributed_c10d import (Backend, GroupMember, ProcessGroup, ReduceOp,
                                                Work, all_gather, all_gather_into_tensor,
                                                all_gather_object, all_reduce, all_to_all,
                                                barrier, broadcast, broadcast_object_list,
                                                destroy_process_group, gather, get_backend,
                                                get_rank, get_world_size, init_process_group,
                                                irecv, is_available, is_initialized,
                                                is_mpi_available, isend, new_group, recv,
                                                reduce, reduce_scatter, reduce_scatter_tensor,
                                                scatter, send)

__all__ = ["Backend", "GroupMember", "ProcessGroup", "ReduceOp", "Work", "all_gather",
           "all_gather_into_tensor", "all_gather_object", "all_reduce", "all_to_all",
           "barrier", "broadcast", "broadcast_object_list", "destroy_process_group", "gather",
           "get_backend", "get_rank", "get_world_size", "init_process_group", "irecv",
           "is_available", "is_initialized", "is_mpi_available", "isend", "new_group",
           "recv", "reduce", "reduce_scatter", "reduce_scatter_tensor", "scatter", "send"]
