"""The DataLoader's helpers, at torch's paths (``torch.utils.data._utils.collate`` is where
users find ``default_collate_fn_map`` to extend ``default_collate``)."""
from cgrad.utils.data._utils import collate, fetch, worker  # noqa: F401
from cgrad.utils.data._utils.worker import MP_STATUS_CHECK_INTERVAL  # noqa: F401

__all__ = ["collate", "fetch", "worker"]
