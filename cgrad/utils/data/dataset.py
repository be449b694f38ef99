"""Datasets with ``torch.utils.data``'s names and behaviour: the map-style ``Dataset`` and the
stream-style ``IterableDataset`` bases, ``TensorDataset``, ``StackDataset``, ``Subset``,
``ConcatDataset``, ``ChainDataset`` and ``random_split``.

A map-style dataset answers ``dataset[key]`` (and usually ``len(dataset)``); it may also
answer ``dataset.__getitems__(keys)`` with a list of samples, which the DataLoader then uses
for a whole batch at once. An iterable dataset only answers ``iter(dataset)``.
"""
from __future__ import annotations

import bisect
import itertools
import math
from collections.abc import Iterable, Sequence
from typing import Any, Generic, TypeVar

from cgrad import _generator
from cgrad import _random
from cgrad._warn import warn as _warn

__all__ = ["Dataset", "IterableDataset", "TensorDataset", "StackDataset", "ConcatDataset",
           "ChainDataset", "Subset", "random_split"]

T = TypeVar("T")
T_co = TypeVar("T_co", covariant=True)


class Dataset(Generic[T_co]):
    """The base of map-style datasets: subclasses define ``__getitem__(key)`` and, for the
    default samplers, ``__len__``; ``a + b`` is ``ConcatDataset([a, b])``.

    There is deliberately no default ``__len__``: ``len()`` of a dataset without one raises
    TypeError, and code that probes for a length (``list(x)``) falls back to iteration."""

    def __getitem__(self, index: Any) -> T_co:
        raise NotImplementedError("Subclasses of Dataset should implement __getitem__.")

    def __add__(self, other: Dataset[T_co]) -> ConcatDataset[T_co]:
        return ConcatDataset([self, other])


class IterableDataset(Dataset[T_co], Iterable[T_co]):
    """The base of stream-style datasets: subclasses define ``__iter__``. With
    ``num_workers > 0`` every worker iterates over its own copy; use
    ``get_worker_info()`` (in ``__iter__`` or in ``worker_init_fn``) to give each copy its
    share of the stream. ``a + b`` is ``ChainDataset([a, b])``."""

    def __add__(self, other: Dataset[T_co]) -> ChainDataset:      # type: ignore[override]
        return ChainDataset([self, other])


class TensorDataset(Dataset[tuple]):
    """Samples are the rows of tensors that share their first dimension: item ``i`` is
    ``tuple(t[i] for t in tensors)``."""

    def __init__(self, *tensors: Any) -> None:
        if any(tensors[0].size(0) != t.size(0) for t in tensors):
            raise AssertionError("Size mismatch between tensors")
        self.tensors = tensors

    def __getitem__(self, index):
        return tuple([t[index] for t in self.tensors])

    def __len__(self) -> int:
        return self.tensors[0].size(0)


class StackDataset(Dataset[T_co]):
    """Datasets of one length side by side: ``StackDataset(a, b)[i] == (a[i], b[i])`` and
    ``StackDataset(x=a, y=b)[i] == {"x": a[i], "y": b[i]}``."""

    def __init__(self, *args: Dataset, **kwargs: Dataset) -> None:
        if args and kwargs:
            raise ValueError("Supported either ``tuple``- (via ``args``) or``dict``- (via "
                             "``kwargs``) like input/output, but both types are given.")
        if not args and not kwargs:
            raise ValueError("At least one dataset should be passed")
        parts = list(args) if args else list(kwargs.values())
        self._length = len(parts[0])                               # type: ignore[arg-type]
        if any(len(d) != self._length for d in parts):             # type: ignore[arg-type]
            raise ValueError("Size mismatch between datasets")
        self.datasets: tuple | dict = args if args else kwargs

    def __getitem__(self, index):
        if isinstance(self.datasets, dict):
            return {k: d[index] for k, d in self.datasets.items()}
        return tuple(d[index] for d in self.datasets)

    @staticmethod
    def _column(dataset, indices):
        """dataset's samples at indices, through its __getitems__ when it has one."""
        many = getattr(dataset, "__getitems__", None)
        if not callable(many):
            return [dataset[i] for i in indices]
        items = many(indices)
        if len(items) != len(indices):
            raise ValueError(f"Nested dataset's output size mismatch. Expected "
                             f"{len(indices)}, got {len(items)}")
        return items

    def __getitems__(self, indices: list) -> list:
        if isinstance(self.datasets, dict):
            cols = {k: self._column(d, indices) for k, d in self.datasets.items()}
            return [{k: col[j] for k, col in cols.items()} for j in range(len(indices))]
        cols_t = [self._column(d, indices) for d in self.datasets]
        return [tuple(col[j] for col in cols_t) for j in range(len(indices))]

    def __len__(self) -> int:
        return self._length


class ConcatDataset(Dataset[T_co]):
    """Datasets one after the other: index ``i`` runs through the first dataset, then the
    second, ... (negative indices count from the end)."""

    @staticmethod
    def cumsum(sequence):
        """The running totals of the lengths of the datasets in sequence."""
        return list(itertools.accumulate(len(d) for d in sequence))

    def __init__(self, datasets: Iterable[Dataset]) -> None:
        self.datasets = list(datasets)
        if not self.datasets:
            raise AssertionError("datasets should not be an empty iterable")
        if any(isinstance(d, IterableDataset) for d in self.datasets):
            raise AssertionError("ConcatDataset does not support IterableDataset")
        self.cumulative_sizes = self.cumsum(self.datasets)

    def __len__(self) -> int:
        return self.cumulative_sizes[-1]

    def __getitem__(self, idx):
        if idx < 0:
            if -idx > len(self):
                raise ValueError("absolute value of index should not exceed dataset length")
            idx += len(self)
        which = bisect.bisect_right(self.cumulative_sizes, idx)
        start = self.cumulative_sizes[which - 1] if which else 0
        return self.datasets[which][idx - start]

    @property
    def cummulative_sizes(self):
        """Deprecated spelling of cumulative_sizes."""
        _warn("`cummulative_sizes` attribute is renamed to `cumulative_sizes`", FutureWarning)
        return self.cumulative_sizes


class ChainDataset(IterableDataset):
    """Iterable datasets one after the other, chained lazily as they are iterated."""

    def __init__(self, datasets: Iterable[Dataset]) -> None:
        self.datasets = datasets

    def _each(self):
        for d in self.datasets:
            if not isinstance(d, IterableDataset):
                raise AssertionError("ChainDataset only supports IterableDataset")
            yield d

    def __iter__(self):
        for d in self._each():
            yield from d

    def __len__(self) -> int:
        return sum(len(d) for d in self._each())                  # type: ignore[arg-type]


class Subset(Dataset[T_co]):
    """The samples of dataset at the given indices: ``Subset(d, idx)[i] == d[idx[i]]``.

    A subclass that overrides ``__getitem__`` must override ``__getitems__`` too (the
    DataLoader fetches batches through it)."""

    def __init__(self, dataset: Dataset[T_co], indices: Sequence[int]) -> None:
        self.dataset = dataset
        self.indices = indices
        cls = type(self)
        if cls.__getitem__ is not Subset.__getitem__ and \
                cls.__getitems__ is Subset.__getitems__:
            raise NotImplementedError(
                f"{cls.__name__} overrides __getitem__ but not __getitems__. When subclassing "
                "Subset and overriding __getitem__, you must also override __getitems__ to "
                "ensure DataLoader works correctly with your custom logic. A simple "
                "implementation:\n\ndef __getitems__(self, indices):\n"
                "    return [self.__getitem__(idx) for idx in indices]")

    def __getitem__(self, idx):
        if isinstance(idx, list):
            return self.dataset[[self.indices[i] for i in idx]]
        return self.dataset[self.indices[idx]]

    def __getitems__(self, indices: list[int]) -> list:
        keys = [self.indices[i] for i in indices]
        many = getattr(self.dataset, "__getitems__", None)
        if callable(many):
            return many(keys)
        return [self.dataset[k] for k in keys]

    def __len__(self) -> int:
        return len(self.indices)


def _lengths_of_fractions(n, fractions):
    """Split lengths for fractions summing to 1: floor(n * f) each, then the remainder
    handed out one by one from the first split on (torch's round robin)."""
    lengths = []
    for i, f in enumerate(fractions):
        if f < 0 or f > 1:
            raise ValueError(f"Fraction at index {i} is not between 0 and 1")
        lengths.append(math.floor(n * f))
    for i in range(n - sum(lengths)):
        lengths[i % len(lengths)] += 1
    for i, length in enumerate(lengths):
        if length == 0:
            _warn(f"Length of split at index {i} is 0. This might result in an empty "
                  "dataset.")
    return lengths


def random_split(dataset: Dataset[T], lengths: Sequence[int | float],
                 generator: Any = _generator.default_generator) -> list[Subset[T]]:
    """Split dataset into non-overlapping random Subsets of the given lengths, or of the
    given fractions of its length when they sum to 1 (floors, with the remainder handed out
    one at a time from the first split on). The order is one ``randperm`` drawn from
    generator (by default cgrad's default generator)."""
    total = sum(lengths)
    if math.isclose(total, 1) and total <= 1:
        lengths = _lengths_of_fractions(len(dataset), lengths)     # type: ignore[arg-type]
    if sum(lengths) != len(dataset):                               # type: ignore[arg-type]
        raise ValueError("Sum of input lengths does not equal the length of the input dataset!")
    order = _random.randperm(sum(lengths), generator=generator).tolist()
    ends = itertools.accumulate(lengths)
    return [Subset(dataset, order[end - n:end]) for end, n in zip(ends, lengths)]
