"""DistributedSampler: torch.utils.data.distributed.DistributedSampler for cgrad.

Each of ``num_replicas`` ranks iterates its own ``num_samples`` keys of the dataset: rank r
takes keys r, r + num_replicas, ... of the (shuffled) order, padded by repeating its start
so that it divides evenly (or cut short with ``drop_last=True``), exactly as torch's. The
shuffled order is ``randperm(len(dataset))`` from a generator seeded with ``seed + epoch``
(call ``set_epoch`` at the start of each epoch), the same on every rank; it is cgrad's
random stream, not torch's (Note [Random streams] in cgrad/_generator.py).
"""
from __future__ import annotations

import math
from collections.abc import Iterator
from typing import TypeVar

from cgrad import _generator
from cgrad import _random
from cgrad import distributed as dist
from cgrad.utils.data.sampler import Sampler

__all__ = ["DistributedSampler"]

T_co = TypeVar("T_co", covariant=True)


class DistributedSampler(Sampler[T_co]):
    """The keys of rank ``rank`` out of ``num_replicas`` (default: the default process
    group's rank and world size)."""

    def __init__(self, dataset, num_replicas: int | None = None, rank: int | None = None,
                 shuffle: bool = True, seed: int = 0, drop_last: bool = False) -> None:
        if num_replicas is None:
            num_replicas = dist.get_world_size()
        if rank is None:
            rank = dist.get_rank()
        if rank >= num_replicas or rank < 0:
            raise ValueError(f"Invalid rank {rank}, rank should be in the interval "
                             f"[0, {num_replicas - 1}]")
        self.dataset = dataset
        self.num_replicas = num_replicas
        self.rank = rank
        self.epoch = 0
        self.drop_last = drop_last
        if self.drop_last and len(self.dataset) % self.num_replicas != 0:
            self.num_samples = math.ceil((len(self.dataset) - self.num_replicas)
                                         / self.num_replicas)
        else:
            self.num_samples = math.ceil(len(self.dataset) / self.num_replicas)
        self.total_size = self.num_samples * self.num_replicas
        self.shuffle = shuffle
        self.seed = seed

    def __iter__(self) -> Iterator[T_co]:
        if self.shuffle:
            g = _generator.Generator()
            g.manual_seed(self.seed + self.epoch)
            indices = _random.randperm(len(self.dataset), generator=g).tolist()
        else:
            indices = list(range(len(self.dataset)))
        if not self.drop_last:
            padding_size = self.total_size - len(indices)
            if padding_size <= len(indices):
                indices += indices[:padding_size]
            else:
                indices += (indices * math.ceil(padding_size / len(indices)))[:padding_size]
        else:
            indices = indices[:self.total_size]
        assert len(indices) == self.total_size
        indices = indices[self.rank:self.total_size:self.num_replicas]
        assert len(indices) == self.num_samples
        return iter(indices)

    def __len__(self) -> int:
        return self.num_samples

    def set_epoch(self, epoch: int) -> None:
        """Set the epoch (the shuffle's seed is ``seed + epoch``): call it before each
        epoch's iteration so that every epoch has its own order."""
        self.epoch = epoch
