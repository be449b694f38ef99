"""cgrad.Generator: the random number generator behind every random function.

A Generator wraps a NumPy ``PCG64`` bit generator seeded through NumPy's ``SeedSequence``
(``numpy.random.default_rng(seed)``). Every random function of cgrad (``rand``, ``randn``,
``randint``, ``randperm``, ``multinomial``, ``bernoulli``, ``normal``, ``poisson``, the
in-place fills ``uniform_``, ``normal_``, ``random_``, ..., dropout and ``nn.init``) draws
from ``generator=`` when given, else from ``cgrad.default_generator``.

Note [Random streams]
~~~~~~~~~~~~~~~~~~~~~
The same seed gives the same stream on every run and platform (NumPy's PCG64 and its
distributions are stable), so a program seeded with ``cgrad.manual_seed(s)`` is
reproducible. The values are not torch's: torch draws from a Mersenne Twister with its own
transforms, and copying those bit for bit is not a goal. As in torch, a new
``Generator()`` starts from the seed 67280421310721 and the default generator from a
non-deterministic seed (``initial_seed()`` tells which). ``get_state()`` is a uint8 tensor
of ``STATE_SIZE`` bytes (the seed and the PCG64 state), not torch's 5056-byte Mersenne
Twister state; states only move between cgrad generators.
"""
from __future__ import annotations

import builtins
import operator
import os
from typing import Any

import numpy as np

from cgrad import _C
from cgrad import _device

__all__ = ["Generator", "default_generator", "manual_seed", "seed", "initial_seed",
           "get_rng_state", "set_rng_state"]

DEFAULT_SEED = 67280421310721
STATE_SIZE = 48         # seed (8 bytes), PCG64 state (16), increment (16), cached uint32 (8)
_U64 = 2 ** 64
_OVERFLOW = "Overflow when unpacking long long"


def _tname(x):
    return _device._tname(x)


def _check_seed(seed, strict):
    """A seed as an int in [0, 2**64): torch's range [-2**63, 2**64), negative ones wrapping
    around. strict (Generator.manual_seed): only ints; else anything int() takes."""
    if strict:
        if isinstance(seed, builtins.bool) or not hasattr(seed, "__index__"):
            raise RuntimeError(f"manual_seed expected a long, but got {_tname(seed)}")
        seed = operator.index(seed)
    else:
        seed = builtins.int(seed)
    if not -2 ** 63 <= seed < _U64:
        raise ValueError(_OVERFLOW)
    return seed % _U64


class Generator:
    """cgrad.Generator(device='cpu'): a random number generator (NumPy's PCG64 underneath;
    Note [Random streams]).

    >>> import cgrad
    >>> g = cgrad.Generator().manual_seed(0)
    >>> a = cgrad.rand(2, generator=g)
    >>> b = cgrad.rand(2, generator=g.manual_seed(0))
    >>> bool((a == b).all())
    True
    """

    __slots__ = ("_np", "_seed", "__weakref__")

    def __init__(self, device: object = "cpu") -> None:   # typed: users call it
        d = _device.parse(device, "Generator")
        if d is not None and d.type != "cpu":
            if d.type == "cuda":
                raise RuntimeError("Cannot get CUDA generator: cgrad is not compiled with "
                                   "CUDA enabled (it runs on the CPU only)")
            _device.check(d, "Generator")
        self._seed = DEFAULT_SEED
        self._np = np.random.default_rng(DEFAULT_SEED)

    @property
    def device(self) -> _device.device:
        """The generator's device (always the CPU)."""
        return _device.CPU

    def manual_seed(self, seed: int) -> Generator:
        """Seed the generator with an int in [-2**63, 2**64); returns the generator."""
        self._reseed(_check_seed(seed, True))
        return self

    def _reseed(self, seed):
        # in place: holders of self._np (a running sampler) see the new stream
        self._np.bit_generator.state = np.random.PCG64(seed).state
        self._seed = seed

    def seed(self) -> int:
        """Seed from a non-deterministic source; returns the seed used."""
        s = builtins.int.from_bytes(os.urandom(8), "little") >> 1
        self._reseed(s)
        return s

    def initial_seed(self) -> int:
        """The seed the generator was last seeded with."""
        return self._seed

    def get_state(self) -> Any:
        """The generator's state, a uint8 tensor of STATE_SIZE bytes (Note [Random streams])."""
        st = self._np.bit_generator.state
        inner = st["state"]
        raw = (self._seed.to_bytes(8, "little") + inner["state"].to_bytes(16, "little")
               + inner["inc"].to_bytes(16, "little")
               + builtins.int(st["has_uint32"]).to_bytes(4, "little")
               + builtins.int(st["uinteger"]).to_bytes(4, "little"))
        return _C._wrap(np.frombuffer(raw, dtype=np.uint8).copy())

    def set_state(self, new_state: Any) -> Generator:
        """Restore a state from get_state(); returns the generator."""
        if not isinstance(new_state, _C.TensorBase):
            raise TypeError(f"expected a cgrad.ByteTensor, but got {_tname(new_state)}")
        arr = new_state._data
        if arr.dtype != np.uint8:
            raise TypeError("RNG state must be a cgrad.ByteTensor")
        if arr.size != STATE_SIZE:
            raise RuntimeError(f"Expected a cgrad Generator state of size {STATE_SIZE} but "
                               f"found the input RNG state size to be {arr.size}")
        raw = arr.reshape(-1).tobytes()
        inner = {"state": builtins.int.from_bytes(raw[8:24], "little"),
                 "inc": builtins.int.from_bytes(raw[24:40], "little")}
        if inner["inc"] % 2 == 0:
            raise RuntimeError("Invalid RNG state: not a state from Generator.get_state()")
        self._np.bit_generator.state = {
            "bit_generator": "PCG64", "state": inner,
            "has_uint32": builtins.int.from_bytes(raw[40:44], "little") & 1,
            "uinteger": builtins.int.from_bytes(raw[44:48], "little")}
        self._seed = builtins.int.from_bytes(raw[:8], "little")
        return self

    def clone_state(self) -> Generator:
        """A new Generator in the same state."""
        g = Generator()
        g.set_state(self.get_state())
        return g

    def __getstate__(self):
        return self.get_state()._data.tobytes()

    def __setstate__(self, raw):
        self._seed = DEFAULT_SEED
        self._np = np.random.default_rng(DEFAULT_SEED)
        self.set_state(_C._wrap(np.frombuffer(raw, dtype=np.uint8).copy()))

    def __repr__(self):
        return f"<cgrad.Generator object at {id(self):#x}>"



default_generator = Generator()
default_generator.seed()


def numpy_generator(generator, fname):
    """The NumPy Generator to draw from: the default generator's, a cgrad.Generator's, or a
    numpy.random.Generator given as is (cgrad.nn.init has always taken one)."""
    if generator is None:
        return default_generator._np
    if isinstance(generator, Generator):
        return generator._np
    if isinstance(generator, np.random.Generator):
        return generator
    raise TypeError(f"{fname}(): argument 'generator' must be cgrad.Generator, not "
                    f"{_tname(generator)}")


def manual_seed(seed: Any) -> Generator:
    """Seed the default generator (every random function, dropout and nn.init draw from it)
    and return it. Any int in [-2**63, 2**64) is a seed (negative ones wrap around), as in
    torch; so is anything int() takes (1.5, "3")."""
    default_generator._reseed(_check_seed(seed, False))
    return default_generator


def seed() -> int:
    """Seed the default generator non-deterministically; returns the seed."""
    return default_generator.seed()


def initial_seed() -> int:
    """The seed the default generator was last seeded with."""
    return default_generator.initial_seed()


def get_rng_state() -> Any:
    """The default generator's state (a uint8 tensor)."""
    return default_generator.get_state()


def set_rng_state(new_state: Any) -> None:
    """Restore the default generator's state from get_rng_state()."""
    default_generator.set_state(new_state)
