"""Every warning cgrad emits points at the user's line (file and line number), as torch's do.

Each case below is a function whose body triggers one warning from the line marked
``# warns``. The body runs twice: called here (the warning must name this file and that
line) and, dedented, at module level of a generated script run in a subprocess (the
warning must name the script and that line: a stacklevel one too high gives ``sys:1``
there). A source scan checks that every warning call in cgrad is exercised by some case
and that cgrad has no ``warnings.warn`` outside cgrad/_warn.py.
"""
import ast
import importlib
import inspect
import json
import os
import re
import subprocess
import sys
import textwrap
import warnings

import pytest

import cgrad
import cgrad.nn.functional as F
from cgrad import nn
from cgrad.autograd.function import Function
from cgrad.utils import checkpoint as ckpt

CASES = []


def case(expected):
    """Register a case; ``expected`` is a regex that the warning's message matches."""
    def register(fn):
        CASES.append((fn, expected))
        return fn
    return register


# ----------------------------------------------------------------------------------------
# the cases (bodies run at module level of a script too: self-contained, no `return`)
@case(r"The \.grad attribute of a Tensor that is not a leaf Tensor is being accessed")
def nonleaf_grad():
    x = cgrad.ones(3, requires_grad=True)
    y = x * 2
    y.grad  # warns  # noqa: B018


@case(r"Implicit dimension choice for softmax has been deprecated")
def softmax_implicit_dim():
    F.softmax(cgrad.ones(2, 3))  # warns


@case(r"Implicit dimension choice for log_softmax has been deprecated")
def log_softmax_implicit_dim():
    F.log_softmax(cgrad.ones(2, 3))  # warns


@case(r"Implicit dimension choice for softmax has been deprecated")
def softmax_module_implicit_dim():
    nn.Softmax()(cgrad.ones(2, 3))  # warns


@case(r"Implicit dimension choice for log_softmax has been deprecated")
def log_softmax_module_implicit_dim():
    nn.LogSoftmax()(cgrad.ones(2, 3))  # warns


@case(r"Implicit dimension choice for softmax has been deprecated")
def softmax_stacklevel_of_a_wrapper():
    def my_softmax(t):     # torch's _stacklevel=4: blame the wrapper's caller
        return F.softmax(t, _stacklevel=4)
    my_softmax(cgrad.ones(2, 3))  # warns


@case(r"indexing with dtype cgrad\.uint8 is now deprecated")
def uint8_index():
    cgrad.arange(3.0)[cgrad.tensor([1, 0, 1], dtype=cgrad.uint8)]  # warns


@case(r"Using a non-tuple sequence for multidimensional indexing is deprecated")
def non_tuple_sequence_index():
    cgrad.ones(2, 2)[[[0, 1], [0, 1]]]  # warns


@case(r"An output with one or more elements was resized")
def out_resized():
    out = cgrad.zeros(5)
    cgrad.cat([cgrad.ones(2), cgrad.ones(2)], out=out)  # warns


@case(r"cgrad\.meshgrid: in an upcoming release, it will be required to pass the indexing")
def meshgrid_without_indexing():
    cgrad.meshgrid(cgrad.ones(2), cgrad.ones(3))  # warns


@case(r"The use of `x\.T` on tensors of dimension other than 2")
def transpose_3d():
    cgrad.ones(2, 3, 4).T  # warns  # noqa: B018


@case(r"Tensor\.T is deprecated on 0-D tensors")
def transpose_0d():
    cgrad.tensor(1.0).T  # warns  # noqa: B018


@case(r"size_average and reduce args will be deprecated, please use reduction='sum'")
def loss_module_size_average():
    nn.MSELoss(size_average=False)  # warns


@case(r"size_average and reduce args will be deprecated, please use reduction='sum'")
def functional_loss_size_average():
    F.mse_loss(cgrad.ones(3), cgrad.ones(3), size_average=False)  # warns


@case(r"Using a target size \(cgrad\.Size\(\[3, 1\]\)\) that is different to the input size")
def loss_target_size():
    F.mse_loss(cgrad.ones(3), cgrad.ones(3, 1))  # warns


@case(r"Using a target size \(cgrad\.Size\(\[3, 1\]\)\) that is different to the input size")
def loss_module_target_size():
    nn.MSELoss()(cgrad.ones(3), cgrad.ones(3, 1))  # warns


@case(r"mean is more than 2 std from \[a, b\] in nn\.init\.trunc_normal_")
def trunc_normal_far_mean():
    nn.init.trunc_normal_(cgrad.empty(3), mean=10.0)  # warns


@case(r"Initializing zero-element tensors is a no-op")
def kaiming_uniform_empty():
    nn.init.kaiming_uniform_(cgrad.empty(0, 3))  # warns


@case(r"Initializing zero-element tensors is a no-op")
def kaiming_normal_empty():
    nn.init.kaiming_normal_(cgrad.empty(0, 3))  # warns


@case(r"optimizer contains a parameter group with duplicate parameters")
def optimizer_duplicate_parameters():
    p = nn.Parameter(cgrad.ones(2))
    cgrad.optim.SGD([p, p], lr=0.1)  # warns


@case(r"To get the last learning rate computed by the scheduler, please use `get_last_lr\(\)`")
def scheduler_get_lr_outside_step():
    opt = cgrad.optim.SGD([nn.Parameter(cgrad.ones(2))], lr=0.1)
    sched = cgrad.optim.lr_scheduler.StepLR(opt, step_size=1)
    sched.get_lr()  # warns


@case(r"Seems like `optimizer\.step\(\)` has been overridden after learning rate scheduler")
def scheduler_after_overridden_step():
    opt = cgrad.optim.SGD([nn.Parameter(cgrad.ones(2))], lr=0.1)
    sched = cgrad.optim.lr_scheduler.StepLR(opt, step_size=1)
    opt.step = lambda closure=None: None
    sched.step()  # warns


@case(r"Detected call of `lr_scheduler\.step\(\)` before `optimizer\.step\(\)`")
def scheduler_step_before_optimizer_step():
    opt = cgrad.optim.SGD([nn.Parameter(cgrad.ones(2))], lr=0.1)
    sched = cgrad.optim.lr_scheduler.StepLR(opt, step_size=1)
    sched.step()  # warns


@case(r"The epoch parameter in `scheduler\.step\(\)` was not necessary")
def scheduler_step_epoch():
    opt = cgrad.optim.SGD([nn.Parameter(cgrad.ones(2))], lr=0.1)
    sched = cgrad.optim.lr_scheduler.StepLR(opt, step_size=1)
    opt.step()
    sched.step(1)  # warns


@case(r"The epoch parameter in `scheduler\.step\(\)` was not necessary")
def plateau_step_epoch():
    opt = cgrad.optim.SGD([nn.Parameter(cgrad.ones(2))], lr=0.1)
    sched = cgrad.optim.lr_scheduler.ReduceLROnPlateau(opt)
    sched.step(1.0, 1)  # warns


@case(r"Using backward\(\) with create_graph=True will create a reference cycle")
def backward_create_graph():
    x = cgrad.ones(2, requires_grad=True)
    (x * x).sum().backward(create_graph=True)  # warns
    x.grad = None


@case(r"should not be instantiated\. Methods on autograd functions are all static")
def function_instantiated():
    class Double(Function):
        @staticmethod
        def forward(ctx, t):
            return t * 2

        @staticmethod
        def backward(ctx, g):
            return g * 2
    Double()  # warns


@case(r"mark_shared_storage is deprecated")
def mark_shared_storage():
    class Shared(Function):
        @staticmethod
        def forward(ctx, t):
            ctx.mark_shared_storage()  # warns
            return t * 2

        @staticmethod
        def backward(ctx, g):
            return g * 2
    Shared.apply(cgrad.ones(2, requires_grad=True))


@case(r"Decorating classes is deprecated and will be disabled in future versions")
def grad_mode_decorating_a_class():
    @cgrad.no_grad  # warns
    class Model:
        pass


@case(r"'saved_variables' is deprecated; use 'saved_tensors'")
def saved_variables():
    x = cgrad.ones(2, requires_grad=True)
    y = x * x
    y.grad_fn.saved_variables  # warns  # noqa: B018


@case(r"Full backward hook is firing when gradients are computed with respect to module "
      r"outputs since no inputs require gradients")
def module_backward_hook_without_input_grad():
    lin = nn.Linear(2, 1)
    lin.register_full_backward_hook(lambda module, grad_input, grad_output: None)
    out = lin(cgrad.ones(1, 2)).sum()
    out.backward()  # warns


@case(r"For backward hooks to be called, module output should be a Tensor or a tuple of "
      r"Tensors but received <class 'dict'>")
def module_backward_hook_on_a_dict_output():
    class Dict(nn.Module):
        def forward(self, t):
            return {"y": t * 2}
    d = Dict()
    d.register_full_backward_hook(lambda module, grad_input, grad_output: None)
    d(cgrad.ones(1, requires_grad=True))  # warns


@case(r"Anomaly Detection has been enabled")
def detect_anomaly():
    cgrad.autograd.detect_anomaly()  # warns


@case(r"Error detected in FailsBackward\. Traceback of forward call that caused the error")
def anomaly_error_with_forward_trace():
    class Fails(Function):
        @staticmethod
        def forward(ctx, t):
            return t * 2

        @staticmethod
        def backward(ctx, g):
            raise RuntimeError("backward failed")
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", "Anomaly Detection has been enabled")
        anomaly = cgrad.autograd.detect_anomaly()
    with anomaly:
        y = Fails.apply(cgrad.ones(2, requires_grad=True)).sum()
        try:
            y.backward()  # warns
        except RuntimeError:
            pass


@case(r"Error detected in FailsBackward\. No forward pass information available")
def anomaly_error_without_forward_trace():
    class Fails(Function):
        @staticmethod
        def forward(ctx, t):
            return t * 2

        @staticmethod
        def backward(ctx, g):
            raise RuntimeError("backward failed")
    y = Fails.apply(cgrad.ones(2, requires_grad=True)).sum()
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", "Anomaly Detection has been enabled")
        anomaly = cgrad.autograd.detect_anomaly()
    with anomaly:
        try:
            y.backward()  # warns
        except RuntimeError:
            pass


@case(r"Input #0 requires gradient and is not a double precision floating point")
def gradcheck_float32():
    cgrad.autograd.gradcheck(lambda t: t * 2, (cgrad.ones(2, requires_grad=True),), atol=1e-2, rtol=1e-2, eps=1e-2)  # warns  # noqa: E501


@case(r"Backwards compatibility: New undefined gradient support checking feature")
def gradcheck_undefined_grad():
    class Strict(Function):
        @staticmethod
        def forward(ctx, t):
            ctx.set_materialize_grads(False)
            return t * 2

        @staticmethod
        def backward(ctx, g):       # refuses an undefined gradient
            if g is None:
                raise RuntimeError("no gradient")
            return g * 2
    x = cgrad.ones(2, dtype=cgrad.float64, requires_grad=True)
    cgrad.autograd.gradcheck(Strict.apply, (x,), check_undefined_grad=True, raise_exception=False)  # warns  # noqa: E501


@case(r"`get_numerical_jacobian` was part of cgrad's private API")
def gradcheck_private_api():
    x = cgrad.ones(2, dtype=cgrad.float64, requires_grad=True)
    from cgrad.autograd.gradcheck import get_numerical_jacobian
    get_numerical_jacobian(lambda t: t * 2, (x,))  # warns


@case(r"cgrad\.utils\.checkpoint: the use_reentrant parameter should be passed explicitly")
def checkpoint_without_use_reentrant():
    ckpt.checkpoint(lambda t: t * 2, cgrad.ones(2, requires_grad=True))  # warns


@case(r"checkpoint_sequential: the use_reentrant parameter should be passed explicitly")
def checkpoint_sequential_without_use_reentrant():
    ckpt.checkpoint_sequential([nn.ReLU(), nn.ReLU()], 2, cgrad.ones(2, requires_grad=True))  # warns  # noqa: E501


@case(r"None of the inputs have requires_grad=True\. Gradients will be None")
def checkpoint_no_input_requires_grad():
    ckpt.checkpoint(lambda t: t * 2, cgrad.ones(2), use_reentrant=True)  # warns


@case(r"std\(\): degrees of freedom is <= 0\. Correction should be strictly less than")
def std_without_degrees_of_freedom():
    cgrad.ones(1).std()  # warns


@case(r"var\(\): degrees of freedom is <= 0\. Correction should be strictly less than")
def var_without_degrees_of_freedom():
    cgrad.var(cgrad.zeros(0, 3), dim=0)  # warns


@case(r"cgrad\.cholesky is deprecated in favor of cgrad\.linalg\.cholesky")
def legacy_cholesky():
    cgrad.cholesky(cgrad.eye(2))  # warns


@case(r"cgrad\.qr is deprecated in favor of cgrad\.linalg\.qr")
def legacy_qr():
    cgrad.eye(2).qr()  # warns


@case(r"Using cgrad\.cross without specifying the dim arg is deprecated")
def cross_default_dim():
    cgrad.cross(cgrad.ones(3, 3), cgrad.ones(3, 3))  # warns


@case(r"To copy construct from a tensor, it is recommended to use sourceTensor\.detach\(\)")
def new_tensor_from_a_tensor():
    x = cgrad.ones(2)
    x.new_tensor(x)  # warns


@case(r"cgrad\.sparse\.SparseTensor\(indices, values, shape, \*, device=\) is deprecated")
def legacy_sparse_constructor():
    i = cgrad.tensor([[0, 1], [1, 0]])
    cgrad.sparse.FloatTensor(i, cgrad.tensor([1.0, 2.0]), (2, 2))  # warns


@case(r"The number of elements in the out tensor of shape \[2\] is 2 which does not match "
      r"the computed number of elements 5")
def arange_out_resized():
    cgrad.arange(5, out=cgrad.zeros(2))  # warns


@case(r"volatile was removed and now has no effect\. Use `with cgrad\.no_grad\(\):` instead")
def variable_volatile():
    cgrad.autograd.Variable(cgrad.ones(2), volatile=True)  # warns


@case(r"`cummulative_sizes` attribute is renamed to `cumulative_sizes`")
def concat_dataset_cummulative_sizes():
    cgrad.utils.data.ConcatDataset([[1], [2]]).cummulative_sizes  # warns  # noqa: B018


@case(r"Length of split at index 1 is 0\. This might result in an empty dataset\.")
def random_split_empty_part():
    cgrad.utils.data.random_split(range(4), [1.0, 0.0])  # warns


@case(r"This DataLoader will create 100000 worker processes in total\.")
def dataloader_too_many_workers():
    cgrad.utils.data.DataLoader([1], num_workers=100000)  # warns


@case(r"'pin_memory' argument is set as true but no accelerator is found")
def dataloader_pin_memory():
    list(cgrad.utils.data.DataLoader([1], pin_memory=True))  # warns


@case(r"pin_memory_device is deprecated, the current accelerator will be used")
def dataloader_pin_memory_device():
    list(cgrad.utils.data.DataLoader([1], pin_memory=True, pin_memory_device="cuda"))  # warns


@case(r"Length of IterableDataset .* was reported to be 1\(when accessing len\(dataloader\)\), "
      r"but 2 samples have been fetched\. $")
def dataloader_iterable_longer_than_its_len():
    class Two(cgrad.utils.data.IterableDataset):
        def __iter__(self):
            return iter([1, 2])

        def __len__(self):
            return 1
    loader = cgrad.utils.data.DataLoader(Two())
    len(loader)
    batches = iter(loader)
    next(batches)
    next(batches)  # warns


@case(r"An output with one or more elements was resized since it had shape \[3\], which does "
      r"not match the required output shape \[2\]")
def op_out_resized():
    cgrad.mul(cgrad.ones(2), 2.0, out=cgrad.zeros(3))  # warns


@case(r"Use `current_device_index` instead\.")
def accelerator_current_device_idx():
    try:
        cgrad.accelerator.current_device_idx()  # warns
    except RuntimeError:
        pass


@case(r"Use `set_device_index` instead\.")
def accelerator_set_device_idx():
    try:
        cgrad.accelerator.set_device_idx(0)  # warns
    except RuntimeError:
        pass


@case(r"Using padding='same' with even kernel lengths and odd dilation may require a "
      r"zero-padded copy of the input be created")
def conv_same_even_kernel():
    x = cgrad.ones(1, 1, 5, 5)
    F.conv2d(x, cgrad.ones(1, 1, 2, 2), padding="same")  # warns


@case(r"Use of masked_fill_ on expanded tensors is deprecated")
def masked_fill_expanded():
    t = cgrad.tensor([[0.5], [0.6]]).expand(2, 3)
    t.masked_fill_(cgrad.tensor([[True, False, False], [False, True, False]]), 1.0)  # warns


@case(r"Use of index_put_ on expanded tensors is deprecated")
def index_put_expanded():
    t = cgrad.tensor([[0.5], [0.6]]).expand(2, 3)
    t[cgrad.tensor([0])] = 2.0  # warns


@case(r"Use of masked_fill_ on expanded tensors is deprecated")
def mask_assignment_expanded():
    t = cgrad.tensor([[0.5], [0.6]]).expand(2, 3)
    t[cgrad.tensor([True, False])] = 3.0  # warns




@case(r"reduction: 'mean' divides the total loss by both the batch size and the support size")
def kl_div_mean():
    F.kl_div(cgrad.zeros(2, 3), cgrad.full((2, 3), 1 / 3))  # warns


@case(r"`cgrad.nn.utils.weight_norm` is deprecated in favor of")
def old_weight_norm():
    nn.utils.weight_norm(nn.Linear(2, 2))  # warns


@case(r"enable_nested_tensor is True, but self.use_nested_tensor is False because")
def nested_tensor_fast_path_off():
    nn.TransformerEncoder(nn.TransformerEncoderLayer(4, 1, 8), 1)  # warns (odd head count)


@case(r"dropout option adds dropout after all but last recurrent layer")
def rnn_dropout_one_layer():
    nn.LSTM(2, 3, dropout=0.5)  # warns


@case(r"Support for mismatched key_padding_mask and attn_mask is deprecated")
def mismatched_attention_masks():
    mha, q, kpm = nn.MultiheadAttention(4, 2), cgrad.ones(3, 1, 4), cgrad.zeros(1, 3) > 0
    mha(q, q, q, key_padding_mask=kpm, attn_mask=cgrad.zeros(3, 3))  # warns
# ----------------------------------------------------------------------------------------
def _body(fn):
    """(dedented body lines, index of the `# warns` line in them, line number in this file)."""
    lines, first = inspect.getsourcelines(fn)
    start = next(i for i, line in enumerate(lines) if line.lstrip().startswith("def ")) + 1
    body = textwrap.dedent("".join(lines[start:])).splitlines()
    marked = [i for i, line in enumerate(body) if "# warns" in line]
    assert len(marked) == 1, fn.__name__
    return body, marked[0], first + start + marked[0]


def _record(fn):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        fn()
    return caught


def _ids():
    return [fn.__name__ for fn, _ in CASES]


@pytest.mark.parametrize("fn,expected", CASES, ids=_ids())
def test_warning_points_at_the_calling_line(fn, expected):
    _, _, line = _body(fn)
    caught = [w for w in _record(fn) if re.search(expected, str(w.message))]
    assert caught, f"{fn.__name__} did not warn {expected!r}"
    for w in caught:
        assert (w.filename, w.lineno) == (__file__, line), str(w.message)[:80]


def test_warnings_at_module_level_of_a_script(tmp_path):
    """The same bodies at module level of a script (no enclosing function frame)."""
    script = ["import warnings", "import numpy as np", "import cgrad",
              "import cgrad.nn.functional as F", "from cgrad import nn",
              "from cgrad.autograd.function import Function",
              "from cgrad.utils import checkpoint as ckpt",
              "caught = []",
              "warnings.simplefilter('always')",
              "warnings.showwarning = lambda m, c, f, n, *a: caught.append((str(m), f, n))"]
    expected_lines = []
    for fn, _ in CASES:
        body, marked, _ = _body(fn)
        expected_lines.append(len(script) + marked + 1)
        script += body
    script += ["import json, sys", "json.dump(caught, sys.stdout)"]
    path = tmp_path / "user_script.py"
    path.write_text("\n".join(script) + "\n")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        [os.path.dirname(os.path.dirname(cgrad.__file__)), os.environ.get("PYTHONPATH", "")]))
    r = subprocess.run([sys.executable, str(path)], cwd=tmp_path, env=env, capture_output=True,
                       text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    caught = json.loads(r.stdout)
    for (fn, expected), line in zip(CASES, expected_lines):
        hits = [(f, n) for m, f, n in caught if re.search(expected, m)]
        assert (str(path), line) in hits, (fn.__name__, hits)
    for m, f, n in caught:      # nothing lands on sys:1 or inside cgrad
        assert f == str(path), (m[:80], f, n)


# ----------------------------------------------------------------------------------------
# completeness: every warning call site in cgrad is triggered by a case above
_PKG = os.path.dirname(cgrad.__file__)


def _sources():
    for root, _, files in os.walk(_PKG):
        for name in sorted(files):
            if name.endswith((".py", ".pyx", ".pxi")):
                yield os.path.join(root, name)


def _module_of(path):
    """The module a source file compiles into: a .pxi is part of the .pyx next to it that
    includes it (cgrad/_C_node.pxi: cgrad._C)."""
    rel = os.path.relpath(path, os.path.dirname(_PKG))
    if path.endswith(".pxi"):
        folder, name = os.path.split(path)
        owners = []
        for f in sorted(os.listdir(folder)):
            if f.endswith(".pyx"):
                with open(os.path.join(folder, f), encoding="utf-8") as fh:
                    if f'include "{name}"' in fh.read():
                        owners.append(f)
        assert len(owners) == 1, (rel, owners)
        rel = os.path.join(os.path.dirname(rel), owners[0])
    return rel[:-len(os.path.splitext(rel)[1])].replace(os.sep, ".")


def _calls(text, name):
    """The source text of every call ``name(...)`` in text (parenthesis matching that skips
    string literals), with its line number."""
    for m in re.finditer(r"(?<![\w.])" + re.escape(name) + r"\(", text):
        depth, k, quote = 1, m.end(), None
        while depth:
            c = text[k]
            if quote:
                if c == "\\":
                    k += 1
                elif c == quote:
                    quote = None
            elif c in "\"'":
                quote = c
            elif c == "(":
                depth += 1
            elif c == ")":
                depth -= 1
            k += 1
        yield text[m.start():k], text.count("\n", 0, m.start()) + 1


def _message_pattern(node, module):
    """A regex for the messages a message expression can produce."""
    if isinstance(node, ast.Constant):
        return re.escape(node.value)
    if isinstance(node, ast.JoinedStr):
        return "".join(re.escape(v.value) if isinstance(v, ast.Constant) else ".*?"
                       for v in node.values)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        return _message_pattern(node.left, module) + _message_pattern(node.right, module)
    if isinstance(node, ast.IfExp):
        return (f"(?:{_message_pattern(node.body, module)}|"
                f"{_message_pattern(node.orelse, module)})")
    if isinstance(node, ast.Name):
        return re.escape(getattr(importlib.import_module(module), node.id))
    return ".*?"        # anything else (a call, ...): matched by whatever it produced


def _warning_sites():
    sites = []
    for path in _sources():
        rel = os.path.relpath(path, os.path.dirname(_PKG))
        if rel == os.path.join("cgrad", "_warn.py"):
            continue
        module = _module_of(path)
        with open(path, encoding="utf-8") as f:
            text = f.read()
        for call, line in _calls(text, "_warn"):
            first = ast.parse(call, mode="eval").body.args[0]
            sites.append((f"{rel}:{line}", _message_pattern(first, module)))
    return sites


def test_every_warning_site_is_exercised():
    sites = _warning_sites()
    assert len(sites) >= 30
    messages = [str(w.message) for fn, _ in CASES for w in _record(fn)]
    missing = [site for site, pattern in sites
               if not any(re.match(pattern, m, re.S) for m in messages)]
    assert not missing, f"warning sites no case in this file triggers: {missing}"


def test_cgrad_warns_only_through_its_helper():
    """A bare warnings.warn in cgrad would need a hand-tuned stacklevel, right for one call
    path only: cgrad/_warn.py computes it."""
    bad = []
    for path in _sources():
        if os.path.basename(path) == "_warn.py":
            continue
        with open(path, encoding="utf-8") as f:
            for n, line in enumerate(f, 1):
                if re.search(r"\bwarnings\.warn(_explicit)?\(|\bwarn\(.*stacklevel", line):
                    bad.append(f"{os.path.relpath(path, _PKG)}:{n}")
    assert not bad, bad


def test_helper_blames_the_first_frame_outside_cgrad():
    from cgrad._warn import warn
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        line = inspect.currentframe().f_lineno + 1
        warn("direct", RuntimeWarning)
    assert [(w.filename, w.lineno, w.category) for w in caught] == [
        (__file__, line, RuntimeWarning)]


def test_the_suite_fails_on_cgrad_warnings():
    """pyproject.toml's filterwarnings: a cgrad warning that no test expects is an error."""
    with pytest.raises(UserWarning, match="Implicit dimension choice for softmax"):
        F.softmax(cgrad.ones(2, 3))
    with pytest.raises(DeprecationWarning, match="should not be instantiated"):
        Function()
    with pytest.raises(FutureWarning, match="mark_shared_storage is deprecated"):
        cgrad.ones(1, requires_grad=True).__mul__(2).grad_fn.mark_shared_storage()
