"""cgrad.random: torch.random's functions over cgrad's default generator
(Note [Random streams] in cgrad/_generator.py)."""
from __future__ import annotations

import contextlib

from cgrad._generator import (default_generator, get_rng_state, initial_seed, manual_seed,
                              seed, set_rng_state)

__all__ = ["manual_seed", "seed", "initial_seed", "get_rng_state", "set_rng_state",
           "fork_rng", "default_generator"]


@contextlib.contextmanager
def fork_rng(devices=None, enabled=True, _caller="fork_rng", _devices_kw="devices",
             device_type="cuda"):
    """Run the block and then restore the default generator's state (with enabled=True)."""
    if not enabled:
        yield
        return
    state = get_rng_state()
    try:
        yield
    finally:
        set_rng_state(state)
