"""The sparse GAT example (examples/gat.py), its pyGAT-on-torch baseline and bench/gat.py.

* ``graph_attention`` (all heads in one multi-head spmm, per-row max shift) equals the
  dense masked-softmax GAT formula in NumPy, on a tiny graph with an isolated node and with
  1 and 3 heads; its gradients pass gradcheck and gradgradcheck in float64 and equal torch's
  dense formulation;
* the sparse input product with dropout on the stored values equals dense dropout math;
* a few epochs on Cora: the training loss falls and the validation accuracy is far above
  chance (deterministic for a seed); the example's main runs (Cora, Citeseer);
* examples/pygat_torch.py and bench/gat.py run (pyGAT only when torch is installed).
"""
from __future__ import annotations

import io
import os
import runpy
import sys
from contextlib import redirect_stdout

import numpy as np
import pytest

import cgrad

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
from gradcheck_util import gradcheck, gradgradcheck  # noqa: E402


def _load(name):
    return runpy.run_path(os.path.join(ROOT, "examples", name), run_name="example")


@pytest.fixture(scope="module")
def gat():
    return _load("gat.py")


@pytest.fixture
def torch():
    return pytest.importorskip("torch")


# a tiny directed edge list: node 4 is isolated (self loop only), node 0 has 3 neighbours
EDGES = np.array([[0, 0, 0, 1, 2, 3, 1],
                  [1, 2, 3, 0, 1, 0, 3]])
N = 5


def _graph(gat):
    return gat["Graph"](EDGES, N)


def _dense_reference(h, a_src, a_dst, alpha=0.2):
    """GAT with a dense mask (self loops added): (N, H, F)."""
    H, Fo = a_src.shape
    h3 = h.reshape(N, H, Fo)
    mask = np.eye(N, dtype=bool)
    mask[EDGES[0], EDGES[1]] = True
    out = np.empty_like(h3)
    for k in range(H):
        s, t = h3[:, k] @ a_src[k], h3[:, k] @ a_dst[k]
        e = s[:, None] + t[None, :]
        e = np.where(e > 0, e, alpha * e)
        e = np.where(mask, e, -np.inf)
        att = np.exp(e - e.max(1, keepdims=True))
        att /= att.sum(1, keepdims=True)
        out[:, k] = att @ h3[:, k]
    return out


def _inputs(H, Fo, dtype=np.float64, seed=0, requires_grad=False):
    rng = np.random.default_rng(seed)
    arrs = [rng.standard_normal((N, H * Fo)), rng.standard_normal((H, Fo)),
            rng.standard_normal((H, Fo))]
    return [cgrad.tensor(a.astype(dtype), requires_grad=requires_grad) for a in arrs]


def test_graph_structure(gat):
    g = _graph(gat)
    assert g.num_edges == EDGES.shape[1] + N
    lin = g.row * N + g.col
    assert np.all(np.diff(lin) > 0)                          # sorted, unique
    assert set(zip(g.row[g.row == g.col], g.col[g.row == g.col])) == {(i, i) for i in range(N)}
    p = g.pattern                                            # one (N, N) Pattern for all heads
    assert isinstance(p, cgrad.sparse.Pattern) and p.shape == (N, N)
    assert p.is_canonical() and p.nnz == g.num_edges
    assert not p.idx.flags.writeable                         # owned by the Pattern
    assert np.shares_memory(g.row, p.idx) and np.shares_memory(g.col, p.idx)
    np.testing.assert_array_equal(p.idx, np.stack([g.row, g.col]))
    # self loops already present and duplicates are merged
    g2 = gat["Graph"](np.concatenate([EDGES, EDGES, [[2], [2]]], 1), N)
    np.testing.assert_array_equal(g2.row, g.row)
    np.testing.assert_array_equal(g2.col, g.col)


@pytest.mark.parametrize("H,Fo", [(1, 3), (3, 2)])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_attention_matches_dense_formula(gat, H, Fo, dtype):
    h, a_src, a_dst = _inputs(H, Fo, dtype)
    out = gat["graph_attention"](h, a_src, a_dst, _graph(gat))
    assert out.shape == (N, H, Fo) and out.dtype == dtype
    ref = _dense_reference(h.numpy().astype(np.float64), a_src.numpy().astype(np.float64),
                           a_dst.numpy().astype(np.float64))
    tol = 1e-5 if dtype == np.float32 else 1e-12
    np.testing.assert_allclose(out.numpy(), ref, rtol=tol, atol=tol)


def test_attention_is_stable_for_large_scores(gat):
    h, a_src, a_dst = _inputs(2, 2)
    big = cgrad.tensor(h.numpy() * 1e3)                      # scores ~ 1e3: exp overflows
    out = gat["graph_attention"](big, a_src, a_dst, _graph(gat))
    assert np.all(np.isfinite(out.numpy()))
    np.testing.assert_allclose(out.numpy(), _dense_reference(big.numpy(), a_src.numpy(),
                                                             a_dst.numpy()), rtol=1e-10)


@pytest.mark.parametrize("H,Fo", [(1, 2), (2, 2)])
def test_attention_gradcheck(gat, H, Fo):
    g = _graph(gat)
    fn = gat["graph_attention"]
    inputs = _inputs(H, Fo, requires_grad=True)
    assert gradcheck(lambda h, a, b: fn(h, a, b, g), inputs)
    assert gradgradcheck(lambda h, a, b: fn(h, a, b, g), inputs)


def test_layer_gradcheck_with_sparse_input(gat):
    """One GATLayer as used for the first layer: spmm(x) @ W then attention, float64."""
    g = _graph(gat)
    fn = gat["graph_attention"]
    rng = np.random.default_rng(1)
    H, Fo, n_in = 2, 2, 6
    xd = rng.standard_normal((N, n_in)) * (rng.random((N, n_in)) < 0.4)
    ind = cgrad.tensor(np.stack(np.nonzero(xd)).astype(np.int64))
    xv = cgrad.tensor(xd[np.nonzero(xd)])
    W = cgrad.tensor(rng.standard_normal((n_in, H * Fo)), requires_grad=True)
    a_src, a_dst = (cgrad.tensor(rng.standard_normal((H, Fo)), requires_grad=True)
                    for _ in range(2))

    def layer(W, a, b):
        return fn(cgrad.spmm(ind, xv, (N, n_in), W), a, b, g)

    assert gradcheck(layer, [W, a_src, a_dst])
    ref = _dense_reference(xd @ W.detach().numpy(), a_src.detach().numpy(),
                           a_dst.detach().numpy())
    np.testing.assert_allclose(layer(W, a_src, a_dst).detach().numpy(), ref, rtol=1e-12)


def test_attention_gradients_match_torch(gat, torch):
    H, Fo = 3, 2
    g = _graph(gat)
    h, a_src, a_dst = _inputs(H, Fo, requires_grad=True)
    out = gat["graph_attention"](h, a_src, a_dst, g)
    v = np.random.default_rng(5).standard_normal(out.shape)
    out.backward(cgrad.tensor(v))

    th, ta, tb = (torch.tensor(t.detach().numpy(), requires_grad=True) for t in (h, a_src, a_dst))
    mask = torch.eye(N, dtype=torch.bool)
    mask[EDGES[0], EDGES[1]] = True
    h3 = th.view(N, H, Fo)
    s = (h3 * ta).sum(-1)                                    # (N, H)
    t = (h3 * tb).sum(-1)
    e = torch.nn.functional.leaky_relu(s.t()[:, :, None] + t.t()[:, None, :], 0.2)  # (H,N,N)
    att = torch.softmax(e.masked_fill(~mask, float("-inf")), dim=-1)
    tout = torch.einsum("kij,jkf->ikf", att, h3)
    np.testing.assert_allclose(out.detach().numpy(), tout.detach().numpy(), rtol=1e-12)
    tout.backward(torch.tensor(v))
    for ours, theirs in ((h, th), (a_src, ta), (a_dst, tb)):
        np.testing.assert_allclose(ours.grad.numpy(), theirs.grad.numpy(), rtol=1e-10,
                                   atol=1e-12)


def test_attention_dropout(gat):
    """Training mode drops attention coefficients (scaled by 1/(1-p)); eval mode does not."""
    g = _graph(gat)
    h, a_src, a_dst = _inputs(2, 2)
    fn = gat["graph_attention"]
    ref = fn(h, a_src, a_dst, g).numpy()
    np.testing.assert_array_equal(fn(h, a_src, a_dst, g, dropout=0.6).numpy(), ref)
    cgrad.manual_seed(0)
    dropped = fn(h, a_src, a_dst, g, dropout=0.6, training=True).numpy()
    assert not np.allclose(dropped, ref)
    assert np.all(np.isfinite(dropped))


def test_sparse_input_dropout_equals_dense(gat):
    """x @ W with dropout on the stored values of the sparse x == dense dropout of x."""
    x, *_ = gat["load_dataset"]("cora")
    xd = x.to_dense()
    assert xd.shape == (2708, 1433)
    np.testing.assert_allclose(xd.sum(1), 1.0, rtol=1e-5)   # row-normalised
    W = cgrad.randn(1433, 16)
    cgrad.manual_seed(3)
    vals = cgrad.nn.functional.dropout(x.values, 0.6, True)
    h = cgrad.spmm(x.indices, vals, x.shape, W)
    mask = np.zeros_like(xd)
    ind = x.indices.numpy()
    mask[ind[0], ind[1]] = vals.numpy() / x.values.numpy()
    np.testing.assert_allclose(h.numpy(), (xd * mask) @ W.numpy(), rtol=1e-4, atol=1e-6)


def _args(gat, *extra):
    return gat["parse_args"](["--quiet", *extra])


def test_cora_few_epochs_learn(gat):
    res = gat["train"](_args(gat, "--epochs", "15", "--seed", "72"), log=lambda *a: None)
    hist = np.array(res["history"])
    assert hist.shape == (15, 4)
    assert hist[-3:, 0].mean() < hist[:3, 0].mean() - 0.05  # training loss falls
    assert np.all(np.diff(hist[:, 2]) < 0)                   # val loss falls every epoch
    assert hist[-1, 3] > 0.5                                 # val acc (chance: 1/7)
    assert res["test_acc"] > 0.5
    # deterministic for a seed
    res2 = gat["train"](_args(gat, "--epochs", "3", "--seed", "72"), log=lambda *a: None)
    np.testing.assert_array_equal(np.array(res2["history"]), hist[:3])


def test_early_stopping_restores_best(gat):
    tr = gat["Trainer"](_args(gat, "--seed", "0"))
    state0 = tr.state()
    for _ in range(3):
        tr.epoch()
    (l3, _), = tr.evaluate(tr.idx_val)
    tr.load_state(state0)
    (l0, _), = tr.evaluate(tr.idx_val)
    assert l0 > l3
    np.testing.assert_allclose(l0, np.log(7), rtol=0.05)     # untrained: about ln(7)


def test_main_runs_and_prints(gat, capsys):
    acc = gat["main"](["--epochs", "3", "--patience", "2"])
    out = capsys.readouterr().out
    assert "cora: 2708 nodes, 1433 features, 7 classes" in out
    assert out.count("train loss") == 3 and "ms" in out
    assert "test accuracy" in out
    assert 0.0 <= acc <= 1.0


def test_main_citeseer(gat, capsys):
    acc = gat["main"](["--dataset", "citeseer", "--epochs", "2", "--quiet"])
    out = capsys.readouterr().out
    assert "citeseer: 3327 nodes, 3703 features, 6 classes" in out
    assert "test accuracy" in out and "train loss" not in out
    assert 0.0 <= acc <= 1.0


def test_script_entry_point():
    import subprocess
    r = subprocess.run([sys.executable, os.path.join(ROOT, "examples", "gat.py"), "--epochs",
                        "1", "--quiet"], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert "test accuracy" in r.stdout


def test_pygat_torch_runs(torch):
    mod = _load("pygat_torch.py")
    buf = io.StringIO()
    with redirect_stdout(buf):
        acc = mod["main"](["--epochs", "2", "--quiet"])
    assert "Test set results" in buf.getvalue()
    assert 0.0 <= acc <= 1.0


def test_bench_gat_quick():
    bench = runpy.run_path(os.path.join(ROOT, "bench", "gat.py"), run_name="bench_gat")
    rows = bench["run"](epochs=1, use_torch=False)
    assert [r["system"] for r in rows] == ["cgrad"]
    assert rows[0]["median"] > 0 and rows[0]["vs_cgrad"] == 1.0
    assert "cgrad" in bench["render"](rows)


def test_bench_gat_scale_cell_and_table():
    """bench/gat_scale.py: one cgrad cell in-process on a tiny graph, and its table; the
    other systems are optional."""
    bench = runpy.run_path(os.path.join(ROOT, "bench", "gat_scale.py"), run_name="gat_scale")
    r = bench["run_cell"]("cgrad", 300, 2000, 2)
    assert r["steps"] == 2 and r["step_s"] > 0 and r["rss_peak_mb"] > 0
    assert np.isfinite(r["loss_first"]) and np.isfinite(r["loss_last"])
    table = bench["fmt_table"]({("cgrad", 300, 2000): [r]}, ((300, 2000),), ["cgrad"])
    assert "| 300 / 2,000 | cgrad |" in table


def test_attention_bitwise_equal_to_block_diagonal_formulation(gat):
    """graph_attention's one multi-head spmm on the graph's (N, N) pattern gives, bit for bit,
    the outputs and gradients of the former formulation: one spmm over the block-diagonal
    (N*H) x (N*H) matrix of E*H indices (i*H + k, j*H + k); float32, dropout on, a random
    graph, one and two sparse threads."""
    sparse = cgrad.sparse
    F = cgrad.nn.functional
    rng = np.random.default_rng(11)
    n, H, Fo = 200, 4, 3
    g = gat["Graph"](rng.integers(0, n, (2, 1500)), n)
    k = np.arange(H)
    block = sparse.Pattern(np.stack([(g.row[:, None] * H + k).ravel(),
                                     (g.col[:, None] * H + k).ravel()]), (n * H, n * H))

    def old(h, a_src, a_dst):
        eye = cgrad.eye(H, dtype=a_src.dtype).unsqueeze(1)
        A = cgrad.cat([(a_src.unsqueeze(-1) * eye).view(H * Fo, H),
                       (a_dst.unsqueeze(-1) * eye).view(H * Fo, H)], 1)
        st = h @ A
        e = F.leaky_relu(sparse.segment_gather(st[:, :H], g.row)
                         + sparse.segment_gather(st[:, H:], g.col), 0.2)
        p = (e - g.row_max(e.detach())).exp()
        den = sparse.segment_sum(p, g.row, n)
        p = F.dropout(p, 0.5, True)
        out = cgrad.spmm(block, p.reshape(-1), (n * H, n * H), h.view(n * H, Fo))
        return out.view(n, H, Fo) / den.unsqueeze(-1)

    def new(h, a_src, a_dst):
        return gat["graph_attention"](h, a_src, a_dst, g, 0.2, 0.5, True)

    v = rng.standard_normal((n, H, Fo)).astype(np.float32)
    arrs = [rng.standard_normal((n, H * Fo)), rng.standard_normal((H, Fo)),
            rng.standard_normal((H, Fo))]
    res = []
    prev = sparse.get_num_threads()
    try:
        for fn, threads in ((old, 1), (new, 1), (new, 2)):
            sparse.set_num_threads(threads)
            ins = [cgrad.tensor(a.astype(np.float32), requires_grad=True) for a in arrs]
            cgrad.manual_seed(7)
            out = fn(*ins)
            out.backward(cgrad.tensor(v))
            res.append([out.detach().numpy()] + [t.grad.numpy() for t in ins])
    finally:
        sparse.set_num_threads(prev)
    for other in res[1:]:
        for a, b in zip(res[0], other):
            assert a.dtype == np.float32
            np.testing.assert_array_equal(a, b)
