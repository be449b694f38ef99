"""cgrad.utils.data: torch.utils.data's datasets, samplers and DataLoader.

``Dataset``, ``IterableDataset``, ``TensorDataset``, ``StackDataset``, ``Subset``,
``ConcatDataset``, ``ChainDataset``, ``random_split``; ``Sampler``, ``SequentialSampler``,
``RandomSampler``, ``SubsetRandomSampler``, ``WeightedRandomSampler``, ``BatchSampler``;
``DataLoader`` (batching, shuffling, collation, worker processes: Note [DataLoader workers]
in cgrad/utils/data/dataloader.py), ``default_collate``, ``default_convert``,
``get_worker_info``; ``DistributedSampler`` (cgrad/utils/data/distributed.py). Random orders are reproducible from ``cgrad.manual_seed`` but are not
torch's (Note [Random streams] in cgrad/_generator.py).
"""
from cgrad.utils.data.dataloader import (DataLoader, _DatasetKind, default_collate,
                                         default_convert, get_worker_info)
from cgrad.utils.data.dataset import (ChainDataset, ConcatDataset, Dataset, IterableDataset,
                                      StackDataset, Subset, TensorDataset, random_split)
from cgrad.utils.data.distributed import DistributedSampler
from cgrad.utils.data.sampler import (BatchSampler, RandomSampler, Sampler, SequentialSampler,
                                      SubsetRandomSampler, WeightedRandomSampler)

__all__ = ["BatchSampler", "ChainDataset", "ConcatDataset", "DataLoader", "Dataset",
           "DistributedSampler",
           "IterableDataset", "RandomSampler", "Sampler", "SequentialSampler", "StackDataset",
           "Subset", "SubsetRandomSampler", "TensorDataset", "WeightedRandomSampler",
           "_DatasetKind", "default_collate", "default_convert", "get_worker_info",
           "random_split"]
