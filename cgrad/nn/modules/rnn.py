"""RNN, LSTM, GRU and their cells, with torch's parameters, shapes and PackedSequence support.

Each layer-direction projects the input of ALL time steps with one matmul before the time
loop; each step's hidden-to-hidden gates are one matmul for the whole (active) batch. Every
sequence is run in packed form (batch_sizes per step; a plain batch has all steps full), so
variable lengths cost nothing extra. The steps are cgrad ops, so double backward works.
"""
from __future__ import annotations

import math
import numbers

import numpy as np

from cgrad._creation import zeros
from cgrad._warn import warn as _warn
from cgrad.ops.joining import cat, stack
from cgrad.nn import functional as F
from cgrad.nn import init
from cgrad.nn.functional._rnn import _GRULayer, _LSTMLayer, _RNNLayer
from cgrad.nn.modules.module import Module
from cgrad.nn.parameter import Parameter
from cgrad.nn.utils.rnn import PackedSequence

__all__ = ["RNNBase", "RNN", "LSTM", "GRU", "RNNCellBase", "RNNCell", "LSTMCell", "GRUCell"]


def _empty(shape, dtype, device=None):
    from cgrad._creation import empty
    return empty(tuple(shape), dtype=dtype, device=device)


# ---------------------------------------------------------------------------------------------
# one step of each cell (gi: input projection incl. b_ih; h: hidden state)

def _rnn_tanh_step(gi, h, w_hh, b_hh, w_hr=None, c=None):
    return F.tanh(gi + F.linear(h, w_hh, b_hh)), None


def _rnn_relu_step(gi, h, w_hh, b_hh, w_hr=None, c=None):
    return F.relu(gi + F.linear(h, w_hh, b_hh)), None


def _lstm_step(gi, h, w_hh, b_hh, w_hr, c):
    gates = gi + F.linear(h, w_hh, b_hh)
    i, f, g, o = gates.chunk(4, 1)
    c_new = f.sigmoid() * c + i.sigmoid() * g.tanh()
    h_new = o.sigmoid() * c_new.tanh()
    if w_hr is not None:
        h_new = F.linear(h_new, w_hr)
    return h_new, c_new


def _gru_step(gi, h, w_hh, b_hh, w_hr=None, c=None):
    gh = F.linear(h, w_hh, b_hh)
    i_r, i_z, i_n = gi.chunk(3, 1)
    h_r, h_z, h_n = gh.chunk(3, 1)
    r = (i_r + h_r).sigmoid()
    z = (i_z + h_z).sigmoid()
    n = (i_n + r * h_n).tanh()
    return n + z * (h - n), None


_STEPS = {"RNN_TANH": _rnn_tanh_step, "RNN_RELU": _rnn_relu_step, "LSTM": _lstm_step,
          "GRU": _gru_step}


def _lstm_composite(x, h0, c0, w_ih, w_hh, b_ih, b_hh, bs, reverse):
    return _run_direction(_lstm_step, x, bs, h0, c0, w_ih, w_hh, b_ih, b_hh, None, reverse,
                          fused=False)


def _composite_for(step):
    def composite(x, h0, w_ih, w_hh, b_ih, b_hh, bs, reverse):
        out, h_n, _ = _run_direction(step, x, bs, h0, None, w_ih, w_hh, b_ih, b_hh, None,
                                     reverse, fused=False)
        return out, h_n
    return composite


_COMPOSITES = {s: _composite_for(s) for s in (_gru_step, _rnn_tanh_step, _rnn_relu_step)}


def _run_direction(step, data, bs, h0, c0, w_ih, w_hh, b_ih, b_hh, w_hr, reverse,
                   fused=True):
    """Runs one layer-direction over packed data (N, I) with batch sizes bs (numpy, non-
    increasing). Returns the packed output (N, H_out) and the final h (and c).

    Without an LSTM projection a layer-direction is one fused node (_LSTMLayer, _GRULayer,
    _RNNLayer; also for packed variable lengths); an LSTM with proj_size, and the fused
    nodes' create_graph backward, are composed of cgrad ops step by step."""
    if fused and w_hr is None and bs.size and bs[0] == h0.shape[0]:
        if step is _lstm_step:
            return _LSTMLayer.apply(data, h0, c0, w_ih, w_hh, b_ih, b_hh, bs, reverse,
                                    _lstm_composite)
        if step is _gru_step:
            out, h_n = _GRULayer.apply(data, h0, w_ih, w_hh, b_ih, b_hh, bs, reverse,
                                       _COMPOSITES[step])
        else:
            out, h_n = _RNNLayer.apply(data, h0, w_ih, w_hh, b_ih, b_hh, bs, reverse,
                                       _COMPOSITES[step], step is _rnn_relu_step)
        return out, h_n, None
    gi_all = F.linear(data, w_ih, b_ih)                 # one matmul for every step
    offsets = np.concatenate([[0], np.cumsum(bs)]).astype(np.int64)
    T = bs.size
    outs = [None] * T
    if not reverse:
        h, c = h0, c0
        done_h, done_c = [], []
        for t in range(T):
            n = int(bs[t])
            if n < h.shape[0]:                          # sequences that ended: final states
                done_h.append(h[n:])
                h = h[:n]
                if c is not None:
                    done_c.append(c[n:])
                    c = c[:n]
            h, c = step(gi_all[offsets[t]:offsets[t + 1]], h, w_hh, b_hh, w_hr, c)
            outs[t] = h
        h_n = cat([h] + done_h[::-1], 0) if done_h else h
        c_n = None
        if c is not None:
            c_n = cat([c] + done_c[::-1], 0) if done_c else c
    else:
        n0 = int(bs[-1])
        h = h0[:n0]
        c = c0[:n0] if c0 is not None else None
        for t in range(T - 1, -1, -1):
            n = int(bs[t])
            if n > h.shape[0]:                          # sequences that start now
                h = cat([h, h0[h.shape[0]:n]], 0)
                if c is not None:
                    c = cat([c, c0[c.shape[0]:n]], 0)
            h, c = step(gi_all[offsets[t]:offsets[t + 1]], h, w_hh, b_hh, w_hr, c)
            outs[t] = h
        h_n, c_n = h, c
    return cat(outs, 0), h_n, c_n


class RNNBase(Module):
    """The shared machinery of RNN, LSTM and GRU (torch.nn.RNNBase)."""

    def __init__(self, mode, input_size, hidden_size, num_layers=1, bias=True,
                 batch_first=False, dropout=0.0, bidirectional=False, proj_size=0,
                 device=None, dtype=None):
        super().__init__()
        self.mode = mode
        self.input_size = input_size
        self.hidden_size = hidden_size
        self.num_layers = num_layers
        self.bias = bias
        self.batch_first = batch_first
        self.dropout = float(dropout)
        self.bidirectional = bidirectional
        self.proj_size = proj_size
        num_directions = 2 if bidirectional else 1

        if (not isinstance(dropout, numbers.Number) or not 0 <= dropout <= 1
                or isinstance(dropout, bool)):
            raise ValueError("dropout should be a number in range [0, 1] representing the "
                             "probability of an element being zeroed")
        if dropout > 0 and num_layers == 1:
            _warn("dropout option adds dropout after all but last recurrent layer, so "
                  "non-zero dropout expects num_layers greater than 1, but got "
                  f"dropout={dropout} and num_layers={num_layers}")
        if not isinstance(hidden_size, int):
            raise TypeError(f"hidden_size should be of type int, got: "
                            f"{type(hidden_size).__name__}")
        if hidden_size <= 0:
            raise ValueError("hidden_size must be greater than zero")
        if num_layers <= 0:
            raise ValueError("num_layers must be greater than zero")
        if proj_size < 0:
            raise ValueError("proj_size should be a positive integer or zero to disable "
                             "projections")
        if proj_size >= hidden_size:
            raise ValueError("proj_size has to be smaller than hidden_size")

        if mode == "LSTM":
            gate_size = 4 * hidden_size
        elif mode == "GRU":
            gate_size = 3 * hidden_size
        elif mode in ("RNN_TANH", "RNN_RELU"):
            gate_size = hidden_size
        else:
            raise ValueError("Unrecognized RNN mode: " + mode)

        self._flat_weights_names = []
        self._all_weights = []
        real_hidden = proj_size if proj_size > 0 else hidden_size
        for layer in range(num_layers):
            for direction in range(num_directions):
                layer_input = input_size if layer == 0 else real_hidden * num_directions
                suffix = "_reverse" if direction == 1 else ""
                params = [("weight_ih", (gate_size, layer_input)),
                          ("weight_hh", (gate_size, real_hidden))]
                if bias:
                    params += [("bias_ih", (gate_size,)), ("bias_hh", (gate_size,))]
                if proj_size > 0:
                    params += [("weight_hr", (proj_size, hidden_size))]
                names = []
                for base, shape in params:
                    name = f"{base}_l{layer}{suffix}"
                    setattr(self, name, Parameter(_empty(shape, dtype, device)))
                    names.append(name)
                self._flat_weights_names.extend(names)
                self._all_weights.append(names)
        self.reset_parameters()

    @property
    def _flat_weights(self):
        return [getattr(self, n) for n in self._flat_weights_names]

    @property
    def all_weights(self):
        return [[getattr(self, n) for n in names] for names in self._all_weights]

    def flatten_parameters(self):
        """No-op (there is no cuDNN weight buffer here)."""

    def reset_parameters(self):
        stdv = 1.0 / math.sqrt(self.hidden_size) if self.hidden_size > 0 else 0
        for weight in self.parameters():
            init.uniform_(weight, -stdv, stdv)

    def _layer_params(self, layer, direction):
        suffix = "_reverse" if direction == 1 else ""
        g = lambda base: getattr(self, f"{base}_l{layer}{suffix}", None)  # noqa: E731
        return (g("weight_ih"), g("weight_hh"), g("bias_ih") if self.bias else None,
                g("bias_hh") if self.bias else None,
                g("weight_hr") if self.proj_size > 0 else None)

    def _hidden_shape(self, batch):
        nd = 2 if self.bidirectional else 1
        out = self.proj_size if self.proj_size > 0 else self.hidden_size
        return (self.num_layers * nd, batch, out)

    def check_input(self, input, batch_sizes):
        w_dtype = self._flat_weights[0].dtype
        if input.dtype != w_dtype:
            a, b = f"cgrad.{np.dtype(input.dtype).name}", f"cgrad.{np.dtype(w_dtype).name}"
            raise ValueError(f"RNN input dtype ({a}) does not match weight dtype ({b}). "
                             f"Convert input: input.to({b}), or convert model: model.to({a})")
        expected_input_dim = 2 if batch_sizes is not None else 3
        if input.dim() != expected_input_dim:
            raise RuntimeError(f"input must have {expected_input_dim} dimensions, got "
                               f"{input.dim()}")
        if self.input_size != input.size(-1):
            raise RuntimeError(f"input.size(-1) must be equal to input_size. Expected "
                               f"{self.input_size}, got {input.size(-1)}")

    @staticmethod
    def _check_hidden(hx, expected, msg="Expected hidden size {}, got {}"):
        if tuple(hx.shape) != tuple(expected):
            raise RuntimeError(msg.format(tuple(expected), list(hx.shape)))

    def _run(self, data, bs, hs, cs):
        """All layers over packed data; hs/cs: lists of initial states per layer-direction."""
        step = _STEPS[self.mode]
        nd = 2 if self.bidirectional else 1
        h_out, c_out = [], []
        layer_in = data
        for layer in range(self.num_layers):
            outs = []
            for d in range(nd):
                idx = layer * nd + d
                w_ih, w_hh, b_ih, b_hh, w_hr = self._layer_params(layer, d)
                out, h_n, c_n = _run_direction(step, layer_in, bs, hs[idx],
                                               cs[idx] if cs is not None else None,
                                               w_ih, w_hh, b_ih, b_hh, w_hr, d == 1)
                outs.append(out)
                h_out.append(h_n)
                c_out.append(c_n)
            layer_in = outs[0] if nd == 1 else cat(outs, 1)
            if self.dropout > 0 and self.training and layer < self.num_layers - 1:
                layer_in = F.dropout(layer_in, self.dropout, True)
        h_n = stack(h_out, 0)
        c_n = stack(c_out, 0) if cs is not None else None
        return layer_in, h_n, c_n

    def _forward_impl(self, input, hx, is_lstm):
        name = type(self).__name__
        orig_input = input
        is_packed = isinstance(input, PackedSequence)
        if is_packed:
            data, batch_sizes, sorted_indices, unsorted_indices = input
            bs = np.asarray(batch_sizes.numpy(), dtype=np.int64)
            max_batch = int(bs[0])
            is_batched = True
            self.check_input(data, batch_sizes)
        else:
            if input.dim() not in (2, 3):
                raise ValueError(f"{name}: Expected input to be 2D or 3D, got {input.dim()}D "
                                 "instead")
            is_batched = input.dim() == 3
            batch_dim = 0 if self.batch_first else 1
            if not is_batched:
                input = input.unsqueeze(batch_dim)
            if self.batch_first:
                input = input.transpose(0, 1)
            self.check_input(input, None)
            T, max_batch = input.shape[0], input.shape[1]
            sorted_indices = unsorted_indices = None
            bs = np.full(T, max_batch, dtype=np.int64)
            data = input.reshape(T * max_batch, input.shape[2])

        hshape = self._hidden_shape(max_batch)
        cshape = (hshape[0], max_batch, self.hidden_size)
        if hx is None:
            h0 = zeros(hshape, dtype=data.dtype)
            c0 = zeros(cshape, dtype=data.dtype) if is_lstm else None
        else:
            if is_lstm:
                h0, c0 = hx[0], hx[1]
            else:
                h0, c0 = hx, None
            if not is_packed:
                if is_batched:
                    for t_ in ((h0, c0) if is_lstm else (h0,)):
                        if t_.dim() != 3:
                            raise RuntimeError(
                                f"For batched 3-D input, hx and cx should also be 3-D but got "
                                f"({h0.dim()}-D, {c0.dim()}-D) tensors" if is_lstm else
                                f"For batched 3-D input, hx should also be 3-D but got "
                                f"{h0.dim()}-D tensor")
                else:
                    for t_ in ((h0, c0) if is_lstm else (h0,)):
                        if t_.dim() != 2:
                            raise RuntimeError(
                                f"For unbatched 2-D input, hx and cx should also be 2-D but "
                                f"got ({h0.dim()}-D, {c0.dim()}-D) tensors" if is_lstm else
                                f"For unbatched 2-D input, hx should also be 2-D but got "
                                f"{h0.dim()}-D tensor")
                    h0 = h0.unsqueeze(1)
                    c0 = c0.unsqueeze(1) if is_lstm else None
            if sorted_indices is not None:
                h0 = h0.index_select(1, sorted_indices)
                c0 = c0.index_select(1, sorted_indices) if is_lstm else None
            if is_lstm:
                self._check_hidden(h0, hshape, "Expected hidden[0] size {}, got {}")
                self._check_hidden(c0, cshape, "Expected hidden[1] size {}, got {}")
            else:
                self._check_hidden(h0, hshape)
        hs = list(h0.unbind(0))
        cs = list(c0.unbind(0)) if is_lstm else None
        out, h_n, c_n = self._run(data, bs, hs, cs)

        if unsorted_indices is not None:
            h_n = h_n.index_select(1, unsorted_indices)
            c_n = c_n.index_select(1, unsorted_indices) if is_lstm else None
        if is_packed:
            output = PackedSequence(out, orig_input.batch_sizes, sorted_indices,
                                    unsorted_indices)
        else:
            output = out.reshape(T, max_batch, out.shape[-1])
            if self.batch_first:
                output = output.transpose(0, 1)
            if not is_batched:
                output = output.squeeze(1 if not self.batch_first else 0)
                h_n = h_n.squeeze(1)
                c_n = c_n.squeeze(1) if is_lstm else None
        return output, ((h_n, c_n) if is_lstm else h_n)

    def extra_repr(self):
        s = "{input_size}, {hidden_size}"
        if self.proj_size != 0:
            s += ", proj_size={proj_size}"
        if self.num_layers != 1:
            s += ", num_layers={num_layers}"
        if self.bias is not True:
            s += ", bias={bias}"
        if self.batch_first is not False:
            s += ", batch_first={batch_first}"
        if self.dropout != 0:
            s += ", dropout={dropout}"
        if self.bidirectional is not False:
            s += ", bidirectional={bidirectional}"
        return s.format(**self.__dict__)


class RNN(RNNBase):
    """Elman RNN with tanh or ReLU nonlinearity: h_t = act(W_ih x_t + b_ih + W_hh h_{t-1} +
    b_hh)."""

    def __init__(self, input_size, hidden_size, num_layers=1, nonlinearity="tanh", bias=True,
                 batch_first=False, dropout=0.0, bidirectional=False, device=None,
                 dtype=None):
        if nonlinearity == "tanh":
            mode = "RNN_TANH"
        elif nonlinearity == "relu":
            mode = "RNN_RELU"
        else:
            raise ValueError(f"Unknown nonlinearity '{nonlinearity}'. Select from 'tanh' or "
                             "'relu'.")
        self.nonlinearity = nonlinearity
        super().__init__(mode, input_size, hidden_size, num_layers, bias, batch_first,
                         dropout, bidirectional, 0, device, dtype)
        self.nonlinearity = nonlinearity

    def forward(self, input, hx=None):
        return self._forward_impl(input, hx, False)


class LSTM(RNNBase):
    """Long short-term memory (gates i, f, g, o), with optional projection (proj_size)."""

    def __init__(self, input_size, hidden_size, num_layers=1, bias=True, batch_first=False,
                 dropout=0.0, bidirectional=False, proj_size=0, device=None, dtype=None):
        super().__init__("LSTM", input_size, hidden_size, num_layers, bias, batch_first,
                         dropout, bidirectional, proj_size, device, dtype)

    def forward(self, input, hx=None):
        return self._forward_impl(input, hx, True)


class GRU(RNNBase):
    """Gated recurrent unit (gates r, z, n)."""

    def __init__(self, input_size, hidden_size, num_layers=1, bias=True, batch_first=False,
                 dropout=0.0, bidirectional=False, device=None, dtype=None):
        super().__init__("GRU", input_size, hidden_size, num_layers, bias, batch_first,
                         dropout, bidirectional, 0, device, dtype)

    def forward(self, input, hx=None):
        return self._forward_impl(input, hx, False)


# ---------------------------------------------------------------------------------------------
# cells

class RNNCellBase(Module):
    """Parameters weight_ih, weight_hh, bias_ih, bias_hh of a single recurrent cell."""

    def __init__(self, input_size, hidden_size, bias, num_chunks, device=None, dtype=None):
        super().__init__()
        self.input_size = input_size
        self.hidden_size = hidden_size
        self.bias = bias
        self.weight_ih = Parameter(_empty((num_chunks * hidden_size, input_size), dtype,
                                          device))
        self.weight_hh = Parameter(_empty((num_chunks * hidden_size, hidden_size), dtype,
                                          device))
        if bias:
            self.bias_ih = Parameter(_empty((num_chunks * hidden_size,), dtype, device))
            self.bias_hh = Parameter(_empty((num_chunks * hidden_size,), dtype, device))
        else:
            self.register_parameter("bias_ih", None)
            self.register_parameter("bias_hh", None)
        self.reset_parameters()

    def extra_repr(self):
        s = "{input_size}, {hidden_size}"
        if "bias" in self.__dict__ and self.bias is not True:
            s += ", bias={bias}"
        if "nonlinearity" in self.__dict__ and self.nonlinearity != "tanh":
            s += ", nonlinearity={nonlinearity}"
        return s.format(**self.__dict__)

    def reset_parameters(self):
        stdv = 1.0 / math.sqrt(self.hidden_size) if self.hidden_size > 0 else 0
        for weight in self.parameters():
            init.uniform_(weight, -stdv, stdv)

    def _prepare(self, input, hx, n_states):
        name = type(self).__name__
        if input.dim() not in (1, 2):
            raise ValueError(f"{name}: Expected input to be 1D or 2D, got {input.dim()}D "
                             "instead")
        if input.size(-1) != self.input_size:
            raise RuntimeError(f"input has inconsistent input_size: got {input.size(-1)} "
                               f"expected {self.input_size}")
        states = hx if n_states == 2 else ((hx,) if hx is not None else None)
        if states is not None:
            for k, s in enumerate(states):
                if s.dim() not in (1, 2):
                    what = f"hx[{k}]" if n_states == 2 else "hidden"
                    raise ValueError(f"{name}: Expected {what} to be 1D or 2D, got "
                                     f"{s.dim()}D instead")
        batched = input.dim() == 2
        if not batched:
            input = input.unsqueeze(0)
        B = input.shape[0]
        if states is None:
            states = tuple(zeros((B, self.hidden_size), dtype=input.dtype)
                           for _ in range(n_states))
        elif not batched:
            states = tuple(s.unsqueeze(0) for s in states)
        for i, s in enumerate(states):
            if s.shape[0] != B:
                raise RuntimeError(f"Input batch size {B} doesn't match hidden{i} batch size "
                                   f"{s.shape[0]}")
            if s.shape[1] != self.hidden_size:
                raise RuntimeError(f"hidden{i} has inconsistent hidden_size: got "
                                   f"{s.shape[1]}, expected {self.hidden_size}")
        return input, states, batched


class RNNCell(RNNCellBase):
    """One Elman RNN step: h' = act(W_ih x + b_ih + W_hh h + b_hh)."""

    def __init__(self, input_size, hidden_size, bias=True, nonlinearity="tanh", device=None,
                 dtype=None):
        super().__init__(input_size, hidden_size, bias, num_chunks=1, device=device,
                         dtype=dtype)
        self.nonlinearity = nonlinearity

    def forward(self, input, hx=None):
        if self.nonlinearity not in ("tanh", "relu"):
            raise RuntimeError(f"Unknown nonlinearity: {self.nonlinearity}")
        input, (h,), batched = self._prepare(input, hx, 1)
        step = _rnn_tanh_step if self.nonlinearity == "tanh" else _rnn_relu_step
        out, _ = step(F.linear(input, self.weight_ih, self.bias_ih), h, self.weight_hh,
                      self.bias_hh)
        return out if batched else out.squeeze(0)


class LSTMCell(RNNCellBase):
    """One LSTM step; returns (h', c')."""

    def __init__(self, input_size, hidden_size, bias=True, device=None, dtype=None):
        super().__init__(input_size, hidden_size, bias, num_chunks=4, device=device,
                         dtype=dtype)

    def forward(self, input, hx=None):
        input, (h, c), batched = self._prepare(input, hx, 2)
        h2, c2 = _lstm_step(F.linear(input, self.weight_ih, self.bias_ih), h, self.weight_hh,
                            self.bias_hh, None, c)
        if not batched:
            return h2.squeeze(0), c2.squeeze(0)
        return h2, c2


class GRUCell(RNNCellBase):
    """One GRU step."""

    def __init__(self, input_size, hidden_size, bias=True, device=None, dtype=None):
        super().__init__(input_size, hidden_size, bias, num_chunks=3, device=device,
                         dtype=dtype)

    def forward(self, input, hx=None):
        input, (h,), batched = self._prepare(input, hx, 1)
        out, _ = _gru_step(F.linear(input, self.weight_ih, self.bias_ih), h, self.weight_hh,
                           self.bias_hh)
        return out if batched else out.squeeze(0)
