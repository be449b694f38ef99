"""PackedSequence and the pack/pad helpers of torch.nn.utils.rnn.

Every data movement here is one gather (integer indexing) of a flattened tensor, so gradients
flow through packing and padding and no Python loop runs over elements.
"""
from __future__ import annotations

from collections import namedtuple

import numpy as np

from cgrad import _dtype
from cgrad._creation import full, tensor
from cgrad.ops.joining import cat
from cgrad.tensor import Tensor

__all__ = ["PackedSequence", "pack_padded_sequence", "pad_packed_sequence", "pad_sequence",
           "unpad_sequence", "pack_sequence", "unpack_sequence", "invert_permutation"]

_PackedSequenceBase = namedtuple("PackedSequence",
                                 ["data", "batch_sizes", "sorted_indices", "unsorted_indices"])


def invert_permutation(permutation):
    """The inverse of an index permutation (None stays None)."""
    if permutation is None:
        return None
    p = np.asarray(permutation.detach().numpy() if isinstance(permutation, Tensor)
                   else permutation, dtype=np.int64)
    out = np.empty_like(p)
    out[p] = np.arange(p.size, dtype=np.int64)
    return tensor(out)


class PackedSequence(_PackedSequenceBase):
    """Holds the data and the per-step batch sizes of a packed batch of sequences."""

    def __new__(cls, data, batch_sizes=None, sorted_indices=None, unsorted_indices=None):
        if unsorted_indices is None:
            unsorted_indices = invert_permutation(sorted_indices)
        if batch_sizes is not None:
            if not isinstance(batch_sizes, Tensor) or batch_sizes.dim() != 1:
                raise ValueError(
                    "batch_sizes should always be on CPU. Instances of PackedSequence should "
                    "never be created manually. They should be instantiated by functions like "
                    "pack_sequence and pack_padded_sequences in nn.utils.rnn.")
            return super().__new__(cls, data, batch_sizes, sorted_indices, unsorted_indices)
        # PackedSequence((data, batch_sizes)) form
        data, batch_sizes = data[0], data[1]
        return super().__new__(cls, data, batch_sizes, sorted_indices, unsorted_indices)

    def _with_data(self, data):
        return type(self)(data, self.batch_sizes, self.sorted_indices, self.unsorted_indices)

    def to(self, *args, **kwargs):
        data = self.data.to(*args, **kwargs)
        if data is self.data:
            return self
        return self._with_data(data)

    def cpu(self, *args, **kwargs):
        return self.to("cpu")

    def double(self):
        return self.to(dtype=_dtype.float64)

    def float(self):
        return self.to(dtype=_dtype.float32)

    def half(self):
        return self.to(dtype=_dtype.float16)

    def long(self):
        return self.to(dtype=_dtype.int64)

    def int(self):
        return self.to(dtype=_dtype.int32)

    def short(self):
        return self.to(dtype=_dtype.int16)

    def char(self):
        return self.to(dtype=_dtype.int8)

    def byte(self):
        return self.to(dtype=_dtype.uint8)

    @property
    def is_cuda(self):
        return False

    def is_pinned(self):
        return False


def _lengths_array(lengths):
    if isinstance(lengths, Tensor):
        return np.asarray(lengths.detach().numpy(), dtype=np.int64).reshape(-1)
    return np.asarray(list(lengths), dtype=np.int64).reshape(-1)


def _batch_sizes(lengths):
    """batch_sizes[t] = number of sequences longer than t (lengths sorted decreasing)."""
    steps = np.arange(int(lengths.max()), dtype=np.int64)
    return (lengths[None, :] > steps[:, None]).sum(axis=1).astype(np.int64)


def pack_padded_sequence(input, lengths, batch_first=False, enforce_sorted=True):
    """Packs a padded (T, B, *) (or (B, T, *) with batch_first) batch of sequences."""
    lens = _lengths_array(lengths)
    if enforce_sorted:
        if lens.size > 1 and np.any(lens[1:] > lens[:-1]):
            raise RuntimeError(
                "`lengths` array must be sorted in decreasing order when `enforce_sorted` is "
                "True. You can pass `enforce_sorted=False` to pack_padded_sequence and/or "
                "pack_sequence to sidestep this requirement if you do not need ONNX "
                "exportability.")
        sorted_indices = None
        order = np.arange(lens.size)
    else:
        order = np.argsort(-lens, kind="stable")
        sorted_indices = tensor(order.astype(np.int64))
    if batch_first:
        input = input.transpose(0, 1)
    T, B = input.shape[0], input.shape[1]
    if lens.size != B:
        raise RuntimeError(f"Expected `len(lengths)` to be equal to batch_size, but got "
                           f"{lens.size} (batch_size={B})")
    if lens.size == 0 or lens.min() <= 0:
        raise RuntimeError("Length of all samples has to be greater than 0, but found an "
                           "element in 'lengths' that is <= 0")
    slens = lens[order]
    if slens[0] > T:
        raise RuntimeError(f"Expected sequence length to be at most {T}, but got "
                           f"{int(slens[0])} instead")
    bs = _batch_sizes(slens)
    # packed row k of step t is sorted batch entry b (< bs[t]): source row t * B + order[b]
    t_idx = np.repeat(np.arange(bs.size), bs)
    b_idx = np.concatenate([np.arange(n) for n in bs]) if bs.size else np.zeros(0, np.int64)
    rows = t_idx * B + order[b_idx]
    flat = input.reshape((T * B,) + tuple(input.shape[2:]))
    data = flat[tensor(rows.astype(np.int64))]
    return PackedSequence(data, tensor(bs), sorted_indices, None)


def pad_packed_sequence(sequence, batch_first=False, padding_value=0.0, total_length=None):
    """Inverse of pack_padded_sequence: (padded tensor, lengths as an int64 tensor)."""
    data = sequence.data
    bs = np.asarray(sequence.batch_sizes.numpy(), dtype=np.int64)
    max_len = bs.size
    if total_length is not None:
        if total_length < max_len:
            raise ValueError(
                "Expected total_length to be at least the length of the longest sequence in "
                f"input, but got total_length={total_length} and max sequence length being "
                f"{max_len}")
        T = total_length
    else:
        T = max_len
    B = int(bs[0]) if bs.size else 0
    N = data.shape[0]
    # lengths in sorted order: number of steps with batch_size > b
    slens = (bs[None, :] > np.arange(B)[:, None]).sum(axis=1).astype(np.int64)
    offsets = np.concatenate([[0], np.cumsum(bs)[:-1]]).astype(np.int64)
    src = np.full((T, B), N, dtype=np.int64)           # N: the padding row
    tt, bb = np.meshgrid(np.arange(max_len), np.arange(B), indexing="ij")
    valid = bb < bs[:, None]
    src[:max_len][valid] = (offsets[:, None] + bb)[valid]
    if sequence.unsorted_indices is not None:
        unsorted = np.asarray(sequence.unsorted_indices.numpy(), dtype=np.int64)
        src = src[:, unsorted]
        slens = slens[unsorted]
    pad = full((1,) + tuple(data.shape[1:]), padding_value, dtype=data.dtype)
    ext = cat([data, pad], 0)
    out = ext[tensor(src.reshape(-1))].reshape((T, B) + tuple(data.shape[1:]))
    if batch_first:
        out = out.transpose(0, 1)
    return out, tensor(slens)


def pad_sequence(sequences, batch_first=False, padding_value=0.0, padding_side="right"):
    """Stacks a list of (L_i, *) tensors into (L_max, B, *) (or (B, L_max, *)), padded."""
    if padding_side not in ("left", "right"):
        raise ValueError(f"Expected padding_side to be one of left or right, but got "
                         f"{padding_side}.")
    if isinstance(sequences, Tensor):
        sequences = sequences.unbind(0)
    sequences = list(sequences)
    if len(sequences) == 0:
        raise RuntimeError("received an empty list of sequences")
    lens = np.array([s.shape[0] for s in sequences], dtype=np.int64)
    B, L = len(sequences), int(lens.max())
    trailing = tuple(sequences[0].shape[1:])
    starts = np.concatenate([[0], np.cumsum(lens)[:-1]]).astype(np.int64)
    N = int(lens.sum())
    pos = np.arange(L)[None, :]                            # (1, L)
    shift = (L - lens)[:, None] if padding_side == "left" else np.zeros((B, 1), np.int64)
    k = pos - shift                                       # index into sequence b
    valid = (k >= 0) & (k < lens[:, None])
    src = np.where(valid, starts[:, None] + k, N)          # (B, L)
    dtype = sequences[0].dtype
    pad = full((1,) + trailing, padding_value, dtype=dtype)
    ext = cat(list(sequences) + [pad], 0)
    if not batch_first:
        src = src.T
    return ext[tensor(np.ascontiguousarray(src).reshape(-1))].reshape(
        src.shape + trailing)


def unpad_sequence(padded_sequences, lengths, batch_first=False):
    """Splits a padded batch back into a list of variable-length tensors."""
    if not batch_first:
        padded_sequences = padded_sequences.transpose(0, 1)
    lens = _lengths_array(lengths)
    return [padded_sequences[i][:int(n)] for i, n in enumerate(lens)]


def pack_sequence(sequences, enforce_sorted=True):
    """Packs a list of variable-length tensors (pad_sequence then pack_padded_sequence)."""
    lengths = [s.shape[0] for s in sequences]
    return pack_padded_sequence(pad_sequence(sequences), lengths,
                                enforce_sorted=enforce_sorted)


def unpack_sequence(packed_sequences):
    """Unpacks a PackedSequence into the list of its sequences."""
    padded, lengths = pad_packed_sequence(packed_sequences, batch_first=True)
    return unpad_sequence(padded, lengths, batch_first=True)
