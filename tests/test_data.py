"""cgrad.utils.data in the main process: datasets, samplers, collation, DataLoader.

Where the result does not depend on the random stream (sequential order, batching, collated
structure and dtypes, len(), drop_last, errors, messages, warnings, random_split lengths)
it is compared with torch.utils.data; random orders are checked for validity and for being
reproducible from cgrad.manual_seed, and the draws from the default generator follow
torch's structure (one seed per iterator, one per RandomSampler pass). Worker processes:
tests/test_data_workers.py.
"""
from __future__ import annotations

import collections
import os
import pickle
import subprocess
import sys
import warnings

import numpy as np
import pytest

import cgrad
import cgrad.utils.data as cd
from cgrad import nn
from cgrad.utils.data import (BatchSampler, ChainDataset, ConcatDataset, DataLoader, Dataset,
                              IterableDataset, RandomSampler, SequentialSampler, StackDataset,
                              Subset, SubsetRandomSampler, TensorDataset,
                              WeightedRandomSampler, default_collate, default_convert,
                              random_split)
from cgrad.utils.data._utils.collate import collate, default_collate_fn_map

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.fixture
def torch():
    return pytest.importorskip("torch")


def desc(x):
    """A library-neutral description of a (collated) value: tensors by dtype, shape and
    values; containers by type name."""
    if type(x).__name__ in ("Tensor", "Parameter"):
        return ("T", str(x.dtype).replace("torch.", ""), tuple(x.shape), x.tolist(),
                x.grad_fn is not None)
    if isinstance(x, dict):
        return {k: desc(v) for k, v in x.items()}
    if isinstance(x, tuple) and hasattr(x, "_fields"):
        return (type(x).__name__, tuple(desc(v) for v in x))
    if isinstance(x, (list, tuple)):
        return (type(x).__name__, [desc(v) for v in x])
    if isinstance(x, np.ndarray):
        return ("ndarray", str(x.dtype), x.tolist())
    return repr(x)


def outcome(f, *args):
    """f's described result, or (exception type name, message) with torch -> cgrad."""
    try:
        return desc(f(*args))
    except Exception as e:      # noqa: BLE001  (the comparison is the test)
        return type(e).__name__, str(e).replace("torch.", "cgrad.").replace("Torch", "Cgrad")


def _error_type(f, *args):
    try:
        f(*args)
    except Exception as e:      # noqa: BLE001
        return type(e).__name__
    return None


def same(torch, f):
    """f(lib, data_module) gives the same outcome on cgrad and on torch."""
    ours = outcome(f, cgrad, cd)
    theirs = outcome(f, torch, torch.utils.data)
    assert ours == theirs
    return ours


# -- default_collate / default_convert -------------------------------------------------------
Point = collections.namedtuple("Point", "x y")

COLLATE_BATCHES = {
    "floats": [1.0, 2.0],
    "ints": [1, 2],
    "bools": [True, False],
    "int_then_bool": [1, True],
    "int_then_float": [1, 2.5],
    "strings": ["a", "b"],
    "bytes": [b"a", b"b"],
    "np_float32": [np.float32(1), np.float32(2)],
    "np_int16": [np.int16(1), np.int16(2)],
    "np_bool": [np.bool_(True), np.bool_(False)],
    "np_str": [np.str_("a"), np.str_("b")],
    "np_arrays_int32": [np.array([1, 2], dtype=np.int32), np.array([3, 4], dtype=np.int32)],
    "np_arrays_0d": [np.array(1.5), np.array(2.5)],
    "np_arrays_uint8": [np.ones((2, 2), np.uint8), np.zeros((2, 2), np.uint8)],
    "dicts": [{"a": 1, "b": [1.0, 2.0]}, {"a": 2, "b": [3.0, 4.0]}],
    "ordered_dicts": [collections.OrderedDict(b=1, a=2.0), collections.OrderedDict(b=3, a=4.0)],
    "namedtuples": [Point(1, 2.0), Point(3, 4.0)],
    "tuples": [(1, "x"), (2, "y")],
    "lists": [[1, np.float64(2)], [3, np.float64(4)]],
    "nested": [{"p": Point([1, 2], "s"), "q": (np.ones(2, np.float16),)},
               {"p": Point([3, 4], "t"), "q": (np.zeros(2, np.float16),)}],
    "ragged_lists": [[1, 2], [3]],
    "string_arrays": [np.array(["a"]), np.array(["b"])],
    "object_arrays": [np.array([None]), np.array([None])],
    "objects": [object(), object()],
    "complex": [1 + 2j, 3j],
    "none": [None, None],
}


@pytest.mark.parametrize("name", sorted(COLLATE_BATCHES))
def test_default_collate_like_torch(torch, name):
    batch = COLLATE_BATCHES[name]
    same(torch, lambda lib, d: d.default_collate(batch))


def _tensor_batches(lib):
    return {
        "int64": [lib.tensor([1, 2]), lib.tensor([3, 4])],
        "0d": [lib.tensor(1.0), lib.tensor(2.0)],
        "mixed_dtypes": [lib.tensor([1, 2]), lib.tensor([3.5, 4.0])],
        "mixed_shapes": [lib.tensor([1, 2]), lib.tensor([3])],
        "requires_grad": [lib.ones(2, requires_grad=True), lib.ones(2)],
        "views": [lib.arange(6.0).reshape(2, 3).t()[0], lib.arange(6.0).reshape(2, 3).t()[2]],
        "tensor_then_int": [lib.tensor([1]), 2],
        "in_tuples": [(lib.tensor([1.0]), 1), (lib.tensor([2.0]), 2)],
    }


@pytest.mark.parametrize("name", sorted(_tensor_batches(cgrad)))
def test_default_collate_tensors_like_torch(torch, name):
    same(torch, lambda lib, d: d.default_collate(_tensor_batches(lib)[name]))


def test_default_collate_tensors_graph_and_copy():
    a, b = cgrad.ones(2, requires_grad=True), cgrad.zeros(2)
    out = default_collate([a, b])
    assert out.grad_fn.name() == "StackBackward0"
    out.sum().backward()
    assert a.grad.tolist() == [1.0, 1.0]
    with cgrad.no_grad():
        assert default_collate([a, b]).grad_fn is None
    x = cgrad.zeros(2)
    batch = default_collate([x, x])
    batch[0, 0] = 5.0                              # a copy, not a view of the samples
    assert x.tolist() == [0.0, 0.0]
    p = nn.Parameter(cgrad.ones(2))
    with cgrad.no_grad():
        assert type(default_collate([p, p])) is cgrad.Tensor


def test_default_collate_refuses_sparse():
    s = cgrad.sparse_coo_tensor(cgrad.tensor([[0], [1]]), cgrad.tensor([1.0]), (2, 2))
    with pytest.raises(RuntimeError, match="Batches of sparse tensors are not currently "):
        default_collate([s, s])


def test_collate_fn_map_extends_default_collate():
    class Box:
        def __init__(self, v):
            self.v = v

    def collate_box(batch, *, collate_fn_map=None):
        return sum(b.v for b in batch)

    with pytest.raises(TypeError, match="default_collate: batch must contain"):
        default_collate([Box(1), Box(2)])
    fn_map = {**default_collate_fn_map, Box: collate_box}
    assert collate([{"b": Box(1)}, {"b": Box(2)}], collate_fn_map=fn_map) == {"b": 3}
    assert desc(collate([[1.0, Box(3)], [2.0, Box(4)]], collate_fn_map=fn_map)) == \
        ("list", [("T", "float64", (2,), [1.0, 2.0], False), "7"])


CONVERT_SAMPLES = {
    "array": np.array([1, 2], dtype=np.int32),
    "scalar": np.float32(3),
    "tuple": (np.array(1), 2),
    "list": [np.array(1.0), "s"],
    "dict": {"a": np.array([1.0])},
    "namedtuple": Point(np.array(0), 1),
    "str": "s",
    "int": 3,
    "string_array": np.array(["a"]),
    "range": range(3),
    "bytes": b"x",
}


@pytest.mark.parametrize("name", sorted(CONVERT_SAMPLES))
def test_default_convert_like_torch(torch, name):
    sample = CONVERT_SAMPLES[name]
    same(torch, lambda lib, d: d.default_convert(sample))


def test_default_convert_keeps_tensors():
    t = cgrad.ones(2)
    assert default_convert(t) is t
    assert default_convert([t])[0] is t


# -- datasets ---------------------------------------------------------------------------------
class _Stream:
    """An IterableDataset class of each library, yielding range(n) and reporting length n."""

    def __new__(cls, d, n):
        class Stream(d.IterableDataset):
            def __iter__(self):
                return iter(range(n))

            def __len__(self):
                return n
        return Stream()


DATASET_CASES = {
    "tensor_item": lambda lib, d: d.TensorDataset(lib.arange(3), lib.ones(3, 2))[1],
    "tensor_list_index": lambda lib, d: d.TensorDataset(lib.arange(3))[[0, 2]],
    "tensor_len": lambda lib, d: len(d.TensorDataset(lib.arange(3), lib.ones(3, 2))),
    "tensor_mismatch": lambda lib, d: d.TensorDataset(lib.ones(3), lib.ones(4)),
    "tensor_none_len": lambda lib, d: len(d.TensorDataset()),
    "stack_tuple": lambda lib, d: d.StackDataset([1, 2], "ab")[1],
    "stack_dict": lambda lib, d: (d.StackDataset(x=[1, 2], y="ab")[0],
                                  len(d.StackDataset(x=[1, 2], y="ab"))),
    "stack_getitems": lambda lib, d: d.StackDataset(d.Subset(range(5), [1, 3]),
                                                    [7, 8]).__getitems__([1, 0]),
    "stack_getitems_dict": lambda lib, d: d.StackDataset(x=d.Subset(range(5), [1, 3]),
                                                         y=[7, 8]).__getitems__([1, 0]),
    "stack_empty": lambda lib, d: d.StackDataset(),
    "stack_both": lambda lib, d: d.StackDataset([1], a=[2]),
    "stack_mismatch": lambda lib, d: d.StackDataset([1], [2, 3]),
    "concat_items": lambda lib, d: [d.ConcatDataset([range(3), [10, 11], "xyz"])[i]
                                    for i in range(-8, 8)],
    "concat_sizes": lambda lib, d: (len(d.ConcatDataset([range(3), "xy"])),
                                    d.ConcatDataset([range(3), "xy"]).cumulative_sizes,
                                    d.ConcatDataset.cumsum([[1], [2, 3]])),
    "concat_too_negative": lambda lib, d: d.ConcatDataset([range(3)])[-4],
    "concat_past_end": lambda lib, d: d.ConcatDataset([range(3)])[3],
    "concat_empty": lambda lib, d: d.ConcatDataset([]),
    "concat_iterable": lambda lib, d: d.ConcatDataset([_Stream(d, 2)]),
    "concat_add": lambda lib, d: type(d.TensorDataset(lib.ones(2)) +
                                      d.TensorDataset(lib.ones(3))).__name__,
    "chain": lambda lib, d: (list(d.ChainDataset([_Stream(d, 2), _Stream(d, 3)])),
                             len(d.ChainDataset([_Stream(d, 2), _Stream(d, 3)])),
                             list(_Stream(d, 2) + _Stream(d, 1))),
    "chain_map_style": lambda lib, d: list(d.ChainDataset([_Stream(d, 2), [1]])),
    "chain_map_style_len": lambda lib, d: len(d.ChainDataset([_Stream(d, 2), [1]])),
    "subset": lambda lib, d: (d.Subset(range(10), [2, 4, 6])[1],
                              d.Subset(range(10), [2, 4, 6]).__getitems__([0, 2]),
                              len(d.Subset(range(10), [2, 4, 6]))),
    "subset_list_index": lambda lib, d: d.Subset(d.TensorDataset(lib.arange(5)), [4, 1])[[0, 1]],
    "subset_of_stack": lambda lib, d: d.Subset(d.StackDataset(range(4), "abcd"),
                                               [3, 0]).__getitems__([0, 1]),
    "dataset_getitem": lambda lib, d: d.Dataset()[0],
    "iterable_abstract": lambda lib, d: d.IterableDataset(),
}


@pytest.mark.parametrize("name", sorted(DATASET_CASES))
def test_datasets_like_torch(torch, name):
    same(torch, DATASET_CASES[name])


def test_subset_subclass_must_override_getitems(torch):
    def make(lib, d):
        class Sub(d.Subset):
            def __getitem__(self, i):
                return 0
        return Sub(range(3), [0])
    assert same(torch, make)[0] == "NotImplementedError"


def test_concat_deprecated_attribute_warns():
    ds = ConcatDataset([range(2), range(3)])
    with pytest.warns(FutureWarning, match="`cummulative_sizes` attribute is renamed"):
        assert ds.cummulative_sizes == [2, 5]


def test_dataset_types():
    assert issubclass(IterableDataset, Dataset)
    assert isinstance(ChainDataset([]), IterableDataset)
    assert isinstance(TensorDataset(cgrad.ones(1)), Dataset)
    assert isinstance(StackDataset([1]), Dataset) and isinstance(Subset([1], [0]), Dataset)
    assert Dataset[int] is not None and cd.Sampler[int] is not None   # Generic, as in torch
    assert DataLoader[int] is not None


# -- random_split -----------------------------------------------------------------------------
SPLITS = [[3, 7], [0.3, 0.7], [0.3, 0.3, 0.4], [0.5, 0.5], [1.0], [0.1, 0.9, 0.0],
          [0.33, 0.33, 0.34], [2, 2], [0.2, 0.2], [1.2, -0.2], [0, 1], [1], [0.6, 0.6],
          [0.25, 0.25, 0.25, 0.25]]


def _split_lengths(lib, d, lengths):
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        parts = d.random_split(range(10), lengths)
    return [len(p) for p in parts], [(x.category.__name__, str(x.message)) for x in w]


@pytest.mark.parametrize("lengths", SPLITS, ids=str)
def test_random_split_lengths_like_torch(torch, lengths):
    same(torch, lambda lib, d: _split_lengths(lib, d, lengths))


def test_random_split_warning_names_the_caller():
    with pytest.warns(UserWarning, match="Length of split at index 1 is 0") as rec:
        random_split(range(3), [1.0, 0.0])
    assert rec[0].filename == __file__


def test_random_split_is_a_seeded_partition():
    parts = random_split(range(10), [3, 3, 4], generator=cgrad.Generator().manual_seed(7))
    assert isinstance(parts[0], Subset) and parts[0].dataset == range(10)
    flat = [x for p in parts for x in p]
    assert sorted(flat) == list(range(10)) and [len(p) for p in parts] == [3, 3, 4]
    again = random_split(range(10), [3, 3, 4], generator=cgrad.Generator().manual_seed(7))
    assert [list(p) for p in again] == [list(p) for p in parts]
    cgrad.manual_seed(5)
    a = [list(p) for p in random_split(range(10), [0.5, 0.5])]
    cgrad.manual_seed(5)
    assert [list(p) for p in random_split(range(10), [0.5, 0.5])] == a
    assert [list(p) for p in random_split(range(10), [5, 5], generator=None)]


# -- samplers ---------------------------------------------------------------------------------
SAMPLER_CASES = {
    "sequential": lambda lib, d: (list(d.SequentialSampler(range(4))),
                                  len(d.SequentialSampler("abc"))),
    "random_len": lambda lib, d: (len(d.RandomSampler(range(4))),
                                  len(d.RandomSampler(range(4), num_samples=7))),
    "random_replacement_type": lambda lib, d: d.RandomSampler(range(4), replacement=1),
    "random_zero_samples": lambda lib, d: d.RandomSampler(range(4), num_samples=0),
    "random_float_samples": lambda lib, d: d.RandomSampler(range(4), num_samples=2.0),
    "random_empty": lambda lib, d: d.RandomSampler([]),
    "random_replacement_len": lambda lib, d: len(list(d.RandomSampler(
        range(4), replacement=True, num_samples=70))),
    "subset_random": lambda lib, d: (sorted(d.SubsetRandomSampler([5, 7, 9])),
                                     len(d.SubsetRandomSampler([5, 7]))),
    "weighted_zero": lambda lib, d: d.WeightedRandomSampler([1.0, 2.0], 0),
    "weighted_bool": lambda lib, d: d.WeightedRandomSampler([1.0, 2.0], True),
    "weighted_replacement_type": lambda lib, d: d.WeightedRandomSampler([1.0], 2,
                                                                        replacement=0),
    "weighted_2d": lambda lib, d: d.WeightedRandomSampler([[1.0, 2.0]], 2),
    "weighted_weights": lambda lib, d: d.WeightedRandomSampler([1, 2], 2).weights,
    "weighted_one_choice": lambda lib, d: list(d.WeightedRandomSampler([0.0, 1.0, 0.0], 3)),
    "weighted_no_replacement": lambda lib, d: sorted(d.WeightedRandomSampler(
        [0.0, 1.0, 1.0, 0.0], 2, replacement=False)),
    "batch": lambda lib, d: (list(d.BatchSampler(range(10), 3, False)),
                             list(d.BatchSampler(range(10), 3, True)),
                             list(d.BatchSampler(range(9), 3, True))),
    "batch_len": lambda lib, d: [len(d.BatchSampler(range(n), 3, dl)) for n in (9, 10, 0)
                                 for dl in (False, True)],
    "batch_size_zero": lambda lib, d: d.BatchSampler(range(3), 0, False),
    "batch_size_float": lambda lib, d: d.BatchSampler(range(3), 2.0, False),
    "batch_drop_last_type": lambda lib, d: d.BatchSampler(range(3), 2, None),
    "base_iter": lambda lib, d: next(iter(d.Sampler())),
    "base_len": lambda lib, d: len(d.SequentialSampler(range(2))) + len(d.Sampler()),
}


@pytest.mark.parametrize("name", sorted(SAMPLER_CASES))
def test_samplers_like_torch(torch, name):
    same(torch, SAMPLER_CASES[name])


def test_random_sampler_permutations_are_valid_and_seeded():
    ds = range(10)
    cgrad.manual_seed(0)
    first = list(RandomSampler(ds))
    second = list(RandomSampler(ds))
    assert sorted(first) == sorted(second) == list(range(10)) and first != second
    cgrad.manual_seed(0)
    assert list(RandomSampler(ds)) == first
    long = list(RandomSampler(ds, num_samples=25))         # two whole passes and a part
    assert sorted(long[:10]) == sorted(long[10:20]) == list(range(10))
    assert len(set(long[20:])) == 5
    drawn = list(RandomSampler(ds, replacement=True, num_samples=100))
    assert len(drawn) == 100 and set(drawn) <= set(range(10)) and len(set(drawn)) > 5
    # makemore's "infinite" loader: 1e10 samples drawn lazily (the draws were once listed up
    # front: 2.5 GB and seconds before the first batch)
    import itertools
    endless = RandomSampler(ds, replacement=True, num_samples=int(1e10))
    assert len(endless) == 10 ** 10
    assert len(list(itertools.islice(iter(endless), 1000))) == 1000
    g = cgrad.Generator().manual_seed(3)
    a = list(RandomSampler(ds, generator=g))
    g.manual_seed(3)
    assert list(RandomSampler(ds, generator=g)) == a
    assert sorted(SubsetRandomSampler([4, 8, 15], generator=g)) == [4, 8, 15]


def test_random_sampler_follows_the_dataset_length():
    data = [1, 2, 3]
    s = RandomSampler(data)
    data.append(4)                        # num_samples is len(data_source) when asked
    assert len(s) == 4 and sorted(s) == [0, 1, 2, 3]


def test_weighted_sampler_frequencies():
    g = cgrad.Generator().manual_seed(0)
    s = WeightedRandomSampler([1.0, 3.0], 4000, generator=g)
    counts = np.bincount(list(s), minlength=2)
    assert 0.7 < counts[1] / 4000 < 0.8


def _seed_draws(n, generator=None):
    """The n int64 seeds that a loader draws (base seed, RandomSampler seed, ...)."""
    t = cgrad.empty((), dtype=cgrad.int64)
    return [t.random_(generator=generator).item() for _ in range(n)]


def test_shuffling_draws_as_torch_does():
    """An iterator draws its base seed from the default generator when created, and a
    RandomSampler without generator one seed per pass: two draws per epoch."""
    ds = list(range(20))
    cgrad.manual_seed(11)
    epoch1 = [b.tolist() for b in DataLoader(ds, batch_size=4, shuffle=True)]
    after = cgrad.get_rng_state()
    cgrad.manual_seed(11)
    _base, sampler_seed = _seed_draws(2)
    assert cgrad.get_rng_state().tolist() == after.tolist()
    order = list(RandomSampler(ds, generator=cgrad.Generator().manual_seed(sampler_seed)))
    assert [x for b in epoch1 for x in b] == order
    cgrad.manual_seed(11)
    loader = DataLoader(ds, batch_size=4, shuffle=True)
    again = [[b.tolist() for b in loader] for _ in range(2)]
    assert again[0] == epoch1 and again[1] != epoch1
    assert sorted(x for b in again[1] for x in b) == ds
    # sequential: the base seed is still drawn once per iterator
    cgrad.manual_seed(11)
    list(DataLoader(ds))
    after = cgrad.get_rng_state()
    cgrad.manual_seed(11)
    _seed_draws(1)
    assert cgrad.get_rng_state().tolist() == after.tolist()


def test_loader_generator_leaves_the_default_generator_alone():
    ds = list(range(12))
    g = cgrad.Generator().manual_seed(4)
    state = cgrad.get_rng_state().tolist()
    a = [b.tolist() for b in DataLoader(ds, batch_size=5, shuffle=True, generator=g)]
    assert cgrad.get_rng_state().tolist() == state
    g.manual_seed(4)
    b = [b.tolist() for b in DataLoader(ds, batch_size=5, shuffle=True, generator=g)]
    assert a == b and sorted(x for batch in a for x in batch) == ds


def test_shuffle_is_reproducible_across_runs():
    """The same program with the same seed loads the same batches in a fresh process (the
    default generator starts from a random seed at import)."""
    code = ("import cgrad\nfrom cgrad.utils.data import DataLoader, TensorDataset, "
            "random_split\ncgrad.manual_seed(2024)\n"
            "ds = TensorDataset(cgrad.arange(30))\n"
            "print([b[0].tolist() for b in DataLoader(ds, batch_size=7, shuffle=True)])\n"
            "print([list(p.indices) for p in random_split(ds, [0.5, 0.5])])\n")
    env = dict(os.environ, PYTHONPATH=ROOT)
    runs = [subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                           text=True, timeout=120) for _ in range(2)]
    assert runs[0].returncode == 0, runs[0].stderr
    assert runs[0].stdout == runs[1].stdout and runs[0].stdout.count("[") > 4


# -- DataLoader -------------------------------------------------------------------------------
class MapDS:
    """Map-style samples: a dict with an int, a float32 array and a string."""

    def __init__(self, n):
        self.n = n

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        if i >= self.n:
            raise IndexError(i)
        return {"i": i, "x": np.full(2, i, dtype=np.float32), "s": str(i)}


LOADER_KWARGS = [{}, {"batch_size": 3}, {"batch_size": 3, "drop_last": True},
                 {"batch_size": None}, {"batch_size": 4, "drop_last": True},
                 {"batch_size": 20}, {"batch_size": 5, "drop_last": True}]


@pytest.mark.parametrize("kwargs", LOADER_KWARGS, ids=str)
def test_loader_map_style_like_torch(torch, kwargs):
    same(torch, lambda lib, d: (len(d.DataLoader(MapDS(10), **kwargs)),
                                list(d.DataLoader(MapDS(10), **kwargs))))


@pytest.mark.parametrize("kwargs", LOADER_KWARGS, ids=str)
def test_loader_iterable_like_torch(torch, kwargs):
    same(torch, lambda lib, d: (len(d.DataLoader(_Stream(d, 10), **kwargs)),
                                list(d.DataLoader(_Stream(d, 10), **kwargs))))


LOADER_CASES = {
    "batch_sampler": lambda lib, d: list(d.DataLoader(MapDS(10),
                                                      batch_sampler=[[1, 2], [5], [9, 0]])),
    "batch_sampler_len": lambda lib, d: len(d.DataLoader(MapDS(10),
                                                         batch_sampler=[[1], [5], [9]])),
    "sampler_list": lambda lib, d: list(d.DataLoader(MapDS(10), sampler=[3, 1, 2],
                                                     batch_size=2)),
    "collate_fn": lambda lib, d: list(d.DataLoader(MapDS(5), batch_size=2,
                                                   collate_fn=lambda b: len(b))),
    "list_dataset": lambda lib, d: list(d.DataLoader(list(range(5)), batch_size=2)),
    "tensor_dataset_as_is": lambda lib, d: list(d.DataLoader(lib.arange(5.0), batch_size=2)),
    "tensor_dataset": lambda lib, d: list(d.DataLoader(d.TensorDataset(
        lib.arange(6.0).reshape(3, 2), lib.arange(3)), batch_size=2)),
    "tensor_dataset_unbatched": lambda lib, d: list(d.DataLoader(d.TensorDataset(
        lib.arange(6.0).reshape(3, 2), lib.arange(3)), batch_size=None)),
    "stack_dataset": lambda lib, d: list(d.DataLoader(d.StackDataset(x=[1, 2, 3], y="abc"),
                                                      batch_size=2)),
    "subset": lambda lib, d: list(d.DataLoader(d.Subset(MapDS(9), [8, 0, 4]), batch_size=2)),
    "concat": lambda lib, d: list(d.DataLoader(d.ConcatDataset([MapDS(2), MapDS(3)]),
                                               batch_size=2)),
    "chain": lambda lib, d: list(d.DataLoader(d.ChainDataset([_Stream(d, 2), _Stream(d, 3)]),
                                              batch_size=2)),
    "empty": lambda lib, d: (len(d.DataLoader([], batch_size=2)),
                             list(d.DataLoader([], batch_size=2))),
    "shuffle_len": lambda lib, d: (len(d.DataLoader(MapDS(10), shuffle=True, batch_size=3)),
                                   len(iter(d.DataLoader(MapDS(10), shuffle=True,
                                                         batch_size=3)))),
    "shuffle_multiset": lambda lib, d: sorted(x.item() for x in d.DataLoader(
        list(range(7)), shuffle=True)),
    "shuffle_false_iterable": lambda lib, d: list(d.DataLoader(_Stream(d, 3),
                                                               shuffle=False)),
    "empty_shuffle": lambda lib, d: d.DataLoader(MapDS(0), shuffle=True),
    "no_len_dataset": lambda lib, d: len(d.DataLoader(d.Dataset())),
    "timeout_single_process": lambda lib, d: list(d.DataLoader(MapDS(3), timeout=1)),
    "attributes": lambda lib, d: [(k, getattr(d.DataLoader(MapDS(3), batch_size=2), k))
                                  for k in ("batch_size", "drop_last", "num_workers",
                                            "prefetch_factor", "pin_memory", "timeout",
                                            "persistent_workers", "in_order",
                                            "pin_memory_device", "worker_init_fn",
                                            "multiprocessing_context", "generator")],
    "sampler_types": lambda lib, d: [(type(x.sampler).__name__,
                                      type(x.batch_sampler).__name__,
                                      x.collate_fn.__name__) for x in (
        d.DataLoader(MapDS(3)), d.DataLoader(MapDS(3), shuffle=True),
        d.DataLoader(MapDS(3), batch_size=None), d.DataLoader(_Stream(d, 3)))],
    "frozen_batch_size": lambda lib, d: setattr(d.DataLoader(MapDS(3)), "batch_size", 3),
    "frozen_sampler": lambda lib, d: setattr(d.DataLoader(MapDS(3)), "sampler", [0]),
    "settable_num_workers": lambda lib, d: setattr(d.DataLoader(MapDS(3)), "num_workers", 1),
    "iterator_pickle": lambda lib, d: _error_type(pickle.dumps, iter(d.DataLoader(MapDS(3)))),
}


@pytest.mark.parametrize("name", sorted(LOADER_CASES))
def test_loader_like_torch(torch, name):
    same(torch, LOADER_CASES[name])


LOADER_ERRORS = [
    {"num_workers": -1}, {"timeout": -1}, {"prefetch_factor": 2},
    {"num_workers": 1, "prefetch_factor": -1}, {"persistent_workers": True},
    {"shuffle": True, "sampler": [1]}, {"batch_sampler": [[1]], "batch_size": 2},
    {"batch_sampler": [[1]], "shuffle": True}, {"batch_sampler": [[1]], "drop_last": True},
    {"batch_sampler": [[1]], "sampler": [1]}, {"batch_size": None, "drop_last": True},
    {"multiprocessing_context": "spawn"}, {"num_workers": 1, "multiprocessing_context": "nope"},
    {"num_workers": 1, "multiprocessing_context": 3}, {"batch_size": 0}, {"batch_size": -1},
    {"batch_size": 2.0}, {"drop_last": 1}, {"batch_size": True}]


@pytest.mark.parametrize("kwargs", LOADER_ERRORS, ids=str)
def test_loader_argument_errors_like_torch(torch, kwargs):
    assert same(torch, lambda lib, d: d.DataLoader(MapDS(3), **kwargs) and None)[0] in (
        "ValueError", "TypeError")


@pytest.mark.parametrize("kwargs", [{"shuffle": True}, {"sampler": [1]},
                                    {"batch_sampler": [[1]]}], ids=str)
def test_loader_iterable_argument_errors_like_torch(torch, kwargs):
    assert same(torch, lambda lib, d: d.DataLoader(_Stream(d, 3), **kwargs) and None)[0] == \
        "ValueError"


def test_multiprocessing_context_is_resolved():
    import multiprocessing
    dl = DataLoader(MapDS(3), num_workers=1, multiprocessing_context="spawn")
    assert dl.multiprocessing_context is multiprocessing.get_context("spawn")


def _iterable_len_warnings(lib, d):
    loader = d.DataLoader(_Stream(d, 5), batch_size=2)
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        out = [len(loader)]
        stream = loader.dataset
        unbatched = d.DataLoader(stream)
        out.append(len(unbatched))
        type(stream).__len__ = lambda self: 3
        out += [len(unbatched), len(list(unbatched))]
    return out, [str(x.message).replace(repr(stream), "DS") for x in w]


def test_iterable_len_warning_like_torch(torch):
    same(torch, _iterable_len_warnings)


def _pin_memory_warnings(lib, d):
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        batches = list(d.DataLoader([1, 2], pin_memory=True, pin_memory_device="cuda"))
        list(d.DataLoader([1], pin_memory=True))
    return batches, [str(x.message) for x in w]


def test_pin_memory_is_a_no_op_with_torch_warnings(torch):
    same(torch, _pin_memory_warnings)


def test_too_many_workers_warns_at_construction():
    n = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    with pytest.warns(UserWarning, match=f"This DataLoader will create {n + 1} worker "
                                         f"processes in total. Our suggested max number of "
                                         f"worker in current system is {n}"):
        DataLoader(MapDS(3), num_workers=n + 1)


def test_loader_reiterates_and_custom_samplers():
    class Evens(cd.Sampler[int]):
        def __init__(self, n):
            self.n = n

        def __iter__(self):
            return iter(range(0, self.n, 2))

        def __len__(self):
            return (self.n + 1) // 2

    loader = DataLoader(MapDS(7), sampler=Evens(7), batch_size=3)
    first = [b["i"].tolist() for b in loader]
    assert first == [[0, 2, 4], [6]] == [b["i"].tolist() for b in loader] and len(loader) == 2
    it = iter(loader)
    assert iter(it) is it and len(it) == 2
    batches = BatchSampler(SequentialSampler(range(5)), 2, False)
    assert [b.tolist() for b in DataLoader(list("abcde"), batch_sampler=batches,
                                           collate_fn=lambda b: np.array(b))] == \
        [["a", "b"], ["c", "d"], ["e"]]


def test_getitems_is_used_for_batches():
    class Batched(Dataset):
        calls = []

        def __len__(self):
            return 5

        def __getitem__(self, i):
            raise AssertionError("not per item")

        def __getitems__(self, idx):
            self.calls.append(list(idx))
            return [float(i) for i in idx]

    out = [b.tolist() for b in DataLoader(Batched(), batch_size=2)]
    assert out == [[0.0, 1.0], [2.0, 3.0], [4.0]] and Batched.calls == [[0, 1], [2, 3], [4]]
    assert [b.tolist() for b in DataLoader(Subset(Batched(), [4, 0]), batch_size=2)] == \
        [[4.0, 0.0]]


def test_dataset_errors_propagate_unwrapped():
    class Bad:
        def __len__(self):
            return 3

        def __getitem__(self, i):
            raise KeyError(i)

    with pytest.raises(KeyError):
        next(iter(DataLoader(Bad())))


# -- tensors across processes and a training loop ---------------------------------------------
@pytest.mark.parametrize("requires_grad", [False, True])
def test_tensors_pickle(requires_grad):
    for t in (cgrad.randn(3, 4, requires_grad=requires_grad),
              cgrad.arange(6).reshape(2, 3).t(), cgrad.tensor(2.5, dtype=cgrad.float64)):
        u = pickle.loads(pickle.dumps(t))
        assert type(u) is cgrad.Tensor and u.dtype == t.dtype and u.shape == t.shape
        assert u.tolist() == t.tolist() and u.requires_grad == t.requires_grad
        assert u.grad_fn is None


def test_training_loop_over_a_dataloader():
    g = cgrad.Generator().manual_seed(0)
    x = cgrad.randn(256, 4, generator=g)
    w_true = cgrad.tensor([[1.5], [-2.0], [0.5], [3.0]])
    y = x @ w_true + 0.25
    train, val = random_split(TensorDataset(x, y), [0.75, 0.25], generator=g)
    cgrad.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 1))
    opt = cgrad.optim.Adam(model.parameters(), lr=0.03)
    loss_fn = nn.MSELoss()
    loader = DataLoader(train, batch_size=32, shuffle=True, drop_last=True, generator=g)
    assert len(loader) == 6

    def val_loss():
        with cgrad.no_grad():
            return sum(loss_fn(model(xb), yb).item()
                       for xb, yb in DataLoader(val, batch_size=64)) / len(val)

    start = val_loss()
    for _ in range(30):
        for xb, yb in loader:
            assert xb.shape == (32, 4) and yb.shape == (32, 1) and xb.dtype == cgrad.float32
            opt.zero_grad()
            loss = loss_fn(model(xb), yb)
            loss.backward()
            opt.step()
    assert val_loss() < 0.05 * start
