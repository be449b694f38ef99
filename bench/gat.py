#!/usr/bin/env python
"""GAT epoch time on Cora: cgrad's examples/gat.py vs pyGAT's SpGAT on torch.

    python bench/gat.py                 # Cora, 30 timed epochs of each system
    python bench/gat.py --quick         # 3 epochs each (smoke test)
    python bench/gat.py --dataset citeseer --epochs 20 --no-torch --json out.json

An epoch is what both training scripts do per epoch (pyGAT's train.py): one training step
(forward with dropout, nll loss, backward, Adam with weight decay) and one forward without
dropout for the validation loss. Same data (examples/data, row-normalised features, self
loops), same architecture (8 heads x 8 hidden, 1 output head) and hyper-parameters.
Systems:

* ``cgrad``: examples/gat.py (all heads in one multi-head sparse product on the graph's one
  structure, sparse input features, O(E * H * F) backward);
* ``torch pyGAT``: examples/pygat_torch.py, unmodified pyGAT SpGAT (one layer per head,
  ``adj.nonzero()`` on the dense N x N adjacency per layer, dense N x N gradient in
  SpecialSpmmFunction.backward); only when torch is importable.

Method: both models are built (seeded), warmed up by 2 untimed epochs, then ``--epochs``
epochs are timed, alternating between the systems (cgrad, torch, cgrad, ...) so that machine
drift hits both alike; ``gc.collect()`` before each. The training is real (the models learn
while being timed). Medians (min) in ms per epoch and the ratio of medians. Threads: when run
as a script, OPENBLAS/OMP/MKL threads = 1 and torch.set_num_threads(1) (as bench/run.py);
``--threads`` leaves them to the environment. The loss after the timed epochs is shown as a
sanity check (both systems must have learnt: it falls from ln(7) = 1.95 on Cora).
"""
import os
import sys

if __name__ == "__main__" and "--threads" not in sys.argv:
    for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ[_var] = "1"

import argparse  # noqa: E402
import gc  # noqa: E402
import importlib.util  # noqa: E402
import json  # noqa: E402
import statistics  # noqa: E402
import time  # noqa: E402

if os.path.dirname(os.path.abspath(__file__)) not in sys.path:     # imported by path (tests)
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import settle  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
EXAMPLES = os.path.join(ROOT, "examples")

FULL_EPOCHS, QUICK_EPOCHS, WARMUP = 30, 3, 2


def _load_module(name, filename):
    spec = importlib.util.spec_from_file_location(name, os.path.join(EXAMPLES, filename))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def load_cgrad_gat():
    """examples/gat.py as a module (cgrad from the install, or from the source tree)."""
    try:
        import cgrad  # noqa: F401
    except ImportError:
        sys.path.insert(0, ROOT)
    return _load_module("cgrad_example_gat", "gat.py")


def load_torch_gat(set_threads=True):
    """examples/pygat_torch.py as a module, or None when torch is not importable."""
    try:
        import torch
    except Exception:      # ImportError, or a broken install
        return None
    if set_threads:
        torch.set_num_threads(1)
    return _load_module("cgrad_example_pygat_torch", "pygat_torch.py")


def make_cgrad(gat, dataset, seed):
    tr = gat.Trainer(gat.parse_args(["--dataset", dataset, "--seed", str(seed)]))
    return tr.epoch


def make_torch(pygat, dataset, seed):
    model, optimizer, data = pygat.build(seed, dataset)
    return lambda: pygat.train_epoch(model, optimizer, data)


def run(quick=False, epochs=None, use_torch=True, dataset="cora", seed=72, log=None,
        set_threads=True):
    """Time GAT epochs -> list of row dicts (bench, dataset, system, median/min ms, n,
    loss_train/loss_val after the timed epochs, vs_cgrad). See render()."""
    epochs = epochs or (QUICK_EPOCHS if quick else FULL_EPOCHS)
    steps = {"cgrad": make_cgrad(load_cgrad_gat(), dataset, seed)}
    pygat = load_torch_gat(set_threads) if use_torch else None
    if pygat is not None:
        steps["torch pyGAT"] = make_torch(pygat, dataset, seed)
    last = {}
    for k, f in steps.items():
        for _ in range(WARMUP):
            last[k] = f()
    times = {k: [] for k in steps}
    for r in range(epochs):
        names = list(steps)
        names = names[r % len(names):] + names[:r % len(names)]
        for k in names:
            settle()
            t0 = time.perf_counter()
            last[k] = steps[k]()
            times[k].append(time.perf_counter() - t0)
    if log:
        print(f"  [gat {dataset}: {epochs} epochs of {', '.join(steps)}]", file=log, flush=True)
    rows = []
    for k, ts in times.items():
        rows.append({"bench": "gat", "dataset": dataset, "system": k,
                     "median": statistics.median(ts) * 1e3, "min": min(ts) * 1e3,
                     "n": len(ts), "loss_train": last[k][0], "loss_val": last[k][2]})
    ref = rows[0]["median"]
    for r in rows:
        r["vs_cgrad"] = r["median"] / ref
    return rows


def render(rows):
    if not rows:
        return ""
    r0 = rows[0]
    out = [f"GAT epoch (train step + validation forward), {r0['dataset']}, 8x8 heads; "
           f"ms median (min) over {r0['n']} epochs"]
    head = ["system", "ms/epoch", "vs cgrad", "loss train", "loss val"]
    table = [[r["system"], f"{r['median']:.1f} ({r['min']:.1f})", f"{r['vs_cgrad']:.2f}x",
              f"{r['loss_train']:.3f}", f"{r['loss_val']:.3f}"] for r in rows]
    w = [max(len(h), *(len(t[i]) for t in table)) for i, h in enumerate(head)]
    out.append("  ".join(h.ljust(x) for h, x in zip(head, w)).rstrip())
    out.append("-" * len(out[-1]))
    out += ["  ".join(v.ljust(x) for v, x in zip(t, w)).rstrip() for t in table]
    return "\n".join(out)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--epochs", type=int, default=None, help="timed epochs per system")
    ap.add_argument("--dataset", default="cora")
    ap.add_argument("--seed", type=int, default=72)
    ap.add_argument("--no-torch", action="store_true")
    ap.add_argument("--threads", action="store_true",
                    help="keep the environment's BLAS/torch thread settings")
    ap.add_argument("--json", default=None)
    a = ap.parse_args(argv)
    rows = run(quick=a.quick, epochs=a.epochs, use_torch=not a.no_torch, dataset=a.dataset,
               seed=a.seed, log=sys.stderr, set_threads=not a.threads)
    print(render(rows))
    if a.json:
        with open(a.json, "w") as fh:
            json.dump(rows, fh, indent=1)
    return rows


if __name__ == "__main__":
    main()
