#!/usr/bin/env python
"""Whole training steps of real models: cgrad against torch, one thread, in one process.

    python bench/models.py                   # every model, prints the tables
    python bench/models.py --only gpt lstm   # a subset (ids below)
    python bench/models.py --quick           # tiny sizes, cgrad alone: a smoke test
    python bench/models.py --repeats 31 --profile-steps 20 --json out.json

The models (written once against a module ``T``, which is ``torch`` or ``cgrad``: the same
source runs on both, only the module object differs):

* ``gpt``: nanoGPT-tiny, the GPT of karpathy/nanoGPT's model.py (pre-LayerNorm blocks with
  bias, causal self-attention, GELU MLP, tied token embedding / lm_head, GPT-2 init) with
  n_layer 2, n_head 2, n_embd 64, block_size 32, vocab 65, dropout 0, batch 16; attention by
  ``F.scaled_dot_product_attention(is_causal=True)`` when both modules have it (nanoGPT's
  "flash" path, the one it takes on torch 2), otherwise the tril buffer + ``masked_fill``
  path (``--gpt-attention manual`` forces the latter; ``--only gpt-manual`` adds it as its
  own row); AdamW in configure_optimizers' two
  groups (2-D weights decay 0.1, the rest 0), lr 1e-3, betas (0.9, 0.99) as nanoGPT's
  shakespeare_char config, ``clip_grad_norm_(1.0)``.
* ``mm-tf``: karpathy/makemore's Transformer at its defaults (n_layer 4, n_head 4, n_embd 64,
  block_size 16 = the longest name of names.txt + 1, vocab 27, batch 32): manual causal
  attention with the tril buffer, makemore's own NewGELU (tanh formula with ``x ** 3.0``),
  cross-entropy with ``ignore_index=-1``; AdamW lr 5e-4, weight decay 0.01, betas (0.9, 0.99),
  eps 1e-8 (makemore's optimizer).
* ``mm-mlp``: makemore's MLP (an Embedding of vocab + 1 tokens, 16 rolled copies of the
  context concatenated, Linear(16 * 64, 64), tanh, Linear(64, 27)), same optimizer and batch.
* ``gcn``: one epoch of tkipf/pygcn on Cora (examples/data/cora.npz): two GraphConvolution
  layers (``mm`` then ``spmm`` with the row-normalised sparse adjacency with self loops),
  hidden 16, relu, dropout 0.5, log_softmax + nll_loss on idx_train, Adam lr 0.01 weight decay
  5e-4, then pygcn's validation forward in eval mode (its train() without --fastmode: not
  under no_grad, as there); features row-normalised and dense, as pygcn's.
* ``lstm``: examples/char_lstm.py's model (imported: Embedding 32, 2-layer LSTM 128, Linear)
  on the Zen of Python, batch 32, sequence 64, Adam lr 3e-3, ``clip_grad_norm_(1.0)``.
* ``cnn``: examples/digits_cnn.py's model (imported: two Conv2d + BatchNorm2d + ReLU +
  MaxPool2d, Dropout 0.25, Linear) on 8x8 digits (scikit-learn's when installed, otherwise
  random images of the same shape), batch 64, Adam lr 3e-3.

The token inputs of gpt and the makemore models are random (nanoGPT's Shakespeare and
makemore's names.txt are not shipped; a step costs the same on any tokens): uniform tokens
for gpt, and for makemore words of 2-15 letters laid out as makemore's CharDataset does
(x = <start> + word, y = word + <end>, then -1, ignored by the loss).

Method (bench/common.py's harness, as bench/run.py): OPENBLAS/OMP/MKL threads = 1 (set here
before NumPy is imported) and ``torch.set_num_threads(1)``. Per model, torch's model is built
first (seeded) and its initial parameters and buffers are copied into cgrad's; with dropout
off, one step of each is checked before anything is timed: the loss, every parameter's
gradient (float32 tolerance: max |diff| <= 1e-3 * max |torch's|, the measured worst is
printed) and every parameter after the optimizer step. Then one untimed warm-up and
``--repeats`` steps per system, interleaved (the order rotates each round), ``gc.collect()``
and a heap settling before each step, the collector enabled while timing. A step is
``loss = forward(batch)`` | ``loss.backward()`` | ``clip_grad_norm_`` (when the model uses it)
+ ``opt.step()`` + ``opt.zero_grad()`` | (gcn) the validation forward; the batches are
tensors made before timing, 4 of them used in turn. Reported: the median process CPU time of
a step (every system computes on one thread), and wall-time medians of the phases; then a
cProfile of ``--profile-steps`` of cgrad's steps, the top functions by internal time.
"""
import os
import sys

if __name__ == "__main__":
    for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ[_var] = "1"

import argparse  # noqa: E402
import importlib.util  # noqa: E402
import json  # noqa: E402
import math  # noqa: E402

import numpy as np  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
EXAMPLES = os.path.join(ROOT, "examples")
if HERE not in sys.path:                 # imported by path (bench/run.py, tests)
    sys.path.insert(0, HERE)
from common import (cpu_time, err_text, interleaved, load_cgrad,  # noqa: E402
                    load_torch, machine_info, perf_counter, stats)

N_BATCHES = 4
REPEATS, QUICK_REPEATS = 21, 1
PROFILE_STEPS, QUICK_PROFILE_STEPS = 10, 1
TOP = int(os.environ.get("CGRAD_BENCH_TOP", "8"))
RTOL = 1e-3
NOISE = 1e-3


# ---------------------------------------------------------------------------------------------
# models: each builder takes the module T and a config dict, and returns a dict with
#   model, opt, clip (max norm or None), loss(model, batch) -> loss tensor,
#   epoch_rest(model, batch) (or None): what an epoch does after the optimizer step,
#   batches(rng) -> list of numpy batches, to_tensors(T, batch) -> batch of T tensors.

def _example(name):
    spec = importlib.util.spec_from_file_location(f"cgrad_bench_example_{name}",
                                                  os.path.join(EXAMPLES, f"{name}.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _tensors(T, batch):
    return tuple(T.from_numpy(np.ascontiguousarray(b)) for b in batch)


def gpt_model(T, c):
    """nanoGPT's GPT (model.py), our transcription: same modules, names and init."""
    nn, F = T.nn, T.nn.functional

    class LayerNorm(nn.Module):
        def __init__(self, ndim, bias):
            super().__init__()
            self.weight = nn.Parameter(T.ones(ndim))
            self.bias = nn.Parameter(T.zeros(ndim)) if bias else None

        def forward(self, x):
            return F.layer_norm(x, self.weight.shape, self.weight, self.bias, 1e-5)

    class CausalSelfAttention(nn.Module):
        def __init__(self):
            super().__init__()
            e = c["n_embd"]
            self.c_attn = nn.Linear(e, 3 * e, bias=c["bias"])
            self.c_proj = nn.Linear(e, e, bias=c["bias"])
            self.attn_dropout = nn.Dropout(c["dropout"])
            self.resid_dropout = nn.Dropout(c["dropout"])
            self.n_head, self.n_embd, self.dropout = c["n_head"], e, c["dropout"]
            self.flash = c["attention"] == "sdpa"
            if not self.flash:
                bs = c["block_size"]
                self.register_buffer("bias", T.tril(T.ones(bs, bs)).view(1, 1, bs, bs))

        def forward(self, x):
            B, L, C = x.size()
            q, k, v = self.c_attn(x).split(self.n_embd, dim=2)
            hs = C // self.n_head
            k = k.view(B, L, self.n_head, hs).transpose(1, 2)
            q = q.view(B, L, self.n_head, hs).transpose(1, 2)
            v = v.view(B, L, self.n_head, hs).transpose(1, 2)
            if self.flash:
                y = F.scaled_dot_product_attention(
                    q, k, v, attn_mask=None, dropout_p=self.dropout if self.training else 0,
                    is_causal=True)
            else:
                att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
                att = att.masked_fill(self.bias[:, :, :L, :L] == 0, float("-inf"))
                att = self.attn_dropout(F.softmax(att, dim=-1))
                y = att @ v
            y = y.transpose(1, 2).contiguous().view(B, L, C)
            return self.resid_dropout(self.c_proj(y))

    class MLP(nn.Module):
        def __init__(self):
            super().__init__()
            e = c["n_embd"]
            self.c_fc = nn.Linear(e, 4 * e, bias=c["bias"])
            self.gelu = nn.GELU()
            self.c_proj = nn.Linear(4 * e, e, bias=c["bias"])
            self.dropout = nn.Dropout(c["dropout"])

        def forward(self, x):
            return self.dropout(self.c_proj(self.gelu(self.c_fc(x))))

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln_1 = LayerNorm(c["n_embd"], bias=c["bias"])
            self.attn = CausalSelfAttention()
            self.ln_2 = LayerNorm(c["n_embd"], bias=c["bias"])
            self.mlp = MLP()

        def forward(self, x):
            x = x + self.attn(self.ln_1(x))
            return x + self.mlp(self.ln_2(x))

    class GPT(nn.Module):
        def __init__(self):
            super().__init__()
            e = c["n_embd"]
            self.transformer = nn.ModuleDict(dict(
                wte=nn.Embedding(c["vocab"], e), wpe=nn.Embedding(c["block_size"], e),
                drop=nn.Dropout(c["dropout"]),
                h=nn.ModuleList([Block() for _ in range(c["n_layer"])]),
                ln_f=LayerNorm(e, bias=c["bias"])))
            self.lm_head = nn.Linear(e, c["vocab"], bias=False)
            self.transformer.wte.weight = self.lm_head.weight          # weight tying
            self.apply(self._init_weights)
            for pn, p in self.named_parameters():
                if pn.endswith("c_proj.weight"):
                    nn.init.normal_(p, mean=0.0, std=0.02 / math.sqrt(2 * c["n_layer"]))

        @staticmethod
        def _init_weights(m):
            if isinstance(m, nn.Linear):
                nn.init.normal_(m.weight, mean=0.0, std=0.02)
                if m.bias is not None:
                    nn.init.zeros_(m.bias)
            elif isinstance(m, nn.Embedding):
                nn.init.normal_(m.weight, mean=0.0, std=0.02)

        def forward(self, idx, targets):
            b, t = idx.size()
            pos = T.arange(0, t, dtype=T.long)
            x = self.transformer.drop(self.transformer.wte(idx) + self.transformer.wpe(pos))
            for block in self.transformer.h:
                x = block(x)
            logits = self.lm_head(self.transformer.ln_f(x))
            return F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1),
                                   ignore_index=-1)

    return GPT()


def build_gpt(T, c):
    model = gpt_model(T, c)
    params = [p for p in model.parameters() if p.requires_grad]   # configure_optimizers
    groups = [{"params": [p for p in params if p.dim() >= 2], "weight_decay": c["wd"]},
              {"params": [p for p in params if p.dim() < 2], "weight_decay": 0.0}]
    opt = T.optim.AdamW(groups, lr=c["lr"], betas=c["betas"])

    def batches(rng):
        out = []
        for _ in range(N_BATCHES):
            d = rng.integers(0, c["vocab"], (c["batch"], c["block_size"] + 1))
            out.append((d[:, :-1], d[:, 1:]))
        return out
    return dict(model=model, opt=opt, clip=c["clip"], loss=lambda m, b: m(*b),
                batches=batches, to_tensors=_tensors)


def makemore_model(T, c):
    """makemore's Transformer (c["kind"] == "transformer") or MLP, our transcription."""
    nn, F = T.nn, T.nn.functional

    class NewGELU(nn.Module):
        def forward(self, x):
            return 0.5 * x * (1.0 + T.tanh(math.sqrt(2.0 / math.pi)
                                           * (x + 0.044715 * T.pow(x, 3.0))))

    class CausalSelfAttention(nn.Module):
        def __init__(self):
            super().__init__()
            e, bs = c["n_embd"], c["block_size"]
            self.c_attn = nn.Linear(e, 3 * e)
            self.c_proj = nn.Linear(e, e)
            self.register_buffer("bias", T.tril(T.ones(bs, bs)).view(1, 1, bs, bs))
            self.n_head, self.n_embd = c["n_head"], e

        def forward(self, x):
            B, L, C = x.size()
            q, k, v = self.c_attn(x).split(self.n_embd, dim=2)
            hs = C // self.n_head
            k = k.view(B, L, self.n_head, hs).transpose(1, 2)
            q = q.view(B, L, self.n_head, hs).transpose(1, 2)
            v = v.view(B, L, self.n_head, hs).transpose(1, 2)
            att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
            att = att.masked_fill(self.bias[:, :, :L, :L] == 0, float("-inf"))
            y = F.softmax(att, dim=-1) @ v
            return self.c_proj(y.transpose(1, 2).contiguous().view(B, L, C))

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            e = c["n_embd"]
            self.ln_1 = nn.LayerNorm(e)
            self.attn = CausalSelfAttention()
            self.ln_2 = nn.LayerNorm(e)
            self.mlp = nn.ModuleDict(dict(c_fc=nn.Linear(e, 4 * e), c_proj=nn.Linear(4 * e, e),
                                          act=NewGELU()))

        def forward(self, x):
            m = self.mlp
            x = x + self.attn(self.ln_1(x))
            return x + m.c_proj(m.act(m.c_fc(self.ln_2(x))))

    class Transformer(nn.Module):
        def __init__(self):
            super().__init__()
            e = c["n_embd"]
            self.transformer = nn.ModuleDict(dict(
                wte=nn.Embedding(c["vocab"], e), wpe=nn.Embedding(c["block_size"], e),
                h=nn.ModuleList([Block() for _ in range(c["n_layer"])]),
                ln_f=nn.LayerNorm(e)))
            self.lm_head = nn.Linear(e, c["vocab"], bias=False)

        def forward(self, idx, targets):
            b, t = idx.size()
            pos = T.arange(0, t, dtype=T.long).unsqueeze(0)
            x = self.transformer.wte(idx) + self.transformer.wpe(pos)
            for block in self.transformer.h:
                x = block(x)
            logits = self.lm_head(self.transformer.ln_f(x))
            return F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1),
                                   ignore_index=-1)

    class MLP(nn.Module):
        def __init__(self):
            super().__init__()
            self.block_size, self.vocab = c["block_size"], c["vocab"]
            self.wte = nn.Embedding(c["vocab"] + 1, c["n_embd"])      # + the <blank> token
            self.mlp = nn.Sequential(nn.Linear(self.block_size * c["n_embd"], c["n_embd2"]),
                                     nn.Tanh(), nn.Linear(c["n_embd2"], self.vocab))

        def forward(self, idx, targets):
            embs = []
            for _ in range(self.block_size):       # the k-th previous token's embedding
                embs.append(self.wte(idx))
                idx = T.roll(idx, 1, 1)
                idx[:, 0] = self.vocab
            logits = self.mlp(T.cat(embs, -1))
            return F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1),
                                   ignore_index=-1)

    return Transformer() if c["kind"] == "transformer" else MLP()


def makemore_batches(c, rng):
    """Words of 2..block_size-1 random letters in makemore's CharDataset layout."""
    out = []
    for _ in range(N_BATCHES):
        x = np.zeros((c["batch"], c["block_size"]), np.int64)
        y = np.zeros((c["batch"], c["block_size"]), np.int64)
        for i in range(c["batch"]):
            n = int(rng.integers(2, c["block_size"]))
            w = rng.integers(1, c["vocab"], n)
            x[i, 1:1 + n] = w
            y[i, :n] = w
            y[i, n + 1:] = -1
        out.append((x, y))
    return out


def build_makemore(T, c):
    model = makemore_model(T, c)
    opt = T.optim.AdamW(model.parameters(), lr=c["lr"], weight_decay=c["wd"],
                        betas=c["betas"], eps=c["eps"])
    return dict(model=model, opt=opt, clip=None, loss=lambda m, b: m(*b),
                batches=lambda rng: makemore_batches(c, rng), to_tensors=_tensors)


def gcn_model(T, c):
    """pygcn's GCN (layers.py, models.py), our transcription."""
    nn, F = T.nn, T.nn.functional

    class GraphConvolution(nn.Module):
        def __init__(self, fin, fout):
            super().__init__()
            self.weight = nn.Parameter(T.empty(fin, fout))
            self.bias = nn.Parameter(T.empty(fout))
            std = 1.0 / math.sqrt(fout)
            with T.no_grad():
                self.weight.uniform_(-std, std)
                self.bias.uniform_(-std, std)

        def forward(self, x, adj):
            return T.spmm(adj, T.mm(x, self.weight)) + self.bias

    class GCN(nn.Module):
        def __init__(self):
            super().__init__()
            self.gc1 = GraphConvolution(c["nfeat"], c["hidden"])
            self.gc2 = GraphConvolution(c["hidden"], c["nclass"])
            self.dropout = c["dropout"]

        def forward(self, x, adj):
            x = F.dropout(F.relu(self.gc1(x, adj)), self.dropout, training=self.training)
            return F.log_softmax(self.gc2(x, adj), dim=1)

    return GCN()


def load_cora(c):
    """pygcn's preprocessing of Cora from examples/data/cora.npz: row-normalised dense
    features, row-normalised adjacency with self loops (COO), labels, idx_train, idx_val."""
    import scipy.sparse as sp
    d = np.load(os.path.join(EXAMPLES, "data", "cora.npz"))
    feat = sp.csr_matrix((d["feat_data"], d["feat_indices"], d["feat_indptr"]),
                         shape=tuple(d["feat_shape"]))
    n = feat.shape[0]
    ei = d["edge_index"]
    adj = sp.coo_matrix((np.ones(ei.shape[1], np.float32), (ei[0], ei[1])), shape=(n, n))
    adj = (adj + sp.eye(n, dtype=np.float32)).tocsr()

    def rownorm(m):
        s = np.asarray(m.sum(1)).ravel()
        inv = np.zeros_like(s, dtype=np.float64)
        inv[s != 0] = 1.0 / s[s != 0]
        return sp.diags(inv) @ m

    feat = np.asarray(rownorm(feat).todense(), np.float32)
    adj = rownorm(adj).tocoo().astype(np.float32)
    if c.get("nodes"):                  # --quick: the first nodes' subgraph
        k = c["nodes"]
        keep = (adj.row < k) & (adj.col < k)
        adj = sp.coo_matrix((adj.data[keep], (adj.row[keep], adj.col[keep])), shape=(k, k))
        feat = feat[:k]
    idx = np.vstack([adj.row, adj.col]).astype(np.int64)
    labels = d["labels"][:feat.shape[0]].astype(np.int64)
    tr = d["idx_train"][d["idx_train"] < feat.shape[0]]
    va = d["idx_val"][d["idx_val"] < feat.shape[0]]
    return feat, idx, adj.data, adj.shape, labels, tr.astype(np.int64), va.astype(np.int64)


def build_gcn(T, c):
    data = load_cora(c)
    c = dict(c, nfeat=data[0].shape[1], nclass=int(data[4].max()) + 1)
    model = gcn_model(T, c)
    opt = T.optim.Adam(model.parameters(), lr=c["lr"], weight_decay=c["wd"])
    F = T.nn.functional

    def to_tensors(T_, b):
        feat, idx, vals, shape, labels, tr, va = b
        adj = T_.sparse_coo_tensor(T_.from_numpy(idx), T_.from_numpy(vals), shape,
                                   check_invariants=False)     # pygcn's: unchecked
        return (T_.from_numpy(feat), adj, T_.from_numpy(labels), T_.from_numpy(tr),
                T_.from_numpy(va))

    def loss(m, b):
        x, adj, labels, tr, _ = b
        m.train()
        out = m(x, adj)
        return F.nll_loss(out[tr], labels[tr])

    def epoch_rest(m, b):             # pygcn's train(): validation forward in eval mode
        x, adj, labels, _, va = b
        m.eval()
        out = m(x, adj)
        return F.nll_loss(out[va], labels[va])

    return dict(model=model, opt=opt, clip=None, loss=loss, epoch_rest=epoch_rest,
                batches=lambda rng: [data], to_tensors=to_tensors)


def build_lstm(T, c):
    ex = _example("char_lstm")
    text = ex.zen_of_python()
    chars = sorted(set(text))
    stoi = {ch: i for i, ch in enumerate(chars)}
    data = np.array([stoi[ch] for ch in text], dtype=np.int64)
    model = ex.build_model(T, len(chars), emb=c["emb"], hidden=c["hidden"], layers=c["layers"])
    opt = T.optim.Adam(model.parameters(), lr=c["lr"])
    V = len(chars)

    def batches(rng):
        out = []
        for _ in range(N_BATCHES):
            starts = rng.integers(0, len(data) - c["seq"] - 1, c["batch"])
            win = np.stack([data[s:s + c["seq"] + 1] for s in starts])
            out.append((win[:, :-1], win[:, 1:]))
        return out

    def loss(m, b):
        logits, _ = m(b[0])
        return T.nn.functional.cross_entropy(logits.reshape(-1, V), b[1].reshape(-1))

    return dict(model=model, opt=opt, clip=c["clip"], loss=loss, batches=batches,
                to_tensors=_tensors)


def digits_images(n, rng):
    """(images (n, 1, 8, 8) float32 standardised, labels): scikit-learn's digits when
    installed, otherwise random images of the same shape."""
    try:
        from sklearn.datasets import load_digits
        d = load_digits()
        x, y = (d.data / 16.0).astype(np.float32).reshape(-1, 1, 8, 8), d.target
    except ImportError:
        x = rng.random((n, 1, 8, 8), dtype=np.float32)
        y = rng.integers(0, 10, n)
    x = (x - x.mean()) / x.std()
    return x.astype(np.float32), y.astype(np.int64)


def build_cnn(T, c):
    ex = _example("digits_cnn")
    model = ex.build_model(T)
    opt = T.optim.Adam(model.parameters(), lr=c["lr"])

    def batches(rng):
        x, y = digits_images(c["batch"] * N_BATCHES, rng)
        pick = rng.permutation(len(x))[:c["batch"] * N_BATCHES].reshape(N_BATCHES, -1)
        return [(x[p], y[p]) for p in pick]

    def loss(m, b):
        return T.nn.functional.cross_entropy(m(b[0]), b[1])

    return dict(model=model, opt=opt, clip=None, loss=loss, batches=batches,
                to_tensors=_tensors)


# id -> (label, builder, full config, --quick config)
MM = dict(vocab=27, block_size=16, n_embd=64, n_embd2=64, n_layer=4, n_head=4, batch=32,
          lr=5e-4, wd=0.01, betas=(0.9, 0.99), eps=1e-8)
MM_Q = dict(MM, n_embd=16, n_embd2=16, n_layer=1, n_head=2, block_size=6, batch=4)
GPT = dict(n_layer=2, n_head=2, n_embd=64, block_size=32, vocab=65, dropout=0.0, bias=True,
           batch=16, lr=1e-3, wd=0.1, betas=(0.9, 0.99), clip=1.0)
GPT_Q = dict(GPT, n_layer=1, n_embd=16, block_size=8, batch=2)
MODELS = {
    "gpt": ("nanoGPT-tiny", build_gpt, GPT, GPT_Q),
    "gpt-manual": ("nanoGPT-tiny, manual attention", build_gpt,
                   dict(GPT, attention="manual"), dict(GPT_Q, attention="manual")),
    "mm-tf": ("makemore Transformer", build_makemore, dict(MM, kind="transformer"),
              dict(MM_Q, kind="transformer")),
    "mm-mlp": ("makemore MLP", build_makemore, dict(MM, kind="mlp"), dict(MM_Q, kind="mlp")),
    "gcn": ("pygcn epoch on Cora", build_gcn,
            dict(hidden=16, dropout=0.5, lr=0.01, wd=5e-4),
            dict(hidden=4, dropout=0.5, lr=0.01, wd=5e-4, nodes=300)),
    "lstm": ("char LSTM", build_lstm,
             dict(emb=32, hidden=128, layers=2, batch=32, seq=64, lr=3e-3, clip=1.0),
             dict(emb=8, hidden=16, layers=1, batch=2, seq=8, lr=3e-3, clip=1.0)),
    "cnn": ("digits CNN", build_cnn,
            dict(batch=64, lr=3e-3), dict(batch=8, lr=3e-3)),
}
DEFAULT = ["gpt", "mm-tf", "mm-mlp", "gcn", "lstm", "cnn"]     # gpt-manual: on request


def describe(mid, c):
    if mid.startswith("gpt"):
        return (f"{c['n_layer']} layers, {c['n_head']} heads, n_embd {c['n_embd']}, block "
                f"{c['block_size']}, vocab {c['vocab']}, batch {c['batch']}, attention "
                f"{c['attention']}; AdamW 2 groups, clip 1.0")
    if mid in ("mm-tf", "mm-mlp"):
        shape = (f"{c['n_layer']} layers, {c['n_head']} heads, n_embd {c['n_embd']}"
                 if mid == "mm-tf" else f"n_embd {c['n_embd']}, n_embd2 {c['n_embd2']}")
        return f"{shape}, block {c['block_size']}, vocab {c['vocab']}, batch {c['batch']}; AdamW"
    if mid == "gcn":
        return (f"hidden {c['hidden']}, dropout {c['dropout']}, {c.get('nodes') or 2708} "
                "nodes; Adam wd 5e-4; + validation forward")
    if mid == "lstm":
        return (f"examples/char_lstm.py: emb {c['emb']}, {c['layers']}x LSTM {c['hidden']}, batch {c['batch']}, seq "
                f"{c['seq']}; Adam, clip 1.0")
    data = "scikit-learn's digits" if importlib.util.find_spec("sklearn") else "random 8x8 images"
    return f"examples/digits_cnn.py, batch {c['batch']} of {data}; Adam"


# ---------------------------------------------------------------------------------------------
# one step, split in phases

def _set_dropout(model, p):
    """Set every dropout probability of the model (nn.Dropout modules and pygcn's float
    attribute) to p; returns the old values for _restore_dropout."""
    old = []
    for m in model.modules():
        if type(m).__name__ == "Dropout":
            old.append((m, "p", m.p))
            m.p = p
        elif isinstance(getattr(m, "dropout", None), float):
            old.append((m, "dropout", m.dropout))
            m.dropout = p
    return old


def _restore_dropout(old):
    for m, attr, v in old:
        setattr(m, attr, v)


class Step:
    """One system's model, optimizer and batches; run() is one timed training step."""

    def __init__(self, T, spec, np_batches):
        self.T, self.spec = T, spec
        self.model, self.opt = spec["model"], spec["opt"]
        self.params = list(self.model.parameters())
        self.batches = [spec["to_tensors"](T, b) for b in np_batches]
        self.i = 0

    def forward(self, batch):
        return self.spec["loss"](self.model, batch)

    def update(self):
        if self.spec["clip"] is not None:
            self.T.nn.utils.clip_grad_norm_(self.params, self.spec["clip"])
        self.opt.step()
        self.opt.zero_grad()

    def run(self):
        batch = self.batches[self.i % len(self.batches)]
        self.i += 1
        rest = self.spec.get("epoch_rest")
        c0, t0 = cpu_time(), perf_counter()
        loss = self.forward(batch)
        t1 = perf_counter()
        loss.backward()
        t2 = perf_counter()
        self.update()
        t3 = perf_counter()
        extra = rest(self.model, batch) if rest else None
        t4, c4 = perf_counter(), cpu_time()
        ph = {"fwd": t1 - t0, "bwd": t2 - t1, "opt": t3 - t2, "total": t4 - t0, "cpu": c4 - c0}
        if rest:
            ph["rest"] = t4 - t3
        return ph, (loss, extra)


def copy_weights(src_model, dst_model, cg):
    """torch's parameters and buffers into cgrad's model (by state_dict names)."""
    sd = {k: cg.tensor(v.detach().numpy().copy()) for k, v in src_model.state_dict().items()}
    dst_model.load_state_dict(sd)


def check(steps, to_np):
    """One step of cgrad and torch with dropout off: loss, gradients, parameters after the
    update. -> (status 'ok' or what differs, worst relative difference).

    Tolerances (float32): a gradient's max |diff| <= RTOL * max(max |torch's gradient|,
    NOISE * the model's largest |gradient|): gradients that are zero in exact arithmetic (a
    convolution's bias before BatchNorm, attention's key bias) are rounding noise on both
    sides. After the step, max |diff| <= RTOL * max |torch's parameter| over the entries whose
    gradient is above that noise level (Adam's first step is +-lr by the sign of the noise)."""
    names = {}
    grads, after, losses = {}, {}, {}
    for name, st in steps.items():
        old = _set_dropout(st.model, 0.0)
        try:
            st.opt.zero_grad()
            loss = st.forward(st.batches[0])
            loss.backward()
            named = list(st.model.named_parameters())
            names[name] = [n for n, _ in named]
            grads[name] = [to_np(p.grad) if p.grad is not None else None for _, p in named]
            losses[name] = float(loss.item())
            st.update()
            after[name] = [to_np(p) for _, p in named]
        finally:
            _restore_dropout(old)
    if names["cgrad"] != names["torch"]:
        return f"parameter names differ: {names['cgrad'][:3]} / {names['torch'][:3]}", None
    bad, worst = [], 0.0

    def cmp(what, g, r, scale, mask=None):
        nonlocal worst
        if np.shape(g) != np.shape(r):
            bad.append(f"{what}: shape {np.shape(g)} != {np.shape(r)}")
            return
        d = np.abs(np.asarray(g, np.float64) - r)
        if mask is not None:
            d = d[mask]
        if d.size and not np.isfinite(d).all():
            bad.append(f"{what}: non-finite")
            return
        e = float(d.max()) / scale if d.size else 0.0
        worst = max(worst, e)
        if e > RTOL:
            bad.append(f"{what}: max |diff| {e:.2g} x {scale:.2g}")

    cmp("loss", losses["cgrad"], losses["torch"], abs(losses["torch"]) or 1.0)
    gmax = max((float(np.abs(r).max()) for r in grads["torch"] if r is not None and r.size),
               default=1.0)
    for n, g, r, pa, pr in zip(names["cgrad"], grads["cgrad"], grads["torch"], after["cgrad"],
                               after["torch"]):
        if (g is None) != (r is None):
            bad.append(f"grad {n}: missing on one side")
            continue
        if r is None:
            continue
        cmp(f"grad {n}", g, r, max(float(np.abs(r).max(initial=0)), NOISE * gmax))
        if np.shape(g) == np.shape(r):
            cmp(f"{n} after the step", pa, pr, float(np.abs(pr).max(initial=0)) or 1.0,
                mask=np.abs(r) > NOISE * gmax)
    return ("ok" if not bad else "; ".join(bad[:3])), worst


def profile_cgrad(step, n):
    """cProfile of n cgrad steps -> rows of the top functions by internal time."""
    import cProfile
    import pstats
    step.run()
    pr = cProfile.Profile()
    pr.enable()
    for _ in range(n):
        step.run()
    pr.disable()
    st = pstats.Stats(pr)
    total = sum(v[2] for v in st.stats.values()) or 1.0
    rows = []
    for (fn, line, func), (cc, nc, tt, ct, _) in sorted(st.stats.items(),
                                                        key=lambda kv: -kv[1][2])[:TOP]:
        if fn == "~":
            where = func
        else:
            if fn.startswith(ROOT):
                rel = os.path.relpath(fn, ROOT)
            elif "site-packages" + os.sep in fn:
                rel = fn.split("site-packages" + os.sep, 1)[1]
            else:
                rel = os.path.basename(fn)
            where = f"{rel}:{line}({func})"
        rows.append({"function": where, "calls": nc / n, "tottime_ms": tt / n * 1e3,
                     "share": tt / total})
    return {"steps": n, "profiled_ms": total / n * 1e3, "top": rows}


def run_model(mid, quick, libs, repeats, profile_steps, seed=0, gpt_attention="auto"):
    label, build, full, small = MODELS[mid]
    c = dict(small if quick else full)
    F_has = all(hasattr(T.nn.functional, "scaled_dot_product_attention") for T in libs.values())
    if mid == "gpt":
        c["attention"] = ("sdpa" if F_has else "manual") if gpt_attention == "auto" \
            else gpt_attention
    out = {"id": mid, "label": label, "config": describe(mid, c), "systems": {}}
    cg = libs["cgrad"]
    steps = {}
    np_batches = None
    for name in (["torch"] if "torch" in libs else []) + ["cgrad"]:
        T = libs[name]
        T.manual_seed(seed)
        spec = build(T, c)
        if np_batches is None:
            np_batches = spec["batches"](np.random.default_rng(seed))
        steps[name] = Step(T, spec, np_batches)
    if "torch" in steps:
        copy_weights(steps["torch"].model, steps["cgrad"].model, cg)
        out["check"], out["check_worst"] = check(steps, lambda t: np.array(
            t.detach().numpy(), dtype=np.float64))
    else:
        out["check"], out["check_worst"] = "-", None
    samples, errors = interleaved({k: s.run for k, s in steps.items()}, repeats,
                                  warmup=0 if quick else 1)
    for name in steps:
        if name in errors:
            out["systems"][name] = {"error": errors[name]}
        else:
            out["systems"][name] = {p: stats(v, 1e3) for p, v in samples[name].items()}
    if "cgrad" not in errors and profile_steps:
        out["profile"] = profile_cgrad(steps["cgrad"], profile_steps)
    return out


def run(quick=False, use_torch=True, only=None, repeats=None, profile_steps=None, log=None,
        gpt_attention="auto"):
    """Time every model (or `only`) -> list of row dicts (see render())."""
    libs = {"cgrad": load_cgrad()}
    if use_torch:
        t = load_torch()
        if t is not None:
            libs["torch"] = t
    repeats = repeats or (QUICK_REPEATS if quick else REPEATS)
    profile_steps = (QUICK_PROFILE_STEPS if quick else PROFILE_STEPS) if profile_steps is None \
        else profile_steps
    rows = []
    for mid in only or DEFAULT:
        t0 = perf_counter()
        try:
            rows.append(run_model(mid, quick, libs, repeats, profile_steps,
                                  gpt_attention=gpt_attention))
        except Exception as e:
            import traceback
            traceback.print_exc()
            rows.append({"id": mid, "label": MODELS[mid][0], "config": "", "systems": {},
                         "error": err_text(e), "check": "-"})
        if log:
            print(f"  [models {mid}: {perf_counter() - t0:.1f} s]", file=log, flush=True)
    return rows


# ---------------------------------------------------------------------------------------------
# output

def _table(head, rows, left=(0,)):
    """A Markdown table; the columns in `left` are left-aligned, the others right-aligned."""
    out = ["| " + " | ".join(head) + " |",
           "|" + "|".join("---" if i in left else "---:" for i in range(len(head))) + "|"]
    out += ["| " + " | ".join(str(x) for x in r) + " |" for r in rows]
    return "\n".join(out)


def _ms(d, phase):
    v = d.get(phase) if d else None
    return "-" if not v else f"{v['median']:.2f}"


def _ratio(a, b):
    return "-" if a is None or not b else f"{a / b:.2f}x"


def _med(r, system, phase):
    d = r["systems"].get(system) or {}
    return d[phase]["median"] if phase in d else None


def render(rows):
    if not rows:
        return ""
    out = ["Training steps of real models, one thread; ms per step, medians of interleaved "
           "steps. step: process CPU time (min in parentheses); phases: wall time.", ""]
    head = ["model", "config", "cgrad ms", "torch ms", "cgrad/torch", "gradients"]
    t = []
    for r in rows:
        if "error" in r:
            t.append([r["label"], r["config"], "ERROR", "-", "-", r["error"]])
            continue
        cells = []
        for s in ("cgrad", "torch"):
            d = r["systems"].get(s)
            if d and "error" in d:
                cells.append("ERROR")
            elif d:
                cells.append(f"{d['cpu']['median']:.2f} ({d['cpu']['min']:.2f})")
            else:
                cells.append("-")
        chk = r["check"]
        if r.get("check_worst") is not None:
            chk += f" (worst {r['check_worst']:.1e})"
        t.append([r["label"], r["config"], *cells,
                  _ratio(_med(r, "cgrad", "cpu"), _med(r, "torch", "cpu")), chk])
    out.append(_table(head, t, left=(0, 1, 5)))
    errs = [f"{r['label']} {s}: {d['error']}" for r in rows for s, d in r["systems"].items()
            if "error" in d]
    out += [""] + errs if errs else []
    out += ["", "Phases (wall ms, medians): forward (+ loss) | backward | clip + optimizer "
            "step + zero_grad | rest of the epoch (gcn: validation forward).", ""]
    head = ["model", "system", "forward", "backward", "optimizer", "rest", "step (wall)"]
    t = []
    for r in rows:
        for s in ("cgrad", "torch"):
            d = r["systems"].get(s)
            if not d or "error" in d:
                continue
            t.append([r["label"], s, _ms(d, "fwd"), _ms(d, "bwd"), _ms(d, "opt"),
                      _ms(d, "rest"), _ms(d, "total")])
        if r["systems"].get("torch") and "error" not in r["systems"]["torch"]:
            t.append([r["label"], "cgrad/torch"] + [
                _ratio(_med(r, "cgrad", p), _med(r, "torch", p))
                for p in ("fwd", "bwd", "opt", "rest", "total")])
    out.append(_table(head, t, left=(0, 1)))
    for r in rows:
        p = r.get("profile")
        if not p:
            continue
        out += ["", f"cgrad's {r['label']} step under cProfile ({p['steps']} steps, "
                f"{p['profiled_ms']:.1f} ms/step profiled): top {len(p['top'])} by internal "
                "time", ""]
        out.append(_table(["function", "calls/step", "ms/step", "share"],
                          [[f"`{x['function']}`", f"{x['calls']:.0f}", f"{x['tottime_ms']:.2f}",
                            f"{100 * x['share']:.1f} %"] for x in p["top"]]))
    return "\n".join(out)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true",
                    help="a smoke test, not a measurement: tiny sizes, 1 step, cgrad alone")
    ap.add_argument("--only", nargs="+", choices=list(MODELS))
    ap.add_argument("--repeats", type=int, default=None, help="timed steps per system")
    ap.add_argument("--profile-steps", type=int, default=None,
                    help="cgrad steps under cProfile (0: no profile)")
    ap.add_argument("--gpt-attention", choices=("auto", "sdpa", "manual"), default="auto")
    ap.add_argument("--no-torch", action="store_true")
    ap.add_argument("--json", default=None)
    a = ap.parse_args(argv)
    info = machine_info(None if a.quick or a.no_torch else load_torch())
    print(f"{info['date']}; {info.get('cpu', '?')} x{info['cpus']}; Python {info['python']}, "
          f"numpy {info['numpy']}, scipy {info['scipy']}, torch {info['torch'] or '-'} "
          f"({info.get('torch_threads', '-')} thread), cgrad git {info.get('git', '?')}; "
          f"load average {info['loadavg_start']}", flush=True)
    rows = run(quick=a.quick, use_torch=not a.no_torch and not a.quick, only=a.only,
               repeats=a.repeats, profile_steps=a.profile_steps, log=sys.stderr,
               gpt_attention=a.gpt_attention)
    print(render(rows))
    if a.json:
        with open(a.json, "w") as fh:
            json.dump(rows, fh, indent=1)
    bad = [r for r in rows if "error" in r or r["check"] not in ("ok", "-")
           or any("error" in d for d in r["systems"].values())]
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
