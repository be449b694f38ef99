"""A character-level LSTM language model (Embedding, 2-layer nn.LSTM, Linear) trained with
Adam and gradient clipping on the Zen of Python, then sampled.

    python examples/char_lstm.py
    python examples/char_lstm.py --backend torch     # the same code on torch, to compare

The text ships with Python (the `this` module), so nothing is downloaded. The model code is
torch.nn code: `--backend` only chooses which module `T` is. The script prints the loss every
50 steps, the time per step, and a greedy sample that starts from "Beautiful".
"""
from __future__ import annotations

import argparse
import codecs
import contextlib
import importlib
import io
import time

import numpy as np


def zen_of_python():
    with contextlib.redirect_stdout(io.StringIO()):
        import this
    return codecs.decode(this.s, "rot13")


def build_model(T, vocab, emb=32, hidden=128, layers=2):
    nn = T.nn

    class CharLSTM(nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = nn.Embedding(vocab, emb)
            self.lstm = nn.LSTM(emb, hidden, num_layers=layers, batch_first=True)
            self.head = nn.Linear(hidden, vocab)

        def forward(self, idx, state=None):
            out, state = self.lstm(self.emb(idx), state)
            return self.head(out), state

    return CharLSTM()


def sample(T, model, stoi, itos, start, n):
    model.eval()
    with T.no_grad():
        idx = T.tensor([[stoi[c] for c in start]])
        logits, state = model(idx)
        out = list(start)
        for _ in range(n):
            nxt = int(logits[0, -1].argmax())
            out.append(itos[nxt])
            logits, state = model(T.tensor([[nxt]]), state)
    model.train()
    return "".join(out)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--backend", choices=["cgrad", "torch"], default="cgrad")
    ap.add_argument("--steps", type=int, default=400)
    ap.add_argument("--seq-len", type=int, default=64)
    ap.add_argument("--batch-size", type=int, default=32)
    ap.add_argument("--lr", type=float, default=3e-3)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)

    T = importlib.import_module(args.backend)
    if args.backend == "torch":
        T.set_num_threads(1)
    T.manual_seed(args.seed)
    text = zen_of_python()
    chars = sorted(set(text))
    stoi = {c: i for i, c in enumerate(chars)}
    itos = dict(enumerate(chars))
    data = np.array([stoi[c] for c in text], dtype=np.int64)
    model = build_model(T, len(chars))
    opt = T.optim.Adam(model.parameters(), lr=args.lr)
    print(model)
    print(f"{args.backend}: {len(text)} characters, {len(chars)} distinct; {args.steps} steps")
    rng = np.random.default_rng(args.seed)
    t0 = time.perf_counter()
    avg = None
    for step in range(1, args.steps + 1):
        starts = rng.integers(0, len(data) - args.seq_len - 1, args.batch_size)
        win = np.stack([data[s:s + args.seq_len + 1] for s in starts])
        x, y = T.from_numpy(win[:, :-1].copy()), T.from_numpy(win[:, 1:].copy())
        logits, _ = model(x)
        loss = T.nn.functional.cross_entropy(logits.reshape(-1, len(chars)), y.reshape(-1))
        opt.zero_grad()
        loss.backward()
        T.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        avg = loss.item() if avg is None else 0.9 * avg + 0.1 * loss.item()
        if step % 50 == 0 or step == args.steps:
            ms = (time.perf_counter() - t0) / step * 1000
            print(f"step {step:4d}  loss {avg:.4f}  {ms:.1f} ms/step")
    print(repr(sample(T, model, stoi, itos, "Beautiful", 80)))
    print(f"final loss {avg:.4f} ({time.perf_counter() - t0:.1f} s)")
    return avg


if __name__ == "__main__":
    main()
