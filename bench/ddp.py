#!/usr/bin/env python
"""Weak scaling of DistributedDataParallel over MPI: 1 and 2 ranks, cgrad vs torch (gloo).

    python bench/ddp.py                 # 3 rounds of (1 rank, 2 ranks), prints a table
    python bench/ddp.py --quick         # small network, one round (smoke test)
    python bench/ddp.py --rounds 5 --steps 30 --json out.json

The workload: the MLP of bench/mlp.py (784-1024-1024-10, tanh, cross-entropy, float32,
1.86 M parameters = 7.5 MB of gradients), batch 128 *per rank* (weak scaling: the work per
rank is fixed, the global batch grows with the ranks), forward, backward and SGD
(``opt.step()``), the model wrapped in ``DistributedDataParallel`` (default buckets:
1 MiB first, 25 MiB cap; here 2 buckets).

This script is the launcher: it starts ``mpirun -n 1`` and ``mpirun -n 2`` of itself
(``--worker``), alternating, ``--rounds`` times (loopback only, ``--oversubscribe``). In each
job every rank runs, interleaved in blocks, the cgrad step and the same step in torch with
torch's DistributedDataParallel on the gloo backend (rank and world from MPI, TCP on
127.0.0.1; ``torch.set_num_threads(1)``). Reported per ranks count (medians over the
rounds of each job's median; rank 0's clock, the ranks are in lock step):

* ``step``: wall time of one training step (and rank 0's process CPU time, which counts
  the progress thread's too); ``plain``: the same step of the bare module
  without DDP in the same job (what one rank costs without communication);
* ``comm``: a blocking ``MPI_Allreduce`` of the gradients' buckets, one after the other, on
  their own; ``comm nb``: the same with the non-blocking ``MPI_Iallreduce`` DDP uses,
  waited at once (the communication a DDP step costs when nothing overlaps it: Open MPI
  runs the two with different algorithms);
* ``exposed``: what DDP waited at the end of backward for its non-blocking all-reduces
  (``DistributedDataParallel.comm_wait_seconds``): the communication not hidden;
* ``overlap`` = 1 - exposed / comm nb (share of the communication hidden behind backward);
* ``efficiency`` = step(1 rank) / step(N ranks) (1.0 = perfect weak scaling);
* the same step, exposed time and overlap of a second DDP without its progress thread
  (``CGRAD_DDP_PROGRESS=0``: the all-reduces advance only inside MPI calls).

On this machine the 2 ranks share 2 cores with other jobs: the figures are noisy, and
Open MPI progresses a non-blocking collective only inside MPI calls: cgrad's DDP runs a
progress thread while a reduction is in flight (Note [DDP buckets and hooks]).
"""
import os

for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import argparse  # noqa: E402
import json  # noqa: E402
import shutil  # noqa: E402
import socket  # noqa: E402
import statistics  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402

import numpy as np  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


def _sizes(quick):
    return (64, 128, 128, 10) if quick else (784, 1024, 1024, 10)


# ---------------------------------------------------------------------------------------------
# worker (one rank of an MPI job)

def _worker(args):
    sys.path.insert(0, ROOT)
    import cgrad
    import cgrad.distributed as dist
    import cgrad.nn as nn
    import cgrad.nn.functional as F
    from cgrad.nn.parallel import DistributedDataParallel as DDP
    from mpi4py import MPI

    dist.init_process_group("mpi")
    rank, world = dist.get_rank(), dist.get_world_size()
    comm = MPI.COMM_WORLD
    d_in, h1, h2, d_out = _sizes(args.quick)
    batch = args.batch
    rng = np.random.default_rng(rank)
    x = rng.standard_normal((batch, d_in)).astype(np.float32)
    y = rng.integers(0, d_out, batch)

    def cg_model():
        cgrad.manual_seed(0)
        return nn.Sequential(nn.Linear(d_in, h1), nn.Tanh(), nn.Linear(h1, h2), nn.Tanh(),
                             nn.Linear(h2, d_out))

    plain = cg_model()
    ddp = DDP(cg_model())
    os.environ["CGRAD_DDP_PROGRESS"] = "0"
    ddp_np = DDP(cg_model())             # without the progress thread
    del os.environ["CGRAD_DDP_PROGRESS"]
    xc, yc = cgrad.from_numpy(x), cgrad.from_numpy(y)

    def cg_step(model, opt):
        opt.zero_grad()
        F.cross_entropy(model(xc), yc).backward()
        opt.step()

    opt_plain = cgrad.optim.SGD(plain.parameters(), lr=1e-3)
    opt_ddp = cgrad.optim.SGD(ddp.parameters(), lr=1e-3)
    opt_np = cgrad.optim.SGD(ddp_np.parameters(), lr=1e-3)

    torch = None
    if not args.no_torch:
        try:
            import torch
            import torch.distributed as tdist
            from torch.nn.parallel import DistributedDataParallel as TDDP
        except ImportError:
            torch = None
    if torch is not None:
        torch.set_num_threads(1)
        os.environ.setdefault("GLOO_SOCKET_IFNAME", "lo")
        tdist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{args.port}",
                                 rank=rank, world_size=world)
        torch.manual_seed(0)
        tnet = torch.nn.Sequential(torch.nn.Linear(d_in, h1), torch.nn.Tanh(),
                                   torch.nn.Linear(h1, h2), torch.nn.Tanh(),
                                   torch.nn.Linear(h2, d_out))
        tddp = TDDP(tnet)
        topt = torch.optim.SGD(tddp.parameters(), lr=1e-3)
        xt, yt = torch.from_numpy(x), torch.from_numpy(y)

        def t_step():
            topt.zero_grad()
            torch.nn.functional.cross_entropy(tddp(xt), yt).backward()
            topt.step()

    buckets = [sum(p._data.size for _, p in b.params) for b in ddp._buckets]
    flats = [np.zeros(k, np.float32) for k in buckets]

    def comm_only():
        for f in flats:
            comm.Allreduce(MPI.IN_PLACE, f, op=MPI.SUM)

    def comm_nb():
        for f in flats:
            comm.Iallreduce(MPI.IN_PLACE, f, op=MPI.SUM).Wait()

    cpu = {}

    def timed(fn, key=None):
        comm.Barrier()
        c0, t0 = time.process_time(), time.perf_counter()
        fn()
        t = time.perf_counter() - t0
        if key is not None:
            cpu.setdefault(key, []).append(time.process_time() - c0)
        return t

    res = {"step": [], "plain": [], "comm": [], "comm_nb": [], "exposed": [], "torch_step": [],
           "step_np": [], "exposed_np": []}
    for _ in range(2):                      # warm-up
        cg_step(ddp, opt_ddp)
        cg_step(ddp_np, opt_np)
        cg_step(plain, opt_plain)
        comm_only()
        comm_nb()
        if torch is not None:
            t_step()
    block = 5
    for _ in range(max(1, args.steps // block)):
        for _ in range(block):
            res["step"].append(timed(lambda: cg_step(ddp, opt_ddp), "step_cpu"))
            res["exposed"].append(ddp.comm_wait_seconds)
        for _ in range(block):
            res["step_np"].append(timed(lambda: cg_step(ddp_np, opt_np)))
            res["exposed_np"].append(ddp_np.comm_wait_seconds)
        for _ in range(block):
            res["plain"].append(timed(lambda: cg_step(plain, opt_plain), "plain_cpu"))
        for _ in range(block):
            res["comm"].append(timed(comm_only))
            res["comm_nb"].append(timed(comm_nb))
        if torch is not None:
            for _ in range(block):
                res["torch_step"].append(timed(t_step))
    if rank == 0:
        res.update(cpu)
        out = {k: statistics.median(v) for k, v in res.items() if v}
        out.update(world=world, buckets=buckets,
                   grad_bytes=int(sum(buckets) * 4), batch_per_rank=batch)
        print("RESULT " + json.dumps(out), flush=True)
    if torch is not None:
        tdist.destroy_process_group()
    dist.destroy_process_group()


# ---------------------------------------------------------------------------------------------
# launcher

def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _job(n, args):
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
               OMPI_MCA_btl="self,vader", OMPI_MCA_btl_tcp_if_include="lo",
               OMPI_MCA_oob_tcp_if_include="lo", GLOO_SOCKET_IFNAME="lo",
               PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    cmd = ["mpirun", "--oversubscribe", "-n", str(n), sys.executable, os.path.abspath(__file__),
           "--worker", "--steps", str(args.steps), "--batch", str(args.batch),
           "--port", str(_free_port())]
    cmd += ["--quick"] if args.quick else []
    cmd += ["--no-torch"] if args.no_torch else []
    r = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600)
    for line in r.stdout.splitlines():
        if line.startswith("RESULT "):
            return json.loads(line[len("RESULT "):])
    raise RuntimeError(f"mpirun -n {n} failed ({r.returncode}):\n{r.stdout}\n{r.stderr}")


def _ms(s):
    return f"{s * 1e3:.2f}"


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--port", type=int, default=0, help=argparse.SUPPRESS)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--no-torch", action="store_true")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--batch", type=int, default=128, help="per rank")
    ap.add_argument("--json")
    args = ap.parse_args(argv)
    if args.worker:
        return _worker(args)
    if args.quick:
        args.rounds, args.steps = 1, 5
    if shutil.which("mpirun") is None:
        sys.exit("bench/ddp.py needs Open MPI (mpirun) and mpi4py: apt-get install openmpi-bin "
                 "libopenmpi-dev && pip install mpi4py")
    runs = {1: [], 2: []}
    for _ in range(args.rounds):
        for n in (1, 2):
            runs[n].append(_job(n, args))
    med = {n: {k: statistics.median(r[k] for r in rs) for k in rs[0]
               if isinstance(rs[0][k], float)} for n, rs in runs.items()}
    first = runs[1][0]
    print(f"DDP weak scaling: MLP {'-'.join(map(str, _sizes(args.quick)))}, float32, "
          f"batch {args.batch} per rank, gradients {first['grad_bytes'] / 1e6:.2f} MB in "
          f"{len(first['buckets'])} buckets; medians of {args.rounds} rounds x "
          f"{args.steps} steps; load average {os.getloadavg()[0]:.2f}")
    has_torch = "torch_step" in med[1]
    head = ("| ranks | step ms | plain ms | comm ms | comm nb ms | exposed ms | overlap |"
            " efficiency |"
            " no progress thread: step ms | exposed ms | overlap |")
    head += " torch DDP step ms | cgrad / torch |" if has_torch else ""
    print(head)
    print("|" + "---|" * (head.count("|") - 1))
    for n in (1, 2):
        m = med[n]
        nb = m["comm_nb"]
        overlap = 1 - m["exposed"] / nb if n > 1 and nb > 0 else float("nan")
        row = (f"| {n} | {_ms(m['step'])} | {_ms(m['plain'])} | {_ms(m['comm'])} | {_ms(nb)} | "
               f"{_ms(m['exposed'])} | {overlap:.2f} | {med[1]['step'] / m['step']:.2f} |")
        ov_np = 1 - m["exposed_np"] / nb if n > 1 and nb > 0 else float("nan")
        row += f" {_ms(m['step_np'])} | {_ms(m['exposed_np'])} | {ov_np:.2f} |"
        if has_torch:
            row += f" {_ms(m['torch_step'])} | {m['step'] / m['torch_step']:.2f} |"
        print(row)
    print("process CPU time of rank 0 per step (ms), DDP step / plain step: " + ", ".join(
        f"{n} rank(s) {_ms(med[n]['step_cpu'])} / {_ms(med[n]['plain_cpu'])}" for n in (1, 2)))
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"runs": runs, "medians": med}, f, indent=1)


if __name__ == "__main__":
    main()
