"""Devices (issue 17): cgrad.device, Tensor.device and the device= of every factory,
Tensor.to in all of torch's forms, cpu()/cuda()/pin_memory(), the cgrad.cuda,
cgrad.accelerator and cgrad.backends namespaces, set_default_device, against torch 2.13's CPU
build where it is importable.

Each case runs the same snippet against cgrad and torch (tests/torch_compare.py): values
(tensors as dtype, shape and values; devices as type, index, str, repr and hash) must be
equal, errors of the same type with the key phrase in both messages. Without torch the
cgrad half of each case still runs (against the stored phrase)."""
from __future__ import annotations

import copy
import pickle

import numpy as np
import pytest

import cgrad
from torch_compare import check, outcome

try:
    import torch
except ImportError:     # the cgrad half of every case still runs
    torch = None

NOCUDA = "not compiled with CUDA enabled"
NOACC = "Cannot access accelerator device when none is available."


def _run(code, phrase):
    cg = outcome(cgrad, code)
    if torch is None:
        if phrase is None:
            assert cg[0] == "ok", cg
        else:
            assert cg[0] == "raised" and phrase in cg[2], cg
        return
    check(cg, outcome(torch, code), phrase)


def _cases(rows):
    return pytest.mark.parametrize("code,phrase", rows, ids=[c for c, _ in rows])


# -- cgrad.device -----------------------------------------------------------------------------
DEVICE_CASES = [
    ('r = T.device("cpu")', None),
    ('r = T.device("cpu:0")', None),
    ('r = T.device("cpu", 0)', None),
    ('r = T.device("cpu", 3)', None),
    ('r = T.device(type="cpu")', None),
    ('r = T.device(type="cpu", index=1)', None),
    ('r = T.device("cpu", index=2)', None),
    ('r = T.device(T.device("cpu:1"))', None),
    ('r = T.device(device=T.device("cpu"))', None),
    ('r = T.device("cpu", None)', None),
    ('r = T.device(b"cpu")', None),
    ('r = T.device("cpu", np.int64(1))', None),
    ('r = T.device("cuda")', None),
    ('r = T.device("cuda:1")', None),
    ('r = T.device("cuda", 1).index', None),
    ('r = T.device("mps")', None),
    ('r = T.device("meta")', None),
    ('r = T.device("xla")', None),
    ('r = T.device("privateuseone")', None),
    ('r = T.device("cpu").type', None),
    ('r = T.device("cpu").index', None),
    ('r = str(T.device("cpu:0"))', None),
    ('r = repr(T.device("cuda", 2))', None),
    ('r = format(T.device("cpu:0"))', None),
    ('r = f"{T.device(\'cpu\')}"', None),
    ('r = T.device("cpu") == T.device("cpu:0")', None),
    ('r = T.device("cpu") == T.device("cpu")', None),
    ('r = T.device("cpu") != T.device("cpu")', None),
    ('r = T.device("cpu") == "cpu"', None),
    ('r = T.device("cpu") == None', None),
    ('r = T.device("cpu").__eq__("cpu") is NotImplemented', None),
    ('r = T.device("cpu") in ("cpu", "cuda")', None),
    ('r = [hash(T.device(s)) for s in ("cpu", "cpu:0", "cpu:3", "cuda", "cuda:1", "mps", '
     '"meta", "xla", "privateuseone")]', None),
    ('r = {T.device("cpu"): 1}[T.device("cpu")]', None),
    ('r = bool(T.device("cpu"))', None),
    ('r = isinstance(T.device("cpu"), T.device)', None),
    ('r = T.zeros(1).device == T.device("cpu")', None),
    ('r = T.zeros(1).device', None),
    # errors
    ('r = T.device(0)', NOACC),
    ('r = T.device("gpu")', "Expected one of cpu, cuda, ipu, xpu, mkldnn, opengl, opencl, "
                            "ideep, hip, ve, fpga, maia, xla, lazy, vulkan, mps, meta, hpu, "
                            "mtia, privateuseone device type at start of device string: gpu"),
    ('r = T.device("CPU")', "device type at start of device string: CPU"),
    ('r = T.device("cpu:x")', "Invalid device string: 'cpu:x'"),
    ('r = T.device("cpu:-1")', "Invalid device string: 'cpu:-1'"),
    ('r = T.device(" cpu")', "Invalid device string: ' cpu'"),
    ('r = T.device("cpu:00")', "Invalid device string: 'cpu:00'"),
    ('r = T.device("cpu:01")', "Invalid device string: 'cpu:01'"),
    ('r = T.device("cpu:")', "Invalid device string: 'cpu:'"),
    ('r = T.device("cpu1")', "Invalid device string: 'cpu1'"),
    ('r = T.device("")', "Device string must not be empty"),
    ('r = T.device("gpu:1")', "device type at start of device string: gpu"),
    ('r = T.device("cpu", -1)', "Device index must not be negative"),
    ('r = T.device(1.5)', "received an invalid combination of arguments"),
    ('r = T.device()', "received an invalid combination of arguments"),
    ('r = T.device(index=0)', "received an invalid combination of arguments"),
    ('r = T.device("cpu", 0, 1)', "received an invalid combination of arguments"),
    ('r = T.device("cpu", "0")', "device(): argument 'index' (position 2) must be int, not str"),
    ('r = T.device("cpu", True)', "device(): argument 'index' (position 2) must be int, not "
                                  "bool"),
    ('r = T.device("cpu:0", 0)', "type (string) must not include an index because index was "
                                 "passed explicitly: cpu:0"),
    ('r = T.device(type="cpu", foo=1)', "device() got an unexpected keyword argument 'foo'"),
    ('r = T.device(T.device("cpu"), 1)', "device(): argument 'type' (position 1) must be str"),
    ('d = T.device("cpu"); d.type = "x"', "attribute 'type' of"),
    ('d = T.device("cpu"); d.foo = 1', "object has no attribute 'foo'"),
    ('r = T.device("cpu") < T.device("cpu")', "not supported between instances"),
]


@_cases(DEVICE_CASES)
def test_device(code, phrase):
    if "<" in code and torch is not None:       # torch: "comparison not implemented"
        assert outcome(cgrad, code)[1] == outcome(torch, code)[1] == "TypeError"
        return
    _run(code, phrase)


def test_device_pickles_and_copies():
    for d in (cgrad.device("cpu"), cgrad.device("cpu:1"), cgrad.device("cuda", 2)):
        assert pickle.loads(pickle.dumps(d)) == d
        assert copy.copy(d) == d and copy.deepcopy(d) == d
        assert cgrad.device(str(d)) == d
    assert cgrad.device("cpu").__reduce__() == (cgrad.device, ("cpu",))


def test_device_from_a_torch_device():
    torch_ = pytest.importorskip("torch")
    assert cgrad.device(torch_.device("cpu:1")) == cgrad.device("cpu:1")
    assert cgrad.zeros(2, device=torch_.device("cpu")).device == cgrad.device("cpu")
    assert cgrad.ones(2).to(torch_.device("cpu")).dtype == cgrad.float32
    with pytest.raises(AssertionError, match=NOCUDA):
        cgrad.zeros(2, device=torch_.device("cuda"))


def test_device_context_manager():
    with cgrad.device("cpu"):
        assert cgrad.zeros(1).device == cgrad.device("cpu")
    with pytest.raises(AssertionError, match=NOCUDA):
        with cgrad.device("cuda"):
            pass


# -- device= of the factories -----------------------------------------------------------------
FACTORIES = ["T.tensor([1.0], {kw})", "T.as_tensor([1.0], {kw})", "T.zeros(2, {kw})",
             "T.ones(2, {kw})", "T.empty(2, {kw})", "T.full((2,), 1.0, {kw})",
             "T.zeros_like(T.ones(2), {kw})", "T.ones_like(T.ones(2), {kw})",
             "T.empty_like(T.ones(2), {kw})", "T.full_like(T.ones(2), 3.0, {kw})",
             "T.rand_like(T.ones(2), {kw})", "T.randn_like(T.ones(2), {kw})",
             "T.randint_like(T.ones(2), 5, {kw})", "T.arange(3, {kw})",
             "T.linspace(0, 1, 3, {kw})", "T.eye(2, {kw})", "T.rand(2, {kw})",
             "T.randn(2, {kw})", "T.randint(5, (2,), {kw})", "T.randperm(3, {kw})",
             "T.normal(0.0, 1.0, (2,), {kw})", "T.ones(1).new_zeros(2, {kw})",
             "T.ones(1).new_ones(2, {kw})", "T.ones(1).new_empty(2, {kw})",
             "T.ones(1).new_full((2,), 1.0, {kw})", "T.ones(1).new_tensor([1.0], {kw})"]
DEVICE_KW = [('device="cpu"', None), ('device="cpu:0"', None), ('device="cpu:3"', None),
             ('device=T.device("cpu")', None), ("device=None", None),
             ('device="cuda"', NOCUDA), ('device="cuda:0"', NOCUDA),
             ('device=T.device("cuda", 1)', NOCUDA), ("device=0", NOACC),
             ('device="gpu"', "device type at start of device string: gpu"),
             ('device="cpu:x"', "Invalid device string")]


@pytest.mark.parametrize("kw,phrase", DEVICE_KW, ids=[k for k, _ in DEVICE_KW])
@pytest.mark.parametrize("factory", FACTORIES)
def test_factory_device(factory, kw, phrase):
    call = factory.format(kw=kw)
    code = f"r = {call}.device" if phrase is None else f"r = {call}"
    _run(code, phrase)


def test_factory_device_of_wrong_type():
    with pytest.raises(TypeError, match="argument 'device' must be"):
        cgrad.zeros(2, device=1.5)
    if torch is not None:
        with pytest.raises(TypeError, match="argument 'device' must be"):
            torch.zeros(2, device=1.5)


def test_non_cpu_device_types_are_refused():
    for kind in ("mps", "xla", "hip", "meta", "vulkan"):
        with pytest.raises(RuntimeError, match=f"not linked with support for {kind} devices"):
            cgrad.zeros(2, device=kind)
        with pytest.raises(RuntimeError, match=f"not linked with support for {kind} devices"):
            cgrad.ones(2).to(kind)


# -- Tensor.to --------------------------------------------------------------------------------
TO_CASES = [
    ("r = x.to(T.float64)", None),
    ("r = x.to(T.float32) is x", None),
    ('r = x.to("cpu") is x', None),
    ('r = x.to("cpu:0") is x', None),
    ('r = x.to(T.device("cpu")) is x', None),
    ('r = x.to("cpu", T.float64)', None),
    ('r = x.to(T.device("cpu"), T.int32)', None),
    ('r = x.to(device="cpu") is x', None),
    ('r = x.to(dtype=T.float64, device="cpu")', None),
    ('r = x.to("cpu", dtype=T.float64)', None),
    ("r = x.to(dtype=None) is x", None),
    ("r = x.to(device=None, dtype=None) is x", None),
    ("r = x.to() is x", None),
    ("r = x.to(None) is x", None),
    ("r = x.to(T.ones(1, dtype=T.int64))", None),
    ("r = x.to(T.ones(1)) is x", None),
    ("r = x.to(T.ones(1), copy=True) is x", None),
    ("r = x.to(T.ones(1, dtype=T.float64), True, True)", None),
    ("r = x.to(T.float32, copy=True) is x", None),
    ("r = x.to(T.float32, False, True) is x", None),
    ("r = x.to(T.float64, copy=True, non_blocking=False)", None),
    ('r = x.to("cpu", None, False, True) is x', None),
    ('r = x.to("cpu", non_blocking=True, copy=True) is x', None),
    ('r = x.to(T.device("cpu"), non_blocking=True) is x', None),
    ("r = x.to(device=T.device('cpu'), dtype=T.int32, copy=False, non_blocking=True)", None),
    ("r = x.to(float)", None),
    ("r = x.to(int)", None),
    ("r = x.to(bool)", None),
    ("r = x.to(memory_format=T.contiguous_format) is x", None),
    ("r = x.to(memory_format=T.preserve_format) is x", None),
    ("r = x.t().to(memory_format=T.contiguous_format).shape", None),
    ("r = T.ones(2, 2, 2, 2).to(memory_format=T.channels_last)", None),
    ("a = T.ones(2, 2, 2, 2); r = a.to(memory_format=T.channels_last) is a", None),
    ("w = T.ones(2, 3, requires_grad=True); r = w.to(T.float64)", None),
    ("w = T.ones(2, 3, requires_grad=True); r = w.to(copy=True)", None),
    ("w = T.ones(2, 3, requires_grad=True); r = w.to(T.float32, copy=True)", None),
    ("w = T.ones(2, 3, requires_grad=True); r = w.to(T.int64)", None),
    # errors
    ('r = x.to("cuda")', NOCUDA),
    ('r = x.to("cuda:0")', NOCUDA),
    ('r = x.to(device="cuda")', NOCUDA),
    ('r = x.to(T.device("cuda"))', NOCUDA),
    ('r = x.to("cuda", T.float64)', NOCUDA),
    ("r = x.to(0)", NOACC),
    ("r = x.to(dtype=T.int32, device=1)", NOACC),
    ('r = x.to("foo")', "device type at start of device string: foo"),
    ('r = x.to(device="a")', "device type at start of device string: a"),
    ("r = x.to(T.float64, T.float32)", "to() received an invalid combination of arguments"),
    ('r = x.to("cpu", "cpu")', "to() received an invalid combination of arguments"),
    ('r = x.to(T.float64, "cpu")', "to() received an invalid combination of arguments"),
    ("r = x.to(T.float64, dtype=T.float32)", "to() received an invalid combination"),
    ('r = x.to(T.float64, device="cpu")', "to() received an invalid combination"),
    ("r = x.to(T.ones(1), T.float64)", "to() received an invalid combination"),
    ("r = x.to(T.ones(1), dtype=T.float64)", "to() received an invalid combination"),
    ("r = x.to(foo=1)", "to() received an invalid combination"),
    ("r = x.to(T.float64, foo=2)", "to() received an invalid combination"),
    ("r = x.to([1])", ""),
    ("r = x.to(non_blocking=1)", "to() received an invalid combination"),
    ('r = x.to(copy="a")', "to() received an invalid combination"),
    ('r = x.to(memory_format="a")', "to() received an invalid combination"),
    ('r = x.to(dtype="a")', ""),
    ("r = x.to(T.float64, True, True, True)", "to() received an invalid combination"),
    ('r = x.to("cpu", T.float64, False, False, T.preserve_format)',
     "to() takes from 0 to 4 positional arguments but 5 were given"),
    ("r = x.to(memory_format=T.channels_last)",
     "required rank 4 tensor to use channels_last format"),
    ("r = x.to(T.float64, memory_format=T.channels_last)",
     "required rank 4 tensor to use channels_last format"),
    ("r = T.ones(2, 2, 2, 2).to(memory_format=T.channels_last_3d)",
     "required rank 5 tensor to use channels_last_3d format"),
]


@_cases(TO_CASES)
def test_to(code, phrase):
    _run("x = T.ones(2, 3)\n" + code, phrase)


def test_to_is_differentiable_for_dtype_changes():
    for kw in ({"dtype": cgrad.float64}, {"copy": True}):
        w = cgrad.tensor([1.0, 2.0], requires_grad=True)
        y = w.to(**kw)
        assert type(y.grad_fn).__name__ == "ToCopyBackward0"
        (y * y).sum().backward()
        assert w.grad.dtype == cgrad.float32
        np.testing.assert_allclose(w.grad.numpy(), [2.0, 4.0])


def test_to_a_dtype_name():
    """cgrad's dtypes are NumPy dtypes: a dtype name is a dtype for Tensor.to (torch reads it
    as a device string and refuses it)."""
    assert cgrad.ones(2).to("float64").dtype == cgrad.float64
    assert cgrad.ones(2).to("cpu", "float64").dtype == cgrad.float64


def test_channels_last_layout():
    a = cgrad.arange(16.0).reshape(1, 2, 2, 4)
    b = a.to(memory_format=cgrad.channels_last)
    assert b is not a and b.tolist() == a.tolist()
    assert b.numpy().strides == (64, 4, 32, 8)            # torch's (16, 1, 8, 2) elements
    e = cgrad.empty(1, 2, 2, 4, memory_format=cgrad.channels_last)
    assert e.numpy().strides == (64, 4, 32, 8)
    z = cgrad.zeros_like(a, memory_format=cgrad.channels_last)
    assert z.numpy().strides == (64, 4, 32, 8) and z.tolist() == (a * 0).tolist()
    if torch is not None:
        ta = torch.arange(16.0).reshape(1, 2, 2, 4).to(memory_format=torch.channels_last)
        assert tuple(s * 4 for s in ta.stride()) == b.numpy().strides


def test_memory_formats_and_layouts_print_as_torch():
    for name in ("contiguous_format", "preserve_format", "channels_last", "channels_last_3d"):
        assert repr(getattr(cgrad, name)) == f"cgrad.{name}"
        assert isinstance(getattr(cgrad, name), cgrad.memory_format)
    assert repr(cgrad.strided) == "cgrad.strided" and repr(cgrad.sparse_coo) == "cgrad.sparse_coo"
    assert isinstance(cgrad.strided, cgrad.layout)
    assert cgrad.ones(2).layout is cgrad.strided
    assert cgrad.ones(2).to_sparse().layout is cgrad.sparse_coo
    if torch is not None:
        assert str(torch.ones(2).layout) == "torch.strided"


# -- cpu(), cuda(), pin_memory(), flags -------------------------------------------------------
TENSOR_CASES = [
    ("r = x.cpu() is x", None),
    ("r = x.cpu(memory_format=T.contiguous_format) is x", None),
    ("r = x.cpu(memory_format=T.channels_last)", "required rank 4 tensor"),
    ("r = x.cpu(1)", "positional argument"),
    ("r = x.cuda()", NOCUDA),
    ("r = x.cuda(non_blocking=True)", NOCUDA),
    ('r = x.cuda("cuda:0")', NOCUDA),
    ("r = x.cuda(1)", NOACC),
    ('r = x.cuda(device="cpu")', "Invalid device, must be cuda device"),
    ("r = x.pin_memory()", NOACC),
    ("r = x.is_pinned()", None),
    ("r = (x.is_cuda, x.is_cpu, x.is_mps, x.is_meta, x.is_quantized)", None),
    ("r = x.get_device()", None),
    ("r = T.zeros(1, pin_memory=True)",
     "pin_memory=True requires a CUDA or other accelerator backend"),
    ("r = T.tensor([1], pin_memory=True)",
     "pin_memory=True requires a CUDA or other accelerator backend"),
    ("r = T.zeros(1, pin_memory=False)", None),
    ("r = T.zeros(2, layout=T.strided)", None),
    ("r = T.zeros_like(T.ones(2), layout=T.strided)", None),
    ("r = T.nn.Linear(2, 2).cuda()", NOCUDA),
    ("m = T.nn.Linear(2, 2); r = m.cpu() is m", None),
    ('m = T.nn.Linear(2, 2); r = m.to("cpu") is m', None),
    ('m = T.nn.Linear(2, 2); r = m.to(T.device("cpu")) is m', None),
    ('m = T.nn.Linear(2, 2); r = m.to("cpu", T.float64).weight.dtype', None),
    ('r = T.nn.Linear(2, 2).to("cuda")', NOCUDA),
]


@_cases(TENSOR_CASES)
def test_tensor_device_methods(code, phrase):
    _run("x = T.ones(2, 3)\n" + code, phrase)


def test_is_pinned_with_a_device():
    assert cgrad.ones(2).is_pinned(device="cpu") is False


# -- cgrad.cuda, cgrad.backends ---------------------------------------------------------------
CUDA_CASES = [
    ("r = T.cuda.is_available()", None),
    ("r = T.cuda.device_count()", None),
    ("r = T.cuda.is_initialized()", None),
    ("r = T.cuda.is_bf16_supported()", None),
    ("r = T.cuda.get_arch_list()", None),
    ("r = T.cuda.manual_seed(1)", None),
    ("r = T.cuda.manual_seed(2**70)", None),
    ("r = T.cuda.manual_seed_all(1)", None),
    ("r = T.cuda.seed()", None),
    ("r = T.cuda.seed_all()", None),
    ("r = T.cuda.empty_cache()", None),
    ("r = T.cuda.memory_allocated()", None),
    ("r = T.cuda.max_memory_allocated()", None),
    ("r = T.cuda.memory_reserved()", None),
    ("r = T.cuda.max_memory_reserved()", None),
    ("r = dict(T.cuda.memory_stats())", None),
    ("r = T.cuda.get_rng_state_all()", None),
    ("r = T.cuda.set_rng_state(T.zeros(1, dtype=T.uint8))", None),
    ('r = T.cuda.manual_seed("a")', "invalid literal for int()"),
    ('r = T.cuda.manual_seed_all("a")', "invalid literal for int()"),
    ("r = T.cuda.synchronize()", NOCUDA),
    ("r = T.cuda.current_device()", NOCUDA),
    ("r = T.cuda.get_device_name()", NOCUDA),
    ("r = T.cuda.get_device_name(0)", NOCUDA),
    ("r = T.cuda.get_device_capability()", NOCUDA),
    ("r = T.cuda.get_device_properties(0)", NOCUDA),
    ("r = T.cuda.initial_seed()", NOCUDA),
    ("r = T.cuda.get_rng_state()", NOCUDA),
    ("r = T.cuda.init()", NOCUDA),
    ("r = T.cuda.mem_get_info()", NOCUDA),
    ('r = T.cuda.set_device("cpu")', "Expected a cuda device, but got: cpu"),
    ("r = T.backends.mps.is_available()", None),
    ("r = T.backends.mps.is_built()", None),
    ("r = T.backends.cuda.is_built()", None),
    ("r = T.backends.cudnn.is_available()", None),
    ("r = T.backends.cudnn.version()", None),
    ("r = (T.backends.cudnn.deterministic, T.backends.cudnn.benchmark, "
     "T.backends.cudnn.enabled, T.backends.cudnn.allow_tf32)", None),
    ("r = T.backends.cuda.matmul.allow_tf32", None),
    ('T.backends.cudnn.deterministic = "x"', "set_deterministic_cudnn expects a bool, but got "
                                             "str"),
    ("T.backends.cudnn.benchmark = 1", "set_benchmark_cudnn expects a bool, but got int"),
]


@_cases(CUDA_CASES)
def test_cuda_and_backends(code, phrase):
    _run(code, phrase)


def test_backend_switches_are_settable():
    cudnn = cgrad.backends.cudnn
    saved = (cudnn.deterministic, cudnn.benchmark)
    try:
        cudnn.deterministic = True
        cudnn.benchmark = True
        assert cudnn.deterministic is True and cudnn.benchmark is True
        cgrad.backends.cuda.matmul.allow_tf32 = True
        assert cgrad.backends.cuda.matmul.allow_tf32 is True
    finally:
        cudnn.deterministic, cudnn.benchmark = saved
        cgrad.backends.cuda.matmul.allow_tf32 = False
    import cgrad.backends.cudnn as c2        # importable as a module, as torch's
    assert c2 is cudnn


# -- cgrad.accelerator, the default device ----------------------------------------------------
ACCELERATOR_CASES = [
    ("r = T.accelerator.is_available()", None),
    ("r = T.accelerator.current_accelerator()", None),
    ("r = T.accelerator.current_accelerator(check_available=True)", None),
    ("r = T.accelerator.device_count()", None),
    ("r = T.accelerator.current_device_index()", NOACC),
    ("r = T.accelerator.current_device_idx()", NOACC),
    ("r = T.accelerator.set_device_index(0)", NOACC),
    ("r = T.accelerator.set_device_idx(0)", NOACC),
    ("r = T.accelerator.synchronize()", NOACC),
    ("r = T.accelerator.empty_cache()", NOACC),
    ("r = T.accelerator.memory_allocated()", NOACC),
    ("r = T.accelerator.max_memory_allocated(0)", NOACC),
    ("r = T.accelerator.memory_stats()", NOACC),
    ("r = T.accelerator.get_memory_info()", NOACC),
    ("r = T.accelerator.reset_peak_memory_stats()", NOACC),
    ("with T.accelerator.device_index(None): r = 1", None),
    ("with T.accelerator.device_index(0): r = 1", NOACC),
    # the tutorials' idiom (pytorch/tutorials beginner_source/basics)
    ('r = T.accelerator.current_accelerator().type if T.accelerator.is_available() else "cpu"',
     None),
]

DEFAULT_DEVICE_CASES = [
    ("r = T.get_default_device()", None),
    ('T.set_default_device("cpu"); r = (T.get_default_device(), T.zeros(2).device)', None),
    ('T.set_default_device(T.device("cpu")); r = T.get_default_device()', None),
    ('T.set_default_device("cpu:1"); r = (T.get_default_device(), T.ones(1).device)', None),
    ('T.set_default_device("cpu"); T.set_default_device(None); r = T.get_default_device()',
     None),
    ("T.set_default_device(0)", NOACC),
    ('T.set_default_device("xyz")', "device type at start of device string: xyz"),
    ("T.set_default_device(1.5)", "device() received an invalid combination of arguments - "
                                  "got (float), but expected one of:"),
]


@_cases(ACCELERATOR_CASES)
def test_accelerator(code, phrase):
    _run(code, phrase)


@_cases(DEFAULT_DEVICE_CASES)
def test_default_device(code, phrase):
    try:
        _run(code, phrase)
    finally:
        cgrad.set_default_device(None)
        if torch is not None:
            torch.set_default_device(None)


def test_default_device_is_per_thread_and_refuses_devices_it_cannot_place():
    import threading
    seen = []
    cgrad.set_default_device("cpu:1")
    try:
        t = threading.Thread(target=lambda: seen.append(cgrad.get_default_device()))
        t.start()
        t.join()
        assert seen == [cgrad.device("cpu")]
        assert cgrad.get_default_device() == cgrad.device("cpu:1")
        # torch (CPU build) accepts "cuda" here and raises its AssertionError at the next
        # tensor it creates (get_default_device included); cgrad raises the same error at
        # once. It accepts "meta" too; cgrad makes no meta tensors, so it refuses at once
        # what cgrad.zeros(1, device="meta") refuses
        for d in ("cuda", "cuda:0"):
            with pytest.raises(AssertionError, match=NOCUDA):
                cgrad.set_default_device(d)
        with pytest.raises(RuntimeError, match="not linked with support for meta devices"):
            cgrad.set_default_device("meta")
        assert cgrad.get_default_device() == cgrad.device("cpu:1")
    finally:
        cgrad.set_default_device(None)


def test_the_usual_device_idiom_runs():
    """The idiom torch programs open with picks the CPU and the program runs on it."""
    device = cgrad.device("cuda" if cgrad.cuda.is_available() else "cpu")
    model = cgrad.nn.Linear(3, 2).to(device)
    x = cgrad.randn(4, 3, device=device)
    loss = model(x.to(device)).sum()
    loss.backward()
    assert model.weight.grad.device == device == cgrad.device("cpu")
    assert x.cpu().numpy().shape == (4, 3)
