"""F.scaled_dot_product_attention, F.multi_head_attention_forward, nn.MultiheadAttention and
the Transformer modules against torch 2.13 (copied weights), finite differences and double
backward."""
import warnings

import numpy as np
import pytest

import cgrad
import cgrad.nn as nn
import cgrad.nn.functional as F
from cgrad.autograd import gradcheck, gradgradcheck

RNG = np.random.default_rng(1234)


def _randn(*shape):
    return RNG.standard_normal(shape)


def _close(a, b, tol=1e-10):
    a = a.detach().numpy() if hasattr(a, "detach") else np.asarray(a)
    b = b.detach().numpy() if hasattr(b, "detach") else np.asarray(b)
    assert a.shape == b.shape
    np.testing.assert_allclose(a, b, rtol=tol, atol=tol)


# ---------------------------------------------------------------- SDPA


SDPA_CASES = [
    dict(),
    dict(is_causal=True),
    dict(mask="bool"),
    dict(mask="float", scale=0.3),
    dict(gqa=True, mask="bool"),
]


@pytest.mark.parametrize("case", SDPA_CASES, ids=lambda c: "-".join(map(str, c.values()))
                         or "plain")
def test_sdpa_matches_torch(case):
    torch = pytest.importorskip("torch")
    hk = 2 if case.get("gqa") else 4
    arrs = [_randn(2, 4, 3, 5), _randn(2, hk, 6, 5), _randn(2, hk, 6, 7)]
    ci = [cgrad.tensor(a, requires_grad=True) for a in arrs]
    ti = [torch.tensor(a, requires_grad=True) for a in arrs]
    ckw, tkw = {}, {}
    cm = tm = None
    if case.get("mask") == "bool":
        m = RNG.random((3, 6)) > 0.3
        m[:, 0] = True
        ckw["attn_mask"], tkw["attn_mask"] = cgrad.tensor(m), torch.tensor(m)
    elif case.get("mask") == "float":
        m = _randn(3, 6)
        cm, tm = cgrad.tensor(m, requires_grad=True), torch.tensor(m, requires_grad=True)
        ckw["attn_mask"], tkw["attn_mask"] = cm, tm
    for k in ("is_causal", "scale"):
        if k in case:
            ckw[k] = tkw[k] = case[k]
    if case.get("gqa"):
        ckw["enable_gqa"] = tkw["enable_gqa"] = True
    out = F.scaled_dot_product_attention(*ci, **ckw)
    ref = torch.nn.functional.scaled_dot_product_attention(*ti, **tkw)
    _close(out, ref)
    assert type(out.grad_fn).__name__ == "ScaledDotProductFlashAttentionForCpuBackward0"
    g = _randn(*out.shape)
    (out * cgrad.tensor(g)).sum().backward()
    (ref * torch.tensor(g)).sum().backward()
    for a, b in zip(ci, ti):
        _close(a.grad, b.grad)
    if cm is not None:
        _close(cm.grad, tm.grad)


def test_sdpa_float32_leading_dims_and_fully_masked_row():
    torch = pytest.importorskip("torch")
    arrs = [_randn(3, 4, 6).astype(np.float32) for _ in range(3)]     # one leading dim
    m = RNG.random((4, 4)) > 0.4
    m[1] = False                                                       # a fully masked row
    ci = [cgrad.tensor(a, requires_grad=True) for a in arrs]
    ti = [torch.tensor(a, requires_grad=True) for a in arrs]
    out = F.scaled_dot_product_attention(*ci, attn_mask=cgrad.tensor(m))
    ref = torch.nn.functional.scaled_dot_product_attention(*ti, attn_mask=torch.tensor(m))
    assert out.dtype == cgrad.float32
    _close(out, ref, 1e-5)
    np.testing.assert_array_equal(out.detach().numpy()[:, 1], 0)
    g = _randn(*out.shape).astype(np.float32)
    (out * cgrad.tensor(g)).sum().backward()
    (ref * torch.tensor(g)).sum().backward()
    for a, b in zip(ci, ti):
        assert a.grad.dtype == cgrad.float32
        _close(a.grad, b.grad, 1e-5)


def test_sdpa_gradcheck_and_double_backward():
    q = cgrad.tensor(_randn(1, 2, 3, 4), requires_grad=True)
    k = cgrad.tensor(_randn(1, 1, 5, 4), requires_grad=True)
    v = cgrad.tensor(_randn(1, 1, 5, 3), requires_grad=True)
    m = cgrad.tensor(_randn(3, 5), requires_grad=True)

    def f(q, k, v, m):
        return F.scaled_dot_product_attention(q, k, v, attn_mask=m, enable_gqa=True)
    assert gradcheck(f, (q, k, v, m))
    assert gradgradcheck(f, (q, k, v, m))


def test_sdpa_double_backward_matches_torch():
    torch = pytest.importorskip("torch")
    arrs = [_randn(2, 3, 4), _randn(2, 5, 4), _randn(2, 5, 3)]
    ci = [cgrad.tensor(a, requires_grad=True) for a in arrs]
    ti = [torch.tensor(a, requires_grad=True) for a in arrs]
    out = F.scaled_dot_product_attention(*ci, is_causal=True)
    ref = torch.nn.functional.scaled_dot_product_attention(*ti, is_causal=True)
    gc = cgrad.autograd.grad((out ** 2).sum(), ci, create_graph=True)
    gt = torch.autograd.grad((ref ** 2).sum(), ti, create_graph=True)
    sum(g.sum() for g in gc).backward()
    sum(g.sum() for g in gt).backward()
    for a, b in zip(ci, ti):
        _close(a.grad, b.grad, 1e-9)


def test_sdpa_dropout_reproducible():
    q, k, v = (cgrad.tensor(_randn(2, 3, 4), requires_grad=True) for _ in range(3))
    cgrad.manual_seed(3)
    a = F.scaled_dot_product_attention(q, k, v, dropout_p=0.5)
    cgrad.manual_seed(3)
    b = F.scaled_dot_product_attention(q, k, v, dropout_p=0.5)
    _close(a, b, 0)
    assert not np.allclose(a.detach().numpy(),
                           F.scaled_dot_product_attention(q, k, v).detach().numpy())
    cgrad.manual_seed(3)
    assert gradcheck(lambda q, k, v: (cgrad.manual_seed(3), F.scaled_dot_product_attention(
        q, k, v, dropout_p=0.5))[1], (q, k, v))


def test_sdpa_errors():
    q = cgrad.tensor(_randn(2, 3, 4))
    with pytest.raises(RuntimeError, match="Explicit attn_mask should not be set"):
        F.scaled_dot_product_attention(q, q, q, attn_mask=cgrad.ones(3, 3, dtype=cgrad.bool),
                                       is_causal=True)
    with pytest.raises(RuntimeError, match="to have the same dtype"):
        F.scaled_dot_product_attention(q, q.float(), q)
    with pytest.raises(RuntimeError, match="Number of heads in key and value must divide"):
        k = cgrad.tensor(_randn(1, 2, 3, 4))
        F.scaled_dot_product_attention(cgrad.tensor(_randn(1, 3, 3, 4)), k, k, enable_gqa=True)


# ---------------------------------------------------------------- MultiheadAttention


def _copy_state(cmod, tmod):
    cmod.load_state_dict({k: cgrad.tensor(v.detach().numpy())
                          for k, v in tmod.state_dict().items()})


MHA_CASES = [
    (dict(), {}, [(3, 2, 8)] * 3, {}),
    (dict(batch_first=True), dict(need_weights=False), [(2, 3, 8), (2, 5, 8), (2, 5, 8)],
     dict(key_padding_mask=("bool", (2, 5)))),
    (dict(kdim=4, vdim=6, add_bias_kv=True, add_zero_attn=True),
     dict(average_attn_weights=False), [(3, 2, 8), (5, 2, 4), (5, 2, 6)],
     dict(attn_mask=("bool", (3, 5)))),
    (dict(bias=False), {}, [(3, 8), (5, 8), (5, 8)], dict(attn_mask=("float", (3, 5)))),
    (dict(), dict(need_weights=False, is_causal=True), [(3, 2, 8)] * 3,
     dict(attn_mask=("causal", 3))),
]


@pytest.mark.parametrize("kw,fkw,shapes,masks", MHA_CASES)
def test_multihead_attention_matches_torch(kw, fkw, shapes, masks):
    torch = pytest.importorskip("torch")
    torch.manual_seed(0)
    tm = torch.nn.MultiheadAttention(8, 2, **kw).double()
    cm = nn.MultiheadAttention(8, 2, **kw).double()
    assert [n for n, _ in cm.named_parameters()] == [n for n, _ in tm.named_parameters()]
    assert repr(cm) == repr(tm)
    _copy_state(cm, tm)
    arrs = [_randn(*s) for s in shapes]
    ci = [cgrad.tensor(a, requires_grad=True) for a in arrs]
    ti = [torch.tensor(a, requires_grad=True) for a in arrs]
    cmk, tmk = {}, {}
    for name, (kind, shape) in masks.items():
        if kind == "bool":
            m = RNG.random(shape) > 0.7
            m[..., 0] = False
        elif kind == "float":
            m = _randn(*shape)
        else:
            m = np.triu(np.full((shape, shape), -np.inf), 1)
        cmk[name], tmk[name] = cgrad.tensor(m), torch.tensor(m)
    co, cw = cm(*ci, **cmk, **fkw)
    to, tw = tm(*ti, **tmk, **fkw)
    _close(co, to)
    if tw is None:
        assert cw is None
    else:
        _close(cw, tw)
    g = _randn(*co.shape)
    (co * cgrad.tensor(g)).sum().backward()
    (to * torch.tensor(g)).sum().backward()
    for a, b in zip(ci, ti):
        _close(a.grad, b.grad)
    cp = dict(cm.named_parameters())
    for n, p in tm.named_parameters():
        _close(cp[n].grad, p.grad)


def test_multihead_attention_init_and_errors():
    m = nn.MultiheadAttention(8, 2, add_bias_kv=True)
    assert tuple(m.in_proj_weight.shape) == (24, 8) and tuple(m.bias_k.shape) == (1, 1, 8)
    np.testing.assert_array_equal(m.in_proj_bias.detach().numpy(), 0)
    np.testing.assert_array_equal(m.out_proj.bias.detach().numpy(), 0)
    bound = np.sqrt(6 / (24 + 8))
    assert np.abs(m.in_proj_weight.detach().numpy()).max() <= bound
    assert type(m.out_proj).__name__ == "NonDynamicallyQuantizableLinear"
    assert list(m.state_dict()) == ["in_proj_weight", "in_proj_bias", "bias_k", "bias_v",
                                    "out_proj.weight", "out_proj.bias"]
    with pytest.raises(AssertionError, match="embed_dim must be divisible by num_heads"):
        nn.MultiheadAttention(6, 4)
    with pytest.raises(ValueError, match="must be greater than 0"):
        nn.MultiheadAttention(0, 2)
    x = cgrad.randn(3, 2, 8)
    with pytest.raises(RuntimeError, match="Need attn_mask if specifying the is_causal hint"):
        m(x, x, x, is_causal=True)


# ---------------------------------------------------------------- Transformer


def _check_module(cmod, tmod, cargs, targs, ckw=None, tkw=None):
    torch = pytest.importorskip("torch")
    assert repr(cmod) == repr(tmod)
    assert list(cmod.state_dict()) == list(tmod.state_dict())
    _copy_state(cmod, tmod)
    cmod.eval()
    tmod.eval()
    co = cmod(*cargs, **(ckw or {}))
    to = tmod(*targs, **(tkw or {}))
    _close(co, to)
    g = _randn(*co.shape)
    (co * cgrad.tensor(g)).sum().backward()
    (to * torch.tensor(g)).sum().backward()
    for a, b in zip(cargs, targs):
        _close(a.grad, b.grad)
    cp = dict(cmod.named_parameters())
    for n, p in tmod.named_parameters():
        _close(cp[n].grad, p.grad)
    with cgrad.no_grad(), torch.no_grad():       # torch's eval fast path, same values
        _close(cmod(*cargs, **(ckw or {})), tmod(*targs, **(tkw or {})))


def _pair(*shape):
    torch = pytest.importorskip("torch")
    a = _randn(*shape)
    return cgrad.tensor(a, requires_grad=True), torch.tensor(a, requires_grad=True)


@pytest.mark.parametrize("norm_first,activation", [(False, "relu"), (True, "gelu")])
def test_transformer_encoder_matches_torch(norm_first, activation):
    torch = pytest.importorskip("torch")
    kw = dict(dim_feedforward=16, activation=activation, norm_first=norm_first,
              batch_first=True)
    torch.manual_seed(0)
    tl = torch.nn.TransformerEncoderLayer(8, 2, **kw).double()
    te = torch.nn.TransformerEncoder(tl, 2, norm=torch.nn.LayerNorm(8).double(),
                                     enable_nested_tensor=False)
    ce = nn.TransformerEncoder(nn.TransformerEncoderLayer(8, 2, **kw).double(), 2,
                               norm=nn.LayerNorm(8).double(), enable_nested_tensor=False)
    cx, tx = _pair(2, 4, 8)
    kpm = np.zeros((2, 4))
    kpm[1, 3] = -np.inf
    mask = np.triu(np.full((4, 4), -np.inf), 1)
    _check_module(ce, te, [cx], [tx],
                  dict(mask=cgrad.tensor(mask), src_key_padding_mask=cgrad.tensor(kpm)),
                  dict(mask=torch.tensor(mask), src_key_padding_mask=torch.tensor(kpm)))


def test_transformer_decoder_layer_matches_torch():
    torch = pytest.importorskip("torch")
    torch.manual_seed(0)
    tl = torch.nn.TransformerDecoderLayer(8, 2, dim_feedforward=16, bias=False).double()
    cl = nn.TransformerDecoderLayer(8, 2, dim_feedforward=16, bias=False).double()
    ct, tt = _pair(4, 2, 8)
    cmem, tmem = _pair(5, 2, 8)
    mask = np.triu(np.full((4, 4), -np.inf), 1)
    _check_module(cl, tl, [ct, cmem], [tt, tmem], dict(tgt_mask=cgrad.tensor(mask)),
                  dict(tgt_mask=torch.tensor(mask)))


def test_transformer_matches_torch():
    torch = pytest.importorskip("torch")
    torch.manual_seed(0)
    kw = dict(d_model=8, nhead=2, num_encoder_layers=1, num_decoder_layers=2,
              dim_feedforward=16, batch_first=True)
    tm = torch.nn.Transformer(**kw).double()
    cm = nn.Transformer(**kw).double()
    cs, ts = _pair(2, 5, 8)
    ct, tt = _pair(2, 4, 8)
    cmask = nn.Transformer.generate_square_subsequent_mask(4, dtype=cgrad.float64)
    tmask = torch.nn.Transformer.generate_square_subsequent_mask(4, dtype=torch.float64)
    _close(cmask, tmask, 0)
    _check_module(cm, tm, [cs, ct], [ts, tt], dict(tgt_mask=cmask), dict(tgt_mask=tmask))
    with pytest.raises(RuntimeError, match="the batch number of src and tgt must be equal"):
        cm(cgrad.randn(2, 5, 8), cgrad.randn(3, 4, 8))


def test_transformer_encoder_nested_tensor_warning():
    layer = nn.TransformerEncoderLayer(8, 2, dim_feedforward=16)
    with pytest.warns(UserWarning, match="enable_nested_tensor is True, but self.use_nested"
                                         "_tensor is False because encoder_layer.self_attn."
                                         "batch_first was not True"):
        nn.TransformerEncoder(layer, 1)


def test_mismatched_mask_types_warn_as_torch():
    torch = pytest.importorskip("torch")
    layer = nn.TransformerEncoderLayer(8, 2, dim_feedforward=16, batch_first=True)
    enc = nn.TransformerEncoder(layer, 1)
    tl = torch.nn.TransformerEncoderLayer(8, 2, dim_feedforward=16, batch_first=True)
    te = torch.nn.TransformerEncoder(tl, 1)
    kpm = np.zeros((2, 3), bool)
    mask = np.triu(np.full((3, 3), -np.inf), 1).astype(np.float32)
    x = _randn(2, 3, 8).astype(np.float32)
    msg = "Support for mismatched src_key_padding_mask and mask is deprecated"
    with pytest.warns(UserWarning, match=msg):
        te(torch.tensor(x), mask=torch.tensor(mask), src_key_padding_mask=torch.tensor(kpm))
    with pytest.warns(UserWarning, match=msg):
        enc(cgrad.tensor(x), mask=cgrad.tensor(mask), src_key_padding_mask=cgrad.tensor(kpm))
    mha = nn.MultiheadAttention(8, 2)
    y = cgrad.tensor(_randn(3, 2, 8).astype(np.float32))
    with pytest.warns(UserWarning, match="mismatched key_padding_mask and attn_mask"):
        mha(y, y, y, key_padding_mask=cgrad.tensor(kpm), attn_mask=cgrad.tensor(mask))


def test_encoder_eval_padding_fast_path_zeroes_padded_positions_as_torch():
    torch = pytest.importorskip("torch")
    torch.manual_seed(0)
    tl = torch.nn.TransformerEncoderLayer(8, 2, 16, batch_first=True)
    te = torch.nn.TransformerEncoder(tl, 1).eval()
    ce = nn.TransformerEncoder(nn.TransformerEncoderLayer(8, 2, 16, batch_first=True), 1).eval()
    _copy_state(ce, te)
    x = _randn(2, 3, 8).astype(np.float32)
    kpm = np.zeros((2, 3), bool)
    kpm[1, 2] = True
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore")          # torch: "nested tensors ... prototype stage"
        ref = te(torch.tensor(x), src_key_padding_mask=torch.tensor(kpm))
    with cgrad.no_grad():
        out = ce(cgrad.tensor(x), src_key_padding_mask=cgrad.tensor(kpm))
    _close(out, ref, 1e-5)
    np.testing.assert_array_equal(out.numpy()[1, 2], 0)


def test_multihead_attention_dropout_seeded_and_double_backward():
    mha = nn.MultiheadAttention(4, 2, dropout=0.5).double()
    x = cgrad.tensor(_randn(3, 1, 4), requires_grad=True)
    for need in (True, False):
        cgrad.manual_seed(5)
        a = mha(x, x, x, need_weights=need)[0]
        cgrad.manual_seed(5)
        b = mha(x, x, x, need_weights=need)[0]
        _close(a, b, 0)
    mha.eval()
    for need in (True, False):
        assert gradgradcheck(lambda q, need=need: mha(q, q, q, need_weights=need)[0], (x,))
