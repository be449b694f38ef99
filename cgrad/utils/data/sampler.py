"""Samplers with ``torch.utils.data``'s names and behaviour: what order (and which) dataset
keys a DataLoader fetches.

Random samplers draw as torch's do, from ``generator=`` or else from cgrad's default
generator: ``RandomSampler`` without a generator draws one int64 seed from the default
generator each time it is iterated and samples from a fresh ``Generator`` seeded with it,
so ``cgrad.manual_seed(s)`` makes every epoch's order reproducible. The orders are not
torch's (Note [Random streams] in cgrad/_generator.py).
"""
from __future__ import annotations

import itertools
from collections.abc import Iterable, Iterator, Sequence, Sized
from typing import Any, Generic, TypeVar

import numpy as np

from cgrad import _creation
from cgrad import _generator
from cgrad import _random

__all__ = ["BatchSampler", "RandomSampler", "Sampler", "SequentialSampler",
           "SubsetRandomSampler", "WeightedRandomSampler"]

T_co = TypeVar("T_co", covariant=True)


class Sampler(Generic[T_co]):
    """The base of samplers: subclasses define ``__iter__`` (the keys, or lists of keys for
    a batch sampler) and usually ``__len__``. There is deliberately no default ``__len__``
    (``len()`` of a sampler without one raises TypeError)."""

    def __iter__(self) -> Iterator[T_co]:
        raise NotImplementedError


def _draw_seed(generator=None):
    """One int64 seed from generator (default: the default generator), drawn as torch's
    ``torch.empty((), dtype=torch.int64).random_()`` draws it."""
    return int(_creation.empty((), dtype=np.int64).random_(generator=generator).item())


class SequentialSampler(Sampler[int]):
    """0, 1, ..., len(data_source) - 1."""

    def __init__(self, data_source: Sized) -> None:
        self.data_source = data_source

    def __iter__(self) -> Iterator[int]:
        return iter(range(len(self.data_source)))

    def __len__(self) -> int:
        return len(self.data_source)


class RandomSampler(Sampler[int]):
    """A new random order of the keys each time it is iterated; with ``replacement=True``,
    ``num_samples`` keys drawn independently. Without replacement, ``num_samples`` (default
    ``len(data_source)``) larger than the dataset runs through whole permutations."""

    def __init__(self, data_source: Sized, replacement: bool = False,
                 num_samples: int | None = None, generator: Any = None) -> None:
        self.data_source = data_source
        self.replacement = replacement
        self._num_samples = num_samples
        self.generator = generator
        if not isinstance(replacement, bool):
            raise TypeError(f"replacement should be a boolean value, but got "
                            f"replacement={replacement}")
        n = self.num_samples
        if not isinstance(n, int) or n <= 0:
            raise ValueError(f"num_samples should be a positive integer value, but got "
                             f"num_samples={n}")

    @property
    def num_samples(self) -> int:
        """How many keys an iteration gives (the dataset's current length by default)."""
        if self._num_samples is None:
            return len(self.data_source)
        return self._num_samples

    def __iter__(self) -> Iterator[int]:
        n = len(self.data_source)
        g = self.generator
        if g is None:
            g = _generator.Generator()
            g.manual_seed(_draw_seed())
        count = self.num_samples
        if self.replacement:
            # in draws of 32, as torch (a lazy loop: makemore asks for 1e10 samples)
            for _ in range(count // 32):
                yield from _random.randint(n, (32,), dtype=np.int64, generator=g).tolist()
            yield from _random.randint(n, (count % 32,), dtype=np.int64, generator=g).tolist()
        else:
            for _ in range(count // n):
                yield from _random.randperm(n, generator=g).tolist()
            yield from _random.randperm(n, generator=g).tolist()[:count % n]

    def __len__(self) -> int:
        return self.num_samples


class SubsetRandomSampler(Sampler[int]):
    """The given indices in a new random order each time it is iterated."""

    def __init__(self, indices: Sequence[int], generator: Any = None) -> None:
        self.indices = indices
        self.generator = generator

    def __iter__(self) -> Iterator[int]:
        for i in _random.randperm(len(self.indices), generator=self.generator).tolist():
            yield self.indices[i]

    def __len__(self) -> int:
        return len(self.indices)


class WeightedRandomSampler(Sampler[int]):
    """num_samples keys in [0, len(weights)), key i drawn with probability proportional to
    weights[i] (with replacement by default; without, each key at most once)."""

    def __init__(self, weights: Sequence[float], num_samples: int, replacement: bool = True,
                 generator: Any = None) -> None:
        if not isinstance(num_samples, int) or isinstance(num_samples, bool) or \
                num_samples <= 0:
            raise ValueError(f"num_samples should be a positive integer value, but got "
                             f"num_samples={num_samples}")
        if not isinstance(replacement, bool):
            raise ValueError(f"replacement should be a boolean value, but got "
                             f"replacement={replacement}")
        w = _creation.as_tensor(weights, dtype=np.float64)
        if w.dim() != 1:
            raise ValueError(f"weights should be a 1d sequence but given weights have shape "
                             f"{tuple(w.shape)}")
        self.weights = w
        self.num_samples = num_samples
        self.replacement = replacement
        self.generator = generator

    def __iter__(self) -> Iterator[int]:
        drawn = _random.multinomial(self.weights, self.num_samples, self.replacement,
                                    generator=self.generator)
        yield from drawn.tolist()

    def __len__(self) -> int:
        return self.num_samples


class BatchSampler(Sampler[list]):
    """Lists of batch_size keys from sampler (any iterable of keys); the last, shorter list
    is dropped when drop_last."""

    def __init__(self, sampler: Sampler[int] | Iterable[int], batch_size: int,
                 drop_last: bool) -> None:
        if not isinstance(batch_size, int) or isinstance(batch_size, bool) or \
                batch_size <= 0:
            raise ValueError(f"batch_size should be a positive integer value, but got "
                             f"batch_size={batch_size}")
        if not isinstance(drop_last, bool):
            raise ValueError(f"drop_last should be a boolean value, but got "
                             f"drop_last={drop_last}")
        self.sampler = sampler
        self.batch_size = batch_size
        self.drop_last = drop_last

    def __iter__(self) -> Iterator[list]:
        keys = iter(self.sampler)
        size = self.batch_size
        while True:
            batch = list(itertools.islice(keys, size))
            if not batch or (self.drop_last and len(batch) < size):
                return
            yield batch

    def __len__(self) -> int:
        n = len(self.sampler)                                      # type: ignore[arg-type]
        return n // self.batch_size if self.drop_last else -(-n // self.batch_size)
