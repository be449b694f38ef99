"""A program in the style of karpathy/makemore runs on cgrad by swapping the import (issue 18
acceptance), with torch's numbers given the same initial weights and batches.

Our own small program with makemore's idioms: a character Dataset whose targets are masked
with -1 (``ignore_index=-1``), an endless loader from ``RandomSampler(replacement=True,
num_samples=int(1e10))``, models of its five kinds (bigram table indexed by the tokens; MLP
over tokens shifted with ``roll`` and an in-place ``idx[:, 0] = blank``; RNN and GRU cells over
``cat([x, h])`` from ``start.expand((b, -1))`` stacked over time; a causal bag of words with
``masked_fill`` on a ``tril`` buffer and ``softmax``), AdamW with betas (0.9, 0.99), eps 1e-8
and weight decay, ``@inference_mode`` evaluation, a ``SummaryWriter`` scalar, and
``save``/``load`` of the state dict to resume. Every kind trains 12 steps on torch and on cgrad
from torch's initial weights: the losses and final weights agree to 1e-10 in float64.
"""
from __future__ import annotations

import numpy as np
import pytest

import cgrad

torch = pytest.importorskip("torch")


@pytest.fixture(autouse=True)
def _torch_on_one_thread():
    """torch's tiny float64 kernels on a busy 2-core machine: its thread pool spins (seconds
    per test); one thread, as in bench/."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)

WORDS = ["emma", "olivia", "ava", "isabella", "sophia", "mia", "amelia", "harper", "evelyn",
         "abigail", "ella", "liam", "noah", "oliver", "elijah", "james", "lucas", "mason"]


def program(T):
    nn, F = T.nn, T.nn.functional
    Dataset, DataLoader = T.utils.data.Dataset, T.utils.data.DataLoader

    class Chars(Dataset):
        def __init__(self, words):
            self.words = words
            self.chars = sorted(set("".join(words)))
            self.stoi = {ch: i + 1 for i, ch in enumerate(self.chars)}
            self.n = max(len(w) for w in words)

        def __len__(self):
            return len(self.words)

        def __getitem__(self, i):
            ix = T.tensor([self.stoi[c] for c in self.words[i]], dtype=T.long)
            x = T.zeros(self.n + 1, dtype=T.long)
            y = T.zeros(self.n + 1, dtype=T.long)
            x[1:1 + len(ix)] = ix
            y[:len(ix)] = ix
            y[len(ix) + 1:] = -1
            return x, y

    class Bigram(nn.Module):
        def __init__(self, v, block):
            super().__init__()
            self.logits = nn.Parameter(T.zeros((v, v)))

        def forward(self, idx):
            return self.logits[idx]

    class MLP(nn.Module):
        def __init__(self, v, block, e=8, h=16):
            super().__init__()
            self.block, self.v = block, v
            self.wte = nn.Embedding(v + 1, e)
            self.mlp = nn.Sequential(nn.Linear(block * e, h), nn.Tanh(), nn.Linear(h, v))

        def forward(self, idx):
            embs = []
            for _ in range(self.block):
                embs.append(self.wte(idx))
                idx = T.roll(idx, 1, 1)
                idx[:, 0] = self.v
            return self.mlp(T.cat(embs, -1))

    class Cell(nn.Module):
        def __init__(self, e, h, gru):
            super().__init__()
            self.gru = gru
            self.xh_to_h = nn.Linear(e + h, h)
            if gru:
                self.xh_to_z = nn.Linear(e + h, h)
                self.xh_to_r = nn.Linear(e + h, h)

        def forward(self, xt, hprev):
            xh = T.cat([xt, hprev], dim=1)
            if not self.gru:
                return F.tanh(self.xh_to_h(xh))
            r = F.sigmoid(self.xh_to_r(xh))
            hbar = F.tanh(self.xh_to_h(T.cat([xt, r * hprev], dim=1)))
            z = F.sigmoid(self.xh_to_z(xh))
            return (1 - z) * hprev + z * hbar

    class RNN(nn.Module):
        def __init__(self, v, block, e=8, h=16, gru=False):
            super().__init__()
            self.start = nn.Parameter(T.zeros(1, h))
            self.wte = nn.Embedding(v, e)
            self.cell = Cell(e, h, gru)
            self.lm_head = nn.Linear(h, v)

        def forward(self, idx):
            b, t = idx.size()
            emb = self.wte(idx)
            hprev = self.start.expand((b, -1))
            hiddens = []
            for i in range(t):
                hprev = self.cell(emb[:, i, :], hprev)
                hiddens.append(hprev)
            return self.lm_head(T.stack(hiddens, 1))

    class BoW(nn.Module):
        def __init__(self, v, block, e=8, h=16):
            super().__init__()
            self.wte, self.wpe = nn.Embedding(v, e), nn.Embedding(block, e)
            self.register_buffer("bias", T.tril(T.ones(block, block)).view(1, block, block))
            self.c_fc, self.c_proj = nn.Linear(e, h), nn.Linear(h, e)
            self.lm_head = nn.Linear(e, v)

        def forward(self, idx):
            b, t = idx.size()
            pos = T.arange(0, t, dtype=T.long).unsqueeze(0)
            x = self.wte(idx) + self.wpe(pos)
            att = T.zeros((b, t, t), dtype=x.dtype).masked_fill(self.bias[:, :t, :t] == 0, float("-inf"))
            x = x + F.softmax(att, dim=-1) @ x
            x = x + self.c_proj(F.tanh(self.c_fc(x)))
            return self.lm_head(x)

    def loss_of(model, x, y):
        logits = model(x)
        return F.cross_entropy(logits.view(-1, logits.size(-1)), y.view(-1), ignore_index=-1)

    @T.inference_mode()
    def evaluate(model, ds):
        model.eval()
        losses = [loss_of(model, x, y).item() for x, y in DataLoader(ds, batch_size=6)]
        model.train()
        return T.tensor(losses).mean().item()

    def endless(ds, batch_size):
        sampler = T.utils.data.RandomSampler(ds, replacement=True, num_samples=int(1e10))
        return iter(DataLoader(ds, sampler=sampler, batch_size=batch_size))

    kinds = {"bigram": Bigram, "mlp": MLP, "rnn": RNN,
             "gru": lambda v, block: RNN(v, block, gru=True), "bow": BoW}
    return Chars, kinds, loss_of, evaluate, endless


def _train(T, kind, state, batches, steps, tmp_path):
    Chars, kinds, loss_of, evaluate, endless = program(T)
    ds = Chars(WORDS)
    model = kinds[kind](len(ds.chars) + 1, ds.n + 1).double()
    if state is not None:
        model.load_state_dict({k: T.from_numpy(v.copy()) for k, v in state.items()})
    opt = T.optim.AdamW(model.parameters(), lr=1e-2, weight_decay=0.01, betas=(0.9, 0.99),
                        eps=1e-8)
    losses = []
    for idx in batches[:steps]:
        x, y = (T.stack(t) for t in zip(*[ds[i] for i in idx]))
        loss = loss_of(model, x, y)
        model.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    path = str(tmp_path / f"{T.__name__}_{kind}.pt")
    T.save(model.state_dict(), path)
    resumed = kinds[kind](len(ds.chars) + 1, ds.n + 1).double()
    resumed.load_state_dict(T.load(path))
    return model, losses, evaluate(resumed, ds), endless(ds, 4)


@pytest.mark.parametrize("kind", ["bigram", "mlp", "rnn", "gru", "bow"])
def test_makemore_style_models_train_as_torch(kind, tmp_path):
    rng = np.random.default_rng(0)
    batches = [rng.integers(0, len(WORDS), 4) for _ in range(12)]
    torch.manual_seed(0)
    Chars, kinds, *_ = program(torch)
    ds = Chars(WORDS)
    init = kinds[kind](len(ds.chars) + 1, ds.n + 1).double()
    if kind == "bigram":
        with torch.no_grad():
            init.logits.normal_()
    state = {k: v.detach().numpy() for k, v in init.state_dict().items()}
    tm, tl, tev, tit = _train(torch, kind, state, batches, 12, tmp_path)
    cm, cl, cev, cit = _train(cgrad, kind, state, batches, 12, tmp_path)
    np.testing.assert_allclose(cl, tl, rtol=1e-10)
    assert cl[-1] < cl[0]
    np.testing.assert_allclose(cev, tev, rtol=1e-10)      # evaluated after save/load
    for (k, a), (k2, b) in zip(cm.state_dict().items(), tm.state_dict().items()):
        assert k == k2
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-9, atol=1e-12)
    x, y = next(cit)                                       # the endless loader starts at once
    assert tuple(x.shape) == (4, 9) and y.dtype == cgrad.int64 and int(y.min()) == -1


def test_summary_writer_logs_the_evaluation(tmp_path):
    pytest.importorskip("tensorboardX")
    from cgrad.utils.tensorboard import SummaryWriter
    writer = SummaryWriter(log_dir=str(tmp_path))
    writer.add_scalar("Loss/train", 1.25, 500)
    writer.add_scalar("Loss/test", cgrad.tensor(1.5), 500)
    writer.flush()
    writer.close()
    assert any(p.name.startswith("events.out.tfevents") for p in tmp_path.iterdir())
