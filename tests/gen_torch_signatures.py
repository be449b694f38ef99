"""Write tests/torch_signatures.json: torch's parameter names for every op cgrad exposes.

    python tests/gen_torch_signatures.py        # needs torch (2.13); run from the repository

For each function (``cgrad.<name>``), method (``Tensor.<name>``) and ``cgrad.nn.functional``
op that cgrad's op tables hold (the names tests/test_second_backward.py sweeps), the file holds
torch's overloads, each a list of parameters ``[name, kind, has_default, annotation]``:

* ops bound in C (``torch.sum``, ``Tensor.sum``, ``F.linear``): the overloads of the type stubs
  generated from torch's operator declarations (``torch/_C/_VariableFunctions.pyi``,
  ``torch/_C/__init__.pyi``, ``torch/_C/_nn.pyi``), the same names and kinds its argument
  parser accepts; these also accept NumPy's names (``ALIASES``);
* ops written in Python (``torch.split``, ``Tensor.split``, ``F.relu``): ``inspect.signature``.

It also holds ``calls``: for every overload, each sample of tests/op_samples.py that torch
accepts with the overload's names as keywords (every parameter after ``self`` that can be
given by keyword is), and the same call with NumPy's names where torch accepts them.
tests/test_torch_signatures.py replays the calls on cgrad (and on torch when importable, where
it also checks this file is current).
"""
from __future__ import annotations

import ast
import inspect
import json
import os
import sys
from pathlib import Path

HERE = Path(__file__).parent
OUT = HERE / "torch_signatures.json"
sys.path.insert(0, str(HERE))

# NumPy-compatible names torch's argument parser accepts for C-bound ops (one of each is
# tried; torch also accepts "a" and "x1" for input).
ALIASES = {"input": "x", "other": "x2", "dim": "axis", "keepdim": "keepdims"}
KINDS = {inspect.Parameter.POSITIONAL_ONLY: "pos_only",
         inspect.Parameter.POSITIONAL_OR_KEYWORD: "pos",
         inspect.Parameter.VAR_POSITIONAL: "var_pos",
         inspect.Parameter.KEYWORD_ONLY: "kw_only",
         inspect.Parameter.VAR_KEYWORD: "var_kw"}


def _stub_overloads(path, cls=None):
    """name -> list of overloads (parameter lists) from a .pyi stub (class `cls`'s methods)."""
    tree = ast.parse(Path(path).read_text())
    body = tree.body
    if cls is not None:
        body = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == cls).body
    out: dict = {}
    for node in body:
        if not isinstance(node, ast.FunctionDef):
            continue
        a = node.args
        params = []
        positional = a.posonlyargs + a.args
        n_def = len(a.defaults)
        for i, p in enumerate(positional):
            kind = "pos_only" if i < len(a.posonlyargs) else "pos"
            params.append([_name(p.arg), kind, i >= len(positional) - n_def, _ann(p)])
        if a.vararg is not None:
            params.append([a.vararg.arg, "var_pos", False, _ann(a.vararg)])
        for p, d in zip(a.kwonlyargs, a.kw_defaults):
            params.append([_name(p.arg), "kw_only", d is not None, _ann(p)])
        if a.kwarg is not None:
            params.append([a.kwarg.arg, "var_kw", False, _ann(a.kwarg)])
        if cls is not None:
            params = params[1:]                     # self
        out.setdefault(node.name, []).append(params)
    return out


def _name(arg):
    """The stubs spell the parameter `from` (a Python keyword) `from_`."""
    return "from" if arg == "from_" else arg


def _ann(p):
    return ast.unparse(p.annotation) if p.annotation is not None else ""


def _py_overload(fn, method):
    params = []
    for p in inspect.signature(fn).parameters.values():
        ann = p.annotation if isinstance(p.annotation, str) else (
            "" if p.annotation is inspect.Parameter.empty else inspect.formatannotation(
                p.annotation))
        params.append([p.name, KINDS[p.kind], p.default is not inspect.Parameter.empty, ann])
    return [params[1:] if method else params]


def torch_signatures(torch, names):
    """{form: {name: {"source": "c" | "python", "overloads": [...]}}} for (form, name) pairs."""
    root = os.path.join(os.path.dirname(torch.__file__), "_C")
    stubs = {
        "fn": _stub_overloads(os.path.join(root, "_VariableFunctions.pyi")),
        "nn": _stub_overloads(os.path.join(root, "_nn.pyi")),
        "method": _stub_overloads(os.path.join(root, "__init__.pyi"), "TensorBase"),
    }
    out: dict = {"fn": {}, "method": {}, "F": {}}
    for form, name in names:
        obj = torch_object(torch, form, name)
        if obj is None:
            continue
        if inspect.isfunction(obj) or inspect.isfunction(getattr(obj, "__wrapped__", None)):
            entry = {"source": "python", "overloads": _py_overload(obj, form == "method")}
        else:
            table = stubs["method"] if form == "method" else (
                stubs["nn"] if getattr(obj, "__module__", "") == "torch._C._nn" else stubs["fn"])
            if name not in table:
                continue
            entry = {"source": "c", "overloads": table[name]}
        out[form][name] = entry
    return out


# cgrad functions that torch has only in torch.nn.functional
TORCH_F_ONLY = {"elu", "gelu", "leaky_relu", "silu", "softplus"}


def torch_object(torch, form, name):
    if form == "fn":
        return getattr(torch.nn.functional if name in TORCH_F_ONLY else torch, name, None)
    if form == "F":
        return getattr(torch.nn.functional, name, None)
    return getattr(torch.Tensor, name, None)


def names_to_check():
    """(form, name) for every op of cgrad's tables that is called by name (no operators or
    properties)."""
    from test_second_backward import TENSOR_PY_OPS, _tables
    from op_samples import F_SAMPLES
    fns, methods = _tables()
    out = [("fn", n) for n in sorted(fns)]
    out += [("method", n) for n in sorted(methods | TENSOR_PY_OPS)
            if not n.startswith("__") and n not in ("T", "mT", "H", "mH")]
    # logsigmoid: torch binds it as torch._C._nn.log_sigmoid, which has no signature to read
    out += [("F", n) for n in sorted(F_SAMPLES) if n not in NO_TORCH_SIGNATURE]
    return out


NO_TORCH_SIGNATURE = {"logsigmoid"}


def samples_for(form, name):
    from op_samples import F_SAMPLES, SAMPLES
    table = F_SAMPLES if form == "F" else SAMPLES
    out = []
    for s in table.get(name, []):
        if s.call is not None:
            continue
        forms = s.forms or {"fn", "method", "F"}
        if form in forms:
            out.append((name + (f"/{s.tag}" if s.tag else ""), s))
    return out


def keyword_plan(params, n_args, kwargs):
    """For an overload and a sample with n_args positional arguments (after self for a
    method) and keyword names `kwargs`: {position: keyword name} moving every positional
    argument that the overload lets be given by keyword, or None when the sample does not
    fit the overload's shape."""
    var = any(p[1] == "var_pos" for p in params)
    positional = []
    for p in params:
        if p[1] == "var_pos":
            break
        if p[1] in ("pos_only", "pos"):
            positional.append(p)
    if (n_args > len(positional) and not var) or any(
            k not in {p[0] for p in params} for k in kwargs):
        return None
    for p in params:
        if p[1] in ("pos_only", "pos", "kw_only") and not p[2]:
            at = positional.index(p) if p in positional else len(positional)
            if at >= n_args and p[0] not in kwargs:
                return None                     # a required parameter the sample lacks
    plan = {i: positional[i][0] for i in range(min(n_args, len(positional)))
            if positional[i][1] == "pos"}
    if var and plan and n_args > len(positional):
        return None       # an argument after the moved ones would land in *args
    return plan if (plan or kwargs) else None


def call_with(m, form, name, s, x, plan):
    """Run sample s of op `name` on library m, positional arguments moved to the keywords of
    `plan` ({position: name}); None for the plain positional call."""
    args, kw = s.args(m, x), dict(s.kw(m, x))
    if form == "method":
        self_, rest = args[0], list(args[1:])
    else:
        self_, rest = None, list(args)
    pos = []
    for i, a in enumerate(rest):
        if plan is not None and i in plan:
            kw[plan[i]] = a
        else:
            pos.append(a)
    if form == "method":
        return getattr(self_, name)(*pos, **kw)
    if form == "F":
        return getattr(m.nn.functional, name)(*pos, **kw)
    mod = m.nn.functional if (m is not sys.modules.get("cgrad") and name in TORCH_F_ONLY) else m
    return getattr(mod, name)(*pos, **kw)


def to_numpy(out, m):
    import numpy as np
    if isinstance(out, m.Tensor):
        return np.array(out.detach().numpy() if out.dtype != m.bool else out.numpy())
    if isinstance(out, (tuple, list)):
        return [to_numpy(o, m) for o in out]
    return out


def same(a, b):
    import numpy as np
    if isinstance(a, list) or isinstance(b, list):
        return (isinstance(a, list) and isinstance(b, list) and len(a) == len(b)
                and all(same(p, q) for p, q in zip(a, b)))
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        a, b = np.asarray(a), np.asarray(b)
        return a.shape == b.shape and np.allclose(a.astype(float), b.astype(float),
                                                  rtol=1e-6, atol=1e-9, equal_nan=True)
    return a == b


def torch_calls(torch, sigs):
    """The keyword calls torch accepts: a list of [form, name, sample id, overload index,
    {position: keyword}] (positions as strings), with the NumPy-alias variant of each
    C-bound call that torch accepts too."""
    import numpy as np
    calls = []
    for form in ("fn", "method", "F"):
        for name, entry in sorted(sigs[form].items()):
            for sid, s in samples_for(form, name):
                x = torch.tensor(np.array(s.x, dtype=np.float64), requires_grad=True)
                args = s.args(torch, x)
                n_args = len(args) - (1 if form == "method" else 0)
                try:
                    ref = to_numpy(call_with(torch, form, name, s, x, None), torch)
                except Exception:               # noqa: BLE001 - not a valid torch call
                    continue
                for k, params in enumerate(entry["overloads"]):
                    plan = keyword_plan(params, n_args, s.kw(torch, x))
                    if plan is None:
                        continue
                    variants = [plan]
                    if entry["source"] == "c" and any(v in ALIASES for v in plan.values()):
                        variants.append({i: ALIASES.get(v, v) for i, v in plan.items()})
                    for v in variants:
                        try:
                            got = to_numpy(call_with(torch, form, name, s, x, v), torch)
                        except Exception:       # noqa: BLE001
                            continue
                        if s.random or same(got, ref):
                            calls.append([form, name, sid, k, {str(i): n for i, n in v.items()}])
    return calls


def _dump(data):
    """JSON with one line per op and per call (readable diffs when torch changes)."""
    def one(v):
        return json.dumps(v, sort_keys=True, separators=(", ", ": "))
    out = ["{", f' "torch": {one(data["torch"])},', ' "signatures": {']
    forms = sorted(data["signatures"])
    for i, form in enumerate(forms):
        out.append(f"  {one(form)}: {{")
        ops = sorted(data["signatures"][form].items())
        for j, (name, entry) in enumerate(ops):
            out.append(f"   {one(name)}: {one(entry)}" + ("," if j < len(ops) - 1 else ""))
        out.append("  }" + ("," if i < len(forms) - 1 else ""))
    out.append(" },")
    out.append(' "calls": [')
    calls = data["calls"]
    for k, c in enumerate(calls):
        out.append(f"  {one(c)}" + ("," if k < len(calls) - 1 else ""))
    out.append(" ]")
    out.append("}")
    return "\n".join(out) + "\n"


def main():
    import torch
    names = names_to_check()
    sigs = torch_signatures(torch, names)
    data = {"torch": torch.__version__.split("+")[0], "signatures": sigs,
            "calls": torch_calls(torch, sigs)}
    OUT.write_text(_dump(data))
    print(f"wrote {OUT}: {sum(len(v) for v in sigs.values())} ops, {len(data['calls'])} calls")


if __name__ == "__main__":
    main()
