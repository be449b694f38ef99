"""Transformer, TransformerEncoder(Layer) and TransformerDecoder(Layer), with torch's
submodule names (so state_dict keys, and a torch state dict, match) and torch's post-norm /
pre-norm (``norm_first``) blocks. torch's fast paths (nested tensors, the fused native
encoder kernel) are not reproduced: they compute the same values."""
from __future__ import annotations

import copy

import numpy as np

from cgrad.nn import functional as F
from cgrad.nn import init
from cgrad.nn.modules.attention import MultiheadAttention
from cgrad.nn.modules.container import ModuleList
from cgrad.nn.modules.dropout import Dropout
from cgrad.nn.modules.linear import Linear
from cgrad.nn.modules.module import Module
from cgrad.nn.modules.normalization import LayerNorm

__all__ = ["Transformer", "TransformerEncoder", "TransformerDecoder", "TransformerEncoderLayer",
           "TransformerDecoderLayer"]


def _generate_square_subsequent_mask(sz, device=None, dtype=None):
    from cgrad._creation import full
    from cgrad.ops.triangular import triu
    return triu(full((sz, sz), float("-inf"), dtype=dtype, device=device), diagonal=1)


def _get_clones(module, n):
    return ModuleList([copy.deepcopy(module) for _ in range(n)])


def _get_activation_fn(activation):
    if activation == "relu":
        return F.relu
    if activation == "gelu":
        return F.gelu
    raise RuntimeError(f"activation should be relu/gelu, not {activation}")


def _detect_is_causal_mask(mask, is_causal=None, size=None):
    """torch's rule: ``is_causal`` if given, else whether ``mask`` equals the causal mask."""
    make_causal = is_causal is True
    if is_causal is None and mask is not None:
        sz = size if size is not None else mask.shape[-2]
        causal = np.triu(np.full((sz, sz), -np.inf), 1)
        m = mask._data
        if m.shape == causal.shape:
            make_causal = bool(np.array_equal(m.astype(np.float64), causal))
        else:
            make_causal = False
    return make_causal


def _canonical(mask, dtype, name="mask", other=None, other_name=""):
    from cgrad.nn.functional._attention import _canonical_mask, _dtype_of
    return _canonical_mask(mask, name, _dtype_of(other), other_name, dtype)


class TransformerEncoderLayer(Module):
    """Self-attention and a feed-forward block, each with a residual connection and
    LayerNorm (after the sum, or before the block with ``norm_first=True``)."""

    __constants__ = ["norm_first"]

    def __init__(self, d_model, nhead, dim_feedforward=2048, dropout=0.1, activation=F.relu,
                 layer_norm_eps=1e-5, batch_first=False, norm_first=False, bias=True,
                 device=None, dtype=None):
        super().__init__()
        fk = {"device": device, "dtype": dtype}
        self.self_attn = MultiheadAttention(d_model, nhead, dropout=dropout, bias=bias,
                                            batch_first=batch_first, **fk)
        self.linear1 = Linear(d_model, dim_feedforward, bias=bias, **fk)
        self.dropout = Dropout(dropout)
        self.linear2 = Linear(dim_feedforward, d_model, bias=bias, **fk)
        self.norm_first = norm_first
        self.norm1 = LayerNorm(d_model, eps=layer_norm_eps, bias=bias, **fk)
        self.norm2 = LayerNorm(d_model, eps=layer_norm_eps, bias=bias, **fk)
        self.dropout1 = Dropout(dropout)
        self.dropout2 = Dropout(dropout)
        if isinstance(activation, str):
            activation = _get_activation_fn(activation)
        if activation is F.relu or isinstance(activation, _relu_cls()):
            self.activation_relu_or_gelu = 1
        elif activation is F.gelu or isinstance(activation, _gelu_cls()):
            self.activation_relu_or_gelu = 2
        else:
            self.activation_relu_or_gelu = 0
        self.activation = activation

    def forward(self, src, src_mask=None, src_key_padding_mask=None, is_causal=False):
        dt = src._data.dtype
        src_key_padding_mask = _canonical(src_key_padding_mask, dt, "src_key_padding_mask",
                                          src_mask, "src_mask")
        src_mask = _canonical(src_mask, dt)
        x = src
        if self.norm_first:
            x = x + self._sa_block(self.norm1(x), src_mask, src_key_padding_mask, is_causal)
            x = x + self._ff_block(self.norm2(x))
        else:
            x = self.norm1(x + self._sa_block(x, src_mask, src_key_padding_mask, is_causal))
            x = self.norm2(x + self._ff_block(x))
        return x

    def _sa_block(self, x, attn_mask, key_padding_mask, is_causal=False):
        x = self.self_attn(x, x, x, attn_mask=attn_mask, key_padding_mask=key_padding_mask,
                           need_weights=False, is_causal=is_causal)[0]
        return self.dropout1(x)

    def _ff_block(self, x):
        x = self.linear2(self.dropout(self.activation(self.linear1(x))))
        return self.dropout2(x)


def _relu_cls():
    from cgrad.nn.modules.activation import ReLU
    return ReLU


def _gelu_cls():
    from cgrad.nn.modules.activation import GELU
    return GELU


class TransformerDecoderLayer(Module):
    """Self-attention, attention over ``memory`` and a feed-forward block, each with a
    residual connection and LayerNorm (``norm_first`` as in TransformerEncoderLayer)."""

    __constants__ = ["norm_first"]

    def __init__(self, d_model, nhead, dim_feedforward=2048, dropout=0.1, activation=F.relu,
                 layer_norm_eps=1e-5, batch_first=False, norm_first=False, bias=True,
                 device=None, dtype=None):
        super().__init__()
        fk = {"device": device, "dtype": dtype}
        self.self_attn = MultiheadAttention(d_model, nhead, dropout=dropout,
                                            batch_first=batch_first, bias=bias, **fk)
        self.multihead_attn = MultiheadAttention(d_model, nhead, dropout=dropout,
                                                 batch_first=batch_first, bias=bias, **fk)
        self.linear1 = Linear(d_model, dim_feedforward, bias=bias, **fk)
        self.dropout = Dropout(dropout)
        self.linear2 = Linear(dim_feedforward, d_model, bias=bias, **fk)
        self.norm_first = norm_first
        self.norm1 = LayerNorm(d_model, eps=layer_norm_eps, bias=bias, **fk)
        self.norm2 = LayerNorm(d_model, eps=layer_norm_eps, bias=bias, **fk)
        self.norm3 = LayerNorm(d_model, eps=layer_norm_eps, bias=bias, **fk)
        self.dropout1 = Dropout(dropout)
        self.dropout2 = Dropout(dropout)
        self.dropout3 = Dropout(dropout)
        if isinstance(activation, str):
            self.activation = _get_activation_fn(activation)
        else:
            self.activation = activation

    def forward(self, tgt, memory, tgt_mask=None, memory_mask=None, tgt_key_padding_mask=None,
                memory_key_padding_mask=None, tgt_is_causal=False, memory_is_causal=False):
        x = tgt
        if self.norm_first:
            x = x + self._sa_block(self.norm1(x), tgt_mask, tgt_key_padding_mask,
                                   tgt_is_causal)
            x = x + self._mha_block(self.norm2(x), memory, memory_mask,
                                    memory_key_padding_mask, memory_is_causal)
            x = x + self._ff_block(self.norm3(x))
        else:
            x = self.norm1(x + self._sa_block(x, tgt_mask, tgt_key_padding_mask,
                                              tgt_is_causal))
            x = self.norm2(x + self._mha_block(x, memory, memory_mask,
                                               memory_key_padding_mask, memory_is_causal))
            x = self.norm3(x + self._ff_block(x))
        return x

    def _sa_block(self, x, attn_mask, key_padding_mask, is_causal=False):
        x = self.self_attn(x, x, x, attn_mask=attn_mask, key_padding_mask=key_padding_mask,
                           is_causal=is_causal, need_weights=False)[0]
        return self.dropout1(x)

    def _mha_block(self, x, mem, attn_mask, key_padding_mask, is_causal=False):
        x = self.multihead_attn(x, mem, mem, attn_mask=attn_mask,
                                key_padding_mask=key_padding_mask, is_causal=is_causal,
                                need_weights=False)[0]
        return self.dropout2(x)

    def _ff_block(self, x):
        x = self.linear2(self.dropout(self.activation(self.linear1(x))))
        return self.dropout3(x)


class TransformerEncoder(Module):
    """``num_layers`` deep copies of ``encoder_layer`` (``layers``), then ``norm`` if given.
    ``enable_nested_tensor`` is accepted (cgrad has no nested tensors); torch's warning
    about why its fast path is off is reproduced."""

    __constants__ = ["norm"]

    def __init__(self, encoder_layer, num_layers, norm=None, enable_nested_tensor=True,
                 mask_check=True):
        super().__init__()
        self.layers = _get_clones(encoder_layer, num_layers)
        self.num_layers = num_layers
        self.norm = norm
        self.enable_nested_tensor = enable_nested_tensor
        self.use_nested_tensor = enable_nested_tensor
        self.mask_check = mask_check
        enc = "encoder_layer"
        why_not = ""
        if not isinstance(encoder_layer, TransformerEncoderLayer):
            why_not = f"{enc} was not TransformerEncoderLayer"
        elif encoder_layer.norm_first:
            why_not = f"{enc}.norm_first was True"
        elif not encoder_layer.self_attn.batch_first:
            why_not = (f"{enc}.self_attn.batch_first was not True"
                       "(use batch_first for better inference performance)")
        elif not encoder_layer.self_attn._qkv_same_embed_dim:
            why_not = f"{enc}.self_attn._qkv_same_embed_dim was not True"
        elif encoder_layer.self_attn.in_proj_bias is None:
            why_not = f"{enc}.self_attn was passed bias=False"
        elif not encoder_layer.activation_relu_or_gelu:
            why_not = f"{enc}.activation_relu_or_gelu was not True"
        elif encoder_layer.norm1.eps != encoder_layer.norm2.eps:
            why_not = f"{enc}.norm1.eps was not equal to {enc}.norm2.eps"
        elif encoder_layer.self_attn.num_heads % 2 == 1:
            why_not = "num_head is odd"
        if enable_nested_tensor and why_not:
            import warnings
            warnings.warn(f"enable_nested_tensor is True, but self.use_nested_tensor is False "
                          f"because {why_not}", UserWarning, stacklevel=2)
            self.use_nested_tensor = False

    def forward(self, src, mask=None, src_key_padding_mask=None, is_causal=None):
        dt = src._data.dtype
        src_key_padding_mask = _canonical(src_key_padding_mask, dt, "src_key_padding_mask",
                                          mask, "mask")
        mask = _canonical(mask, dt)
        first = self.layers[0] if len(self.layers) else None
        batch_first = first.self_attn.batch_first if first is not None and hasattr(
            first, "self_attn") else False
        seq_len = None
        if src.dim() == 3:
            seq_len = src.shape[1] if batch_first else src.shape[0]
        elif src.dim() == 2:
            seq_len = src.shape[0]
        is_causal = _detect_is_causal_mask(mask, is_causal, seq_len)
        keep = self._nested_keep(src, mask, src_key_padding_mask)
        out = src
        for mod in self.layers:
            out = mod(out, src_mask=mask, is_causal=is_causal,
                      src_key_padding_mask=src_key_padding_mask)
        if keep is not None:
            out = out * keep
        if self.norm is not None:
            out = self.norm(out)
        return out

    def _nested_keep(self, src, mask, src_key_padding_mask):
        """torch's nested-tensor fast path (eval, no gradient wanted, a left-aligned padding
        mask, no attention mask) drops the padded positions and pads the result with zeros
        again: the same values at the kept positions, zeros at the padded ones. Returns the
        (N, S, 1) 0/1 factor that reproduces it, or None when torch takes the normal path."""
        from cgrad._C import _wrap
        from cgrad.nn.functional._utils import _grad_enabled
        if (not self.use_nested_tensor or not len(self.layers) or self.layers[0].training
                or src.dim() != 3 or src_key_padding_mask is None or mask is not None):
            return None
        if _grad_enabled() and (src.requires_grad
                                or any(p.requires_grad for p in self.parameters())):
            return None
        valid = src_key_padding_mask._data == 0
        if self.mask_check:
            n = valid.sum(axis=1)
            if not np.array_equal(valid, np.arange(valid.shape[1]) < n[:, None]):
                return None
        return _wrap(valid[:, :, None].astype(src._data.dtype))


class TransformerDecoder(Module):
    """``num_layers`` deep copies of ``decoder_layer`` (``layers``), then ``norm`` if given."""

    __constants__ = ["norm"]

    def __init__(self, decoder_layer, num_layers, norm=None):
        super().__init__()
        self.layers = _get_clones(decoder_layer, num_layers)
        self.num_layers = num_layers
        self.norm = norm

    def forward(self, tgt, memory, tgt_mask=None, memory_mask=None, tgt_key_padding_mask=None,
                memory_key_padding_mask=None, tgt_is_causal=None, memory_is_causal=False):
        output = tgt
        seq_len = None
        if len(self.layers):
            first = self.layers[0]
            bf = first.self_attn.batch_first if hasattr(first, "self_attn") else False
            if tgt.dim() == 3:
                seq_len = tgt.shape[1] if bf else tgt.shape[0]
            elif tgt.dim() == 2:
                seq_len = tgt.shape[0]
        tgt_is_causal = _detect_is_causal_mask(tgt_mask, tgt_is_causal, seq_len)
        for mod in self.layers:
            output = mod(output, memory, tgt_mask=tgt_mask, memory_mask=memory_mask,
                         tgt_key_padding_mask=tgt_key_padding_mask,
                         memory_key_padding_mask=memory_key_padding_mask,
                         tgt_is_causal=tgt_is_causal, memory_is_causal=memory_is_causal)
        if self.norm is not None:
            output = self.norm(output)
        return output


class Transformer(Module):
    """An encoder-decoder Transformer (Vaswani et al. 2017): ``encoder`` and ``decoder``
    stacks with final LayerNorms; every parameter with more than one dim is re-drawn with
    xavier_uniform_, as torch."""

    def __init__(self, d_model=512, nhead=8, num_encoder_layers=6, num_decoder_layers=6,
                 dim_feedforward=2048, dropout=0.1, activation=F.relu, custom_encoder=None,
                 custom_decoder=None, layer_norm_eps=1e-5, batch_first=False, norm_first=False,
                 bias=True, device=None, dtype=None):
        super().__init__()
        fk = {"device": device, "dtype": dtype}
        if custom_encoder is not None:
            self.encoder = custom_encoder
        else:
            enc_layer = TransformerEncoderLayer(d_model, nhead, dim_feedforward, dropout,
                                                activation, layer_norm_eps, batch_first,
                                                norm_first, bias, **fk)
            enc_norm = LayerNorm(d_model, eps=layer_norm_eps, bias=bias, **fk)
            self.encoder = TransformerEncoder(enc_layer, num_encoder_layers, enc_norm)
        if custom_decoder is not None:
            self.decoder = custom_decoder
        else:
            dec_layer = TransformerDecoderLayer(d_model, nhead, dim_feedforward, dropout,
                                                activation, layer_norm_eps, batch_first,
                                                norm_first, bias, **fk)
            dec_norm = LayerNorm(d_model, eps=layer_norm_eps, bias=bias, **fk)
            self.decoder = TransformerDecoder(dec_layer, num_decoder_layers, dec_norm)
        self._reset_parameters()
        self.d_model = d_model
        self.nhead = nhead
        self.batch_first = batch_first

    def forward(self, src, tgt, src_mask=None, tgt_mask=None, memory_mask=None,
                src_key_padding_mask=None, tgt_key_padding_mask=None,
                memory_key_padding_mask=None, src_is_causal=None, tgt_is_causal=None,
                memory_is_causal=False):
        is_batched = src.dim() == 3
        if not self.batch_first and src.shape[1] != tgt.shape[1] and is_batched:
            raise RuntimeError("the batch number of src and tgt must be equal")
        if self.batch_first and src.shape[0] != tgt.shape[0] and is_batched:
            raise RuntimeError("the batch number of src and tgt must be equal")
        if src.shape[-1] != self.d_model or tgt.shape[-1] != self.d_model:
            raise RuntimeError("the feature number of src and tgt must be equal to d_model")
        memory = self.encoder(src, mask=src_mask, src_key_padding_mask=src_key_padding_mask,
                              is_causal=src_is_causal)
        return self.decoder(tgt, memory, tgt_mask=tgt_mask, memory_mask=memory_mask,
                            tgt_key_padding_mask=tgt_key_padding_mask,
                            memory_key_padding_mask=memory_key_padding_mask,
                            tgt_is_causal=tgt_is_causal, memory_is_causal=memory_is_causal)

    @staticmethod
    def generate_square_subsequent_mask(sz, device=None, dtype=None):
        """A float (sz, sz) mask: -inf above the diagonal, 0 elsewhere."""
        return _generate_square_subsequent_mask(sz, device, dtype)

    def _reset_parameters(self):
        for p in self.parameters():
            if p.dim() > 1:
                init.xavier_uniform_(p)
