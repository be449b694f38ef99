"""pyGAT's sparse GAT (SpGAT) on PyTorch: the baseline that examples/gat.py is compared with.

    python examples/pygat_torch.py [--dataset citeseer] [--seed 72] [--epochs 1000]

Needs torch (used only for this comparison; cgrad never imports it). This reproduces
unmodified pyGAT (github.com/Diego999/pyGAT, MIT licence, (c) 2018 Diego Antognini):
``SpecialSpmmFunction``, ``SpGraphAttentionLayer`` and ``SpGAT`` perform pyGAT's operations
in pyGAT's order, including what makes it slow:

* every layer of every forward calls ``adj.nonzero()`` on the *dense* N x N adjacency;
* every head is a separate layer with its own ``x @ W`` and its own (2F, E) concatenation
  ``cat(h[src], h[dst]).t()``;
* ``SpecialSpmmFunction.backward`` forms the dense N x N ``grad_output @ b.t()`` to read the
  gradient of the values (pyGAT's code, as quoted in the cgrad issue);
* attention scores are ``exp(-leakyrelu(a . [h_i || h_j]))`` (pyGAT's sparse variant; no max
  shift), normalised by a row sum computed with the same spmm against a ones vector, with
  dropout on the unnormalised scores after the row sum.

The data are cgrad's examples/data/<name>.npz (the standard Planetoid split), prepared as
pyGAT's utils.load_data does: row-normalised dense features, a dense adjacency with self
loops (pyGAT symmetrically normalises it, which SpGAT ignores: only ``nonzero()`` is used).
The training loop is pyGAT's train.py: Adam (lr 0.005, weight decay 5e-4), one training step
and one evaluation forward per epoch, early stopping on the validation loss (patience 100),
the best epoch's weights restored for the test (kept in memory instead of .pkl files).
"""
from __future__ import annotations

import argparse
import os
import time
import warnings

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

warnings.filterwarnings("ignore", message="Sparse invariant checks are implicitly disabled")

HERE = os.path.dirname(os.path.abspath(__file__))
DATA_DIR = os.path.join(HERE, "data")


# ------------------------------------------------------------------------------------------
# pyGAT layers.py (sparse part) and models.py (SpGAT)

class SpecialSpmmFunction(torch.autograd.Function):
    """Special function for only sparse region backpropataion layer."""

    @staticmethod
    def forward(ctx, indices, values, shape, b):
        assert indices.requires_grad == False  # noqa: E712  (pyGAT's assertion)
        a = torch.sparse_coo_tensor(indices, values, shape)
        ctx.save_for_backward(a, b)
        ctx.N = shape[0]
        return torch.matmul(a, b)

    @staticmethod
    def backward(ctx, grad_output):
        a, b = ctx.saved_tensors
        grad_values = grad_b = None
        if ctx.needs_input_grad[1]:
            grad_a_dense = grad_output.matmul(b.t())           # dense N x N
            edge_idx = a._indices()[0, :] * ctx.N + a._indices()[1, :]
            grad_values = grad_a_dense.view(-1)[edge_idx]
        if ctx.needs_input_grad[3]:
            grad_b = a.t().matmul(grad_output)
        return None, grad_values, None, grad_b


class SpecialSpmm(nn.Module):
    def forward(self, indices, values, shape, b):
        return SpecialSpmmFunction.apply(indices, values, shape, b)


class SpGraphAttentionLayer(nn.Module):
    """One attention head, as pyGAT's sparse layer."""

    def __init__(self, in_features, out_features, dropout, alpha, concat=True):
        super().__init__()
        self.in_features = in_features
        self.out_features = out_features
        self.alpha = alpha
        self.concat = concat
        self.W = nn.Parameter(torch.zeros(size=(in_features, out_features)))
        nn.init.xavier_normal_(self.W.data, gain=1.414)
        self.a = nn.Parameter(torch.zeros(size=(1, 2 * out_features)))
        nn.init.xavier_normal_(self.a.data, gain=1.414)
        self.dropout = nn.Dropout(dropout)
        self.leakyrelu = nn.LeakyReLU(self.alpha)
        self.special_spmm = SpecialSpmm()

    def forward(self, input, adj):
        N = input.size()[0]
        edge = adj.nonzero().t()                                # dense N x N scan, every call
        h = torch.mm(input, self.W)
        assert not torch.isnan(h).any()
        edge_h = torch.cat((h[edge[0, :], :], h[edge[1, :], :]), dim=1).t()   # 2F x E
        edge_e = torch.exp(-self.leakyrelu(self.a.mm(edge_h).squeeze()))
        assert not torch.isnan(edge_e).any()
        e_rowsum = self.special_spmm(edge, edge_e, torch.Size([N, N]),
                                     torch.ones(size=(N, 1)))
        edge_e = self.dropout(edge_e)
        h_prime = self.special_spmm(edge, edge_e, torch.Size([N, N]), h)
        assert not torch.isnan(h_prime).any()
        h_prime = h_prime.div(e_rowsum)
        assert not torch.isnan(h_prime).any()
        if self.concat:
            return F.elu(h_prime)
        return h_prime

    def __repr__(self):
        return f"{self.__class__.__name__} ({self.in_features} -> {self.out_features})"


class SpGAT(nn.Module):
    """Sparse version of GAT (pyGAT models.SpGAT)."""

    def __init__(self, nfeat, nhid, nclass, dropout, alpha, nheads):
        super().__init__()
        self.dropout = dropout
        self.attentions = [SpGraphAttentionLayer(nfeat, nhid, dropout=dropout, alpha=alpha,
                                                 concat=True) for _ in range(nheads)]
        for i, attention in enumerate(self.attentions):
            self.add_module(f"attention_{i}", attention)
        self.out_att = SpGraphAttentionLayer(nhid * nheads, nclass, dropout=dropout,
                                             alpha=alpha, concat=False)

    def forward(self, x, adj):
        x = F.dropout(x, self.dropout, training=self.training)
        x = torch.cat([att(x, adj) for att in self.attentions], dim=1)
        x = F.dropout(x, self.dropout, training=self.training)
        x = F.elu(self.out_att(x, adj))
        return F.log_softmax(x, dim=1)


# ------------------------------------------------------------------------------------------
# data (pyGAT utils.load_data on the .npz files) and pyGAT's train.py loop

def load_data(name="cora", data_dir=DATA_DIR):
    """(adj, features, labels, idx_train, idx_val, idx_test) as dense torch tensors."""
    import scipy.sparse as sp
    d = np.load(os.path.join(data_dir, f"{name}.npz"))
    x = sp.csr_matrix((d["feat_data"], d["feat_indices"], d["feat_indptr"]),
                      shape=tuple(d["feat_shape"]))
    rowsum = np.asarray(x.sum(1)).ravel()
    r_inv = np.zeros_like(rowsum)
    np.divide(1.0, rowsum, out=r_inv, where=rowsum != 0)
    features = np.asarray((sp.diags(r_inv) @ x).todense(), dtype=np.float32)
    n = d["labels"].shape[0]
    ei = d["edge_index"]
    adj = np.zeros((n, n), dtype=np.float32)
    adj[ei[0], ei[1]] = 1.0
    adj[ei[1], ei[0]] = 1.0                                     # symmetric, as pyGAT
    adj[np.arange(n), np.arange(n)] = 1.0                       # + I
    deg = adj.sum(1)
    r = 1.0 / np.sqrt(deg)
    adj = (adj * r[:, None]) * r[None, :]                       # pyGAT's normalize_adj
    return (torch.from_numpy(adj), torch.from_numpy(features),
            torch.from_numpy(d["labels"].astype(np.int64)),
            torch.from_numpy(d["idx_train"].astype(np.int64)),
            torch.from_numpy(d["idx_val"].astype(np.int64)),
            torch.from_numpy(d["idx_test"].astype(np.int64)))


def accuracy(output, labels):
    preds = output.max(1)[1].type_as(labels)
    return preds.eq(labels).double().sum().item() / len(labels)


def build(seed=72, dataset="cora", hidden=8, heads=8, dropout=0.6, alpha=0.2, lr=0.005,
          weight_decay=5e-4, data_dir=DATA_DIR):
    """(model, optimizer, data tuple) seeded as pyGAT's train.py."""
    np.random.seed(seed)
    torch.manual_seed(seed)
    data = load_data(dataset, data_dir)
    adj, features, labels = data[:3]
    model = SpGAT(nfeat=features.shape[1], nhid=hidden, nclass=int(labels.max()) + 1,
                  dropout=dropout, nheads=heads, alpha=alpha)
    optimizer = torch.optim.Adam(model.parameters(), lr=lr, weight_decay=weight_decay)
    return model, optimizer, data


def train_epoch(model, optimizer, data):
    """pyGAT's train(epoch): a training step, then an evaluation forward.
    Returns (loss_train, acc_train, loss_val, acc_val)."""
    adj, features, labels, idx_train, idx_val, _ = data
    model.train()
    optimizer.zero_grad()
    output = model(features, adj)
    loss_train = F.nll_loss(output[idx_train], labels[idx_train])
    acc_train = accuracy(output[idx_train], labels[idx_train])
    loss_train.backward()
    optimizer.step()
    model.eval()
    output = model(features, adj)
    loss_val = F.nll_loss(output[idx_val], labels[idx_val])
    acc_val = accuracy(output[idx_val], labels[idx_val])
    return loss_train.item(), acc_train, loss_val.item(), acc_val


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dataset", default="cora")
    ap.add_argument("--seed", type=int, default=72)
    ap.add_argument("--epochs", type=int, default=1000)
    ap.add_argument("--patience", type=int, default=100)
    ap.add_argument("--quiet", action="store_true")
    args = ap.parse_args(argv)
    model, optimizer, data = build(args.seed, args.dataset)
    adj, features, labels, _, _, idx_test = data
    best, best_epoch, bad, times = float("inf"), 0, 0, []
    state = None
    for epoch in range(args.epochs):
        t = time.perf_counter()
        lt, at, lv, av = train_epoch(model, optimizer, data)
        times.append(time.perf_counter() - t)
        if not args.quiet:
            print(f"Epoch: {epoch + 1:04d} loss_train: {lt:.4f} acc_train: {at:.4f} "
                  f"loss_val: {lv:.4f} acc_val: {av:.4f} time: {times[-1]:.4f}s")
        if lv < best:
            best, best_epoch, bad = lv, epoch, 0
            state = {k: v.clone() for k, v in model.state_dict().items()}
        else:
            bad += 1
        if bad == args.patience:
            break
    print(f"Optimization Finished! {epoch + 1} epochs, median "
          f"{np.median(times) * 1e3:.1f} ms/epoch; loading epoch {best_epoch + 1}")
    model.load_state_dict(state)
    model.eval()
    with torch.no_grad():
        output = model(features, adj)
    loss_test = F.nll_loss(output[idx_test], labels[idx_test]).item()
    acc_test = accuracy(output[idx_test], labels[idx_test])
    print(f"Test set results: loss= {loss_test:.4f} accuracy= {acc_test:.4f}")
    return acc_test


if __name__ == "__main__":
    main()
