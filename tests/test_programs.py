"""Whole programs written for torch run on cgrad by swapping the import (issue 17
acceptance), with torch's numbers given the same initial weights and batches.

The programs here are small ones of our own that use the idioms of two public programs:

* a graph convolutional network in the style of tkipf/pygcn: a layer with Parameters made by
  the legacy ``FloatTensor(n, m)`` constructor and ``reset_parameters`` drawing them with
  ``.data.uniform_``, ``register_parameter('bias', None)``, ``mm`` then ``spmm`` with a
  sparse adjacency built by ``sparse.FloatTensor(indices, values, Size)``, indices as
  ``LongTensor(range(...))``, ``log_softmax`` + ``nll_loss`` on index subsets, Adam with
  weight decay, and the accuracy ``output.max(1)[1].type_as(labels).eq(labels).double()``;
* a GPT in the style of karpathy/nanoGPT's model.py: a LayerNorm with an optional bias
  (``F.layer_norm``), causal self-attention with a ``tril`` mask registered as a buffer and
  viewed (1, 1, T, T), ``masked_fill(mask == 0, float('-inf'))``, ``split``,
  ``view``/``transpose``/``contiguous``, a GELU MLP, ``ModuleDict``/``ModuleList``, weight
  tying, ``apply(_init_weights)`` and the scaled init of ``c_proj.weight`` through
  ``named_parameters``, cross entropy with ``ignore_index=-1``, AdamW parameter groups with
  and without weight decay (and the ``'fused' in inspect.signature(AdamW).parameters``
  probe), gradient clipping, a learning-rate schedule through ``param_groups``, cropping
  the block size, and ``generate`` with ``topk``, ``multinomial`` and ``cat`` under
  ``@no_grad()``.

Each runs on torch first; its initial state_dict is copied into the cgrad model through
NumPy arrays and both see the same batches. Values and gradients must agree to 1e-5 in
float32 and 1e-10 in float64. Random draws (dropout masks, multinomial) come from each
library's own stream, so the runs are compared with dropout off, greedy decoding, and
sampling that checks its support.
"""
from __future__ import annotations

import inspect
import math

import numpy as np
import pytest

import cgrad

torch = pytest.importorskip("torch")

TOL = {"float32": 1e-5, "float64": 1e-10}


def _np(t):
    return t.detach().numpy() if hasattr(t, "detach") else np.asarray(t)


def _close(a, b, dtype):
    np.testing.assert_allclose(_np(a), _np(b), rtol=TOL[dtype], atol=TOL[dtype])


def _copy_state(src, dst, T):
    """dst.load_state_dict(src's state through NumPy arrays)."""
    state = {k: T.from_numpy(v.detach().numpy().copy()) for k, v in src.state_dict().items()}
    dst.load_state_dict(state)


# -- a graph convolutional network (pygcn's idioms) -------------------------------------------
def gcn_program(T):
    """The model and helpers, written once against the library T (torch or cgrad)."""
    nn, F = T.nn, T.nn.functional
    from_parameter = T.nn.parameter.Parameter
    Module = T.nn.modules.module.Module

    class GraphConv(Module):
        def __init__(self, n_in, n_out, bias=True):
            super(GraphConv, self).__init__()
            self.n_in, self.n_out = n_in, n_out
            self.weight = from_parameter(T.FloatTensor(n_in, n_out))
            if bias:
                self.bias = from_parameter(T.FloatTensor(n_out))
            else:
                self.register_parameter("bias", None)
            self.reset_parameters()

        def reset_parameters(self):
            bound = 1.0 / math.sqrt(self.weight.size(1))
            self.weight.data.uniform_(-bound, bound)
            if self.bias is not None:
                self.bias.data.uniform_(-bound, bound)

        def forward(self, x, adj):
            support = T.mm(x, self.weight)
            out = T.spmm(adj, support)
            return out + self.bias if self.bias is not None else out

        def __repr__(self):
            return f"{self.__class__.__name__} ({self.n_in} -> {self.n_out})"

    class Net(nn.Module):
        def __init__(self, n_feat, n_hid, n_class, p, bias):
            super(Net, self).__init__()
            self.conv1 = GraphConv(n_feat, n_hid, bias)
            self.conv2 = GraphConv(n_hid, n_class, bias)
            self.p = p

        def forward(self, x, adj):
            x = F.relu(self.conv1(x, adj))
            x = F.dropout(x, self.p, training=self.training)
            return F.log_softmax(self.conv2(x, adj), dim=1)

    def accuracy(output, labels):
        preds = output.max(1)[1].type_as(labels)
        return preds.eq(labels).double().sum() / len(labels)

    def to_sparse(mx):
        """A scipy-like COO matrix (row, col, data, shape) as the library's sparse tensor."""
        row, col, data, shape = mx
        indices = T.from_numpy(np.vstack((row, col)).astype(np.int64))
        return T.sparse.FloatTensor(indices, T.from_numpy(data), T.Size(shape))

    return Net, accuracy, to_sparse


def _graph(n=14, n_feat=6, n_class=3, seed=0):
    rng = np.random.RandomState(seed)
    a = (rng.rand(n, n) < 0.25).astype(np.float32)
    a = np.maximum(a, a.T) + np.eye(n, dtype=np.float32)
    a = a / a.sum(1, keepdims=True)                      # row-normalised, self loops
    row, col = np.nonzero(a)
    feats = (rng.rand(n, n_feat) < 0.5).astype(np.float32)
    feats = feats / np.maximum(feats.sum(1, keepdims=True), 1)
    labels = rng.randint(0, n_class, size=n)
    return (row, col, a[row, col].astype(np.float32), (n, n)), feats, labels


def _train_gcn(T, model_init, dtype, bias, epochs=6):
    Net, accuracy, to_sparse = gcn_program(T)
    adj_mx, feats, labels = _graph()
    adj = to_sparse(adj_mx)
    features = T.FloatTensor(feats)
    labels = T.LongTensor(labels)
    idx_train, idx_val = T.LongTensor(range(8)), T.LongTensor(range(8, 14))
    T.manual_seed(3)
    model = Net(features.shape[1], 5, labels.max().item() + 1, 0.0, bias)
    if model_init is not None:
        _copy_state(model_init, model, T)
    if dtype == "float64":
        model.double()
        features, adj = features.double(), adj.double()
    opt = T.optim.Adam(model.parameters(), lr=0.05, weight_decay=5e-4)
    F = T.nn.functional
    log = []
    for _ in range(epochs):
        model.train()
        opt.zero_grad()
        output = model(features, adj)
        loss = F.nll_loss(output[idx_train], labels[idx_train])
        acc = accuracy(output[idx_train], labels[idx_train])
        loss.backward()
        grads = [p.grad.clone() for p in model.parameters()]
        opt.step()
        model.eval()
        output = model(features, adj)
        loss_val = F.nll_loss(output[idx_val], labels[idx_val])
        acc_val = accuracy(output[idx_val], labels[idx_val])
        log.append((loss.item(), acc.item(), loss_val.item(), acc_val.item(), grads))
    return model, log


@pytest.mark.filterwarnings("ignore:.*SparseTensor.*is deprecated:UserWarning")
@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_graph_convolution_network(dtype, bias):
    tm, tlog = _train_gcn(torch, None, dtype, bias)
    cm, clog = _train_gcn(cgrad, _initial(bias), dtype, bias)
    for (tl, ta, tlv, tav, tg), (cl, ca, clv, cav, cg) in zip(tlog, clog):
        _close(cl, tl, dtype)
        _close(clv, tlv, dtype)
        assert ca == ta and cav == tav
        for a, b in zip(cg, tg):
            _close(a, b, dtype)
    for (k, a), (k2, b) in zip(cm.state_dict().items(), tm.state_dict().items()):
        assert k == k2
        _close(a, b, dtype)
    assert repr(cm.conv1) == repr(tm.conv1) == "GraphConv (6 -> 5)"
    assert (cm.conv1.bias is None) == (not bias)


def _initial(bias):
    """torch's model as it is before training (same seed as _train_gcn)."""
    Net, _, _ = gcn_program(torch)
    torch.manual_seed(3)
    return Net(6, 5, 3, 0.0, bias)


def test_gcn_reset_parameters_draws_in_range_and_dropout_trains():
    Net, accuracy, _ = gcn_program(cgrad)
    cgrad.manual_seed(0)
    model = Net(6, 5, 3, 0.5, True)
    bound = 1 / math.sqrt(5)
    w = model.conv1.weight.detach().numpy()
    assert w.dtype == np.float32 and np.abs(w).max() <= bound and np.abs(w).std() > 0
    x = cgrad.ones(4, 5)
    model.train()
    y = cgrad.nn.functional.dropout(x, 0.5, training=model.training)
    assert set(np.unique(y.numpy())) <= {0.0, 2.0}
    out = cgrad.tensor([[0.1, 0.9], [0.8, 0.2], [0.3, 0.7]])
    acc = accuracy(out, cgrad.LongTensor([1, 0, 0]))
    assert acc.dtype == cgrad.float64 and abs(acc.item() - 2 / 3) < 1e-12


# -- a GPT (nanoGPT's idioms) -----------------------------------------------------------------
def gpt_program(T):
    nn, F = T.nn, T.nn.functional

    class Norm(nn.Module):
        """A LayerNorm whose bias can be left out."""

        def __init__(self, n, bias):
            super().__init__()
            self.weight = nn.Parameter(T.ones(n))
            self.bias = nn.Parameter(T.zeros(n)) if bias else None

        def forward(self, x):
            return F.layer_norm(x, self.weight.shape, self.weight, self.bias, 1e-5)

    class Attention(nn.Module):
        def __init__(self, cfg):
            super().__init__()
            self.c_attn = nn.Linear(cfg["d"], 3 * cfg["d"], bias=cfg["bias"])
            self.c_proj = nn.Linear(cfg["d"], cfg["d"], bias=cfg["bias"])
            self.attn_dropout = nn.Dropout(cfg["p"])
            self.resid_dropout = nn.Dropout(cfg["p"])
            self.heads, self.d = cfg["heads"], cfg["d"]
            n = cfg["block"]
            self.register_buffer("bias", T.tril(T.ones(n, n)).view(1, 1, n, n))

        def forward(self, x):
            B, L, C = x.size()
            q, k, v = self.c_attn(x).split(self.d, dim=2)
            k = k.view(B, L, self.heads, C // self.heads).transpose(1, 2)
            q = q.view(B, L, self.heads, C // self.heads).transpose(1, 2)
            v = v.view(B, L, self.heads, C // self.heads).transpose(1, 2)
            att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
            att = att.masked_fill(self.bias[:, :, :L, :L] == 0, float("-inf"))
            att = self.attn_dropout(F.softmax(att, dim=-1))
            y = (att @ v).transpose(1, 2).contiguous().view(B, L, C)
            return self.resid_dropout(self.c_proj(y))

    class Block(nn.Module):
        def __init__(self, cfg):
            super().__init__()
            self.ln_1, self.ln_2 = Norm(cfg["d"], cfg["bias"]), Norm(cfg["d"], cfg["bias"])
            self.attn = Attention(cfg)
            self.mlp = nn.Sequential()
            self.mlp.add_module("c_fc", nn.Linear(cfg["d"], 4 * cfg["d"], bias=cfg["bias"]))
            self.mlp.add_module("gelu", nn.GELU())
            self.mlp.add_module("c_proj", nn.Linear(4 * cfg["d"], cfg["d"], bias=cfg["bias"]))
            self.mlp.add_module("dropout", nn.Dropout(cfg["p"]))

        def forward(self, x):
            x = x + self.attn(self.ln_1(x))
            return x + self.mlp(self.ln_2(x))

    class Model(nn.Module):
        def __init__(self, cfg):
            super().__init__()
            self.cfg = dict(cfg)
            self.transformer = nn.ModuleDict(dict(
                wte=nn.Embedding(cfg["vocab"], cfg["d"]),
                wpe=nn.Embedding(cfg["block"], cfg["d"]),
                drop=nn.Dropout(cfg["p"]),
                h=nn.ModuleList([Block(cfg) for _ in range(cfg["layers"])]),
                ln_f=Norm(cfg["d"], cfg["bias"]),
            ))
            self.lm_head = nn.Linear(cfg["d"], cfg["vocab"], bias=False)
            self.transformer.wte.weight = self.lm_head.weight        # tied
            self.apply(self._init_weights)
            for name, p in self.named_parameters():
                if name.endswith("c_proj.weight"):
                    T.nn.init.normal_(p, mean=0.0, std=0.02 / math.sqrt(2 * cfg["layers"]))

        def num_params(self, non_embedding=True):
            n = sum(p.numel() for p in self.parameters())
            return n - self.transformer.wpe.weight.numel() if non_embedding else n

        def _init_weights(self, module):
            if isinstance(module, nn.Linear):
                T.nn.init.normal_(module.weight, mean=0.0, std=0.02)
                if module.bias is not None:
                    T.nn.init.zeros_(module.bias)
            elif isinstance(module, nn.Embedding):
                T.nn.init.normal_(module.weight, mean=0.0, std=0.02)

        def forward(self, idx, targets=None):
            b, t = idx.size()
            assert t <= self.cfg["block"], f"sequence of {t} > block size {self.cfg['block']}"
            pos = T.arange(0, t, dtype=T.long, device=idx.device)
            x = self.transformer.drop(self.transformer.wte(idx) + self.transformer.wpe(pos))
            for block in self.transformer.h:
                x = block(x)
            x = self.transformer.ln_f(x)
            if targets is None:
                return self.lm_head(x[:, [-1], :]), None
            logits = self.lm_head(x)
            loss = F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1),
                                   ignore_index=-1)
            return logits, loss

        def crop(self, block):
            self.cfg["block"] = block
            self.transformer.wpe.weight = nn.Parameter(self.transformer.wpe.weight[:block])
            for blk in self.transformer.h:
                if hasattr(blk.attn, "bias"):
                    blk.attn.bias = blk.attn.bias[:, :, :block, :block]

        def optimizer(self, weight_decay, lr, betas, device_type):
            params = {n: p for n, p in self.named_parameters() if p.requires_grad}
            decay = [p for p in params.values() if p.dim() >= 2]
            no_decay = [p for p in params.values() if p.dim() < 2]
            groups = [{"params": decay, "weight_decay": weight_decay},
                      {"params": no_decay, "weight_decay": 0.0}]
            fused = ("fused" in inspect.signature(T.optim.AdamW).parameters
                     and device_type == "cuda")
            extra = dict(fused=True) if fused else dict()
            return T.optim.AdamW(groups, lr=lr, betas=betas, **extra), len(decay), len(no_decay)

        @T.no_grad()
        def generate(self, idx, new_tokens, temperature=1.0, top_k=None):
            for _ in range(new_tokens):
                cond = idx if idx.size(1) <= self.cfg["block"] else idx[:, -self.cfg["block"]:]
                logits, _ = self(cond)
                logits = logits[:, -1, :] / temperature
                if top_k is not None:
                    v, _ = T.topk(logits, min(top_k, logits.size(-1)))
                    logits[logits < v[:, [-1]]] = -float("Inf")
                probs = F.softmax(logits, dim=-1)
                idx = T.cat((idx, T.multinomial(probs, num_samples=1)), dim=1)
            return idx

    return Model


CFG = dict(block=8, vocab=23, layers=2, heads=2, d=8, p=0.0)


def _batches(n, L=8, seed=0):
    """Sequences that follow a rule the model can learn (next = prev + 5 mod vocab); the
    first targets of the first row are ignored (-1)."""
    rng = np.random.RandomState(seed)
    out = []
    for _ in range(n):
        start = rng.randint(0, CFG["vocab"], size=(3, 1))
        seq = (start + 5 * np.arange(L + 1)) % CFG["vocab"]
        x, y = seq[:, :-1].astype(np.int64), seq[:, 1:].astype(np.int64)
        y[0, :2] = -1
        out.append((x, y))
    return out


def _run_gpt(T, init, bias, dtype, steps=6):
    Model = gpt_program(T)
    T.set_default_dtype(getattr(T, dtype))
    try:
        T.manual_seed(7)
        model = Model(dict(CFG, bias=bias))
        if init is not None:
            _copy_state(init, model, T)
        rec = {"tied": model.transformer.wte.weight is model.lm_head.weight,
               "num_params": model.num_params()}
        opt, n_decay, n_no_decay = model.optimizer(0.1, 1e-2, (0.9, 0.95), "cpu")
        rec["groups"] = (n_decay, n_no_decay)
        rec["losses"], rec["grads"] = [], []
        for i, (x, y) in enumerate(_batches(steps)):
            _, loss = model(T.from_numpy(x), T.from_numpy(y))
            loss.backward()
            rec["grads"].append({n: p.grad.clone() for n, p in model.named_parameters()})
            rec["norm"] = T.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            for g in opt.param_groups:
                g["lr"] = 1e-2 * min(1.0, (i + 1) / 3)
            opt.step()
            opt.zero_grad(set_to_none=True)
            rec["losses"].append(loss.item())
        model.eval()
        start = T.from_numpy(np.array([[1, 6], [2, 7]], dtype=np.int64))
        rec["greedy"] = model.generate(start, 10, top_k=1).tolist()
        T.manual_seed(0)
        rec["sampled"] = sampled = model.generate(start, 10, temperature=0.7, top_k=3)
        ok = True
        with T.no_grad():
            for step in range(2, 12):
                logits, _ = model(sampled[:, :step][:, -CFG["block"]:])
                top = T.topk(logits[:, -1, :], 3).indices.tolist()
                ok = ok and all(sampled[r, step].item() in top[r] for r in range(2))
        rec["sampled_in_top_k"] = ok
        logits, none = model(start)
        rec["last_logits"], rec["no_loss"] = logits, none
        model.crop(4)
        rec["crop_wpe"] = tuple(model.transformer.wpe.weight.shape)
        rec["crop_mask"] = tuple(model.transformer.h[0].attn.bias.shape)
        x, y = _batches(1, L=4, seed=1)[0]
        _, rec["crop_loss"] = model(T.from_numpy(x), T.from_numpy(y))
        rec["crop_greedy"] = model.generate(start, 6, top_k=1).tolist()
        try:
            model(T.zeros(1, 5, dtype=T.long))
        except AssertionError as e:
            rec["crop_assert"] = str(e)
        return model, rec
    finally:
        T.set_default_dtype(T.float32)


@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_gpt(dtype, bias):
    tm0 = None
    Model = gpt_program(torch)
    torch.set_default_dtype(getattr(torch, dtype))
    try:
        torch.manual_seed(7)
        tm0 = Model(dict(CFG, bias=bias))          # torch's initial weights
    finally:
        torch.set_default_dtype(torch.float32)
    tm, t = _run_gpt(torch, None, bias, dtype)
    cm, c = _run_gpt(cgrad, tm0, bias, dtype)
    assert c["tied"] and t["tied"]
    assert c["num_params"] == t["num_params"] and c["groups"] == t["groups"]
    np.testing.assert_allclose(c["losses"], t["losses"], rtol=TOL[dtype], atol=TOL[dtype])
    for cg, tg in zip(c["grads"], t["grads"]):
        assert cg.keys() == tg.keys()
        for k in cg:
            _close(cg[k], tg[k], dtype)
    _close(c["norm"], t["norm"], dtype)
    for (k, a), (k2, b) in zip(cm.state_dict().items(), tm.state_dict().items()):
        assert k == k2
        if k.endswith("c_attn.bias") and dtype == "float32":
            # softmax ignores the key bias, so its gradient is zero in exact arithmetic: on
            # both sides it is float32 rounding noise (1e-9), which AdamW divides by about
            # eps, moving the key bias by noise of 1e-5 either way; compare it at that size
            d = CFG["d"]
            a, b = _np(a), _np(b)
            _close(np.delete(a, np.s_[d:2 * d]), np.delete(b, np.s_[d:2 * d]), dtype)
            np.testing.assert_allclose(a[d:2 * d], b[d:2 * d], atol=1e-4)
            continue
        _close(a, b, dtype)
    assert c["greedy"] == t["greedy"]
    _close(c["last_logits"], t["last_logits"], dtype)
    assert c["no_loss"] is None and t["no_loss"] is None
    assert c["crop_wpe"] == t["crop_wpe"] == (4, 8)
    assert c["crop_mask"] == t["crop_mask"] == (1, 1, 4, 4)
    _close(c["crop_loss"], t["crop_loss"], dtype)
    assert c["crop_greedy"] == t["crop_greedy"]
    assert c["crop_assert"] == t["crop_assert"]
    # sampling: each library's own random stream, so only the support is compared: every
    # sampled token is among the top 3 of the model's logits for its prefix (the logits are
    # torch's, as the greedy runs and last_logits show)
    assert c["sampled_in_top_k"] and t["sampled_in_top_k"]
    assert c["sampled"].shape == (2, 12) and c["sampled"].dtype == cgrad.int64
    assert c["sampled"][:, :2].tolist() == [[1, 6], [2, 7]]


def test_gpt_learns_the_rule():
    """Trained a little longer, the cgrad model continues the sequences by the rule."""
    Model = gpt_program(cgrad)
    cgrad.manual_seed(0)
    model = Model(dict(CFG, bias=True))
    opt, _, _ = model.optimizer(0.0, 3e-2, (0.9, 0.95), "cpu")
    losses = []
    for x, y in _batches(60, seed=3):
        _, loss = model(cgrad.from_numpy(x), cgrad.from_numpy(y))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    assert np.mean(losses[-5:]) < 0.5 * np.mean(losses[:5])
    model.eval()
    out = model.generate(cgrad.tensor([[3, 8]]), 4, top_k=1).tolist()[0]
    assert out[2:] == [(8 + 5 * k) % CFG["vocab"] for k in range(1, 5)]


def test_the_device_idioms_of_the_programs():
    """pygcn's `not args.no_cuda and torch.cuda.is_available()` and the tutorials'
    torch.accelerator choice both take the CPU."""
    assert (not False and cgrad.cuda.is_available()) is False
    device = (cgrad.accelerator.current_accelerator().type
              if cgrad.accelerator.is_available() else "cpu")
    model = cgrad.nn.Linear(2, 2).to(device)
    assert model.weight.device == cgrad.device("cpu")
    assert "fused" in inspect.signature(cgrad.optim.AdamW).parameters
