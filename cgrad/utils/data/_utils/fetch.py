"""Fetchers: what one step of a DataLoader iterator (or of a worker) reads from the dataset,
given the sampler's output for that step (a key, a list of keys, or None for an iterable
dataset), collated with the loader's collate_fn."""
from __future__ import annotations

__all__ = ["Map", "Iterable", "create_fetcher"]

Map = 0            # the two kinds of dataset (torch's _DatasetKind values)
Iterable = 1


class _MapFetcher:
    """dataset[key], or a list of dataset[key] (through __getitems__ when the dataset has
    one) when auto_collation."""

    def __init__(self, dataset, auto_collation, collate_fn, drop_last):
        self.dataset = dataset
        self.auto_collation = auto_collation
        self.collate_fn = collate_fn
        self.drop_last = drop_last

    def fetch(self, index):
        ds = self.dataset
        if not self.auto_collation:
            return self.collate_fn(ds[index])
        many = getattr(ds, "__getitems__", None)
        data = many(index) if many else [ds[i] for i in index]
        return self.collate_fn(data)


class _IterableFetcher:
    """The next sample of the dataset's iterator, or the next len(index) of them when
    auto_collation (fewer at the end, none when drop_last); StopIteration at the end."""

    def __init__(self, dataset, auto_collation, collate_fn, drop_last):
        self.auto_collation = auto_collation
        self.collate_fn = collate_fn
        self.drop_last = drop_last
        self.dataset_iter = iter(dataset)
        self.ended = False

    def fetch(self, index):
        if self.ended:
            raise StopIteration
        if not self.auto_collation:
            return self.collate_fn(next(self.dataset_iter))
        data = []
        for _ in index:
            try:
                data.append(next(self.dataset_iter))
            except StopIteration:
                self.ended = True
                break
        if not data or (self.drop_last and len(data) < len(index)):
            raise StopIteration
        return self.collate_fn(data)


def create_fetcher(kind, dataset, auto_collation, collate_fn, drop_last):
    """The fetcher for a dataset of kind Map or Iterable."""
    cls = _MapFetcher if kind == Map else _IterableFetcher
    return cls(dataset, auto_collation, collate_fn, drop_last)
