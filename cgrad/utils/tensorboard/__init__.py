"""cgrad.utils.tensorboard: torch.utils.tensorboard's ``SummaryWriter`` for cgrad tensors.

A thin adapter over tensorboardX's writer (an optional extra: ``pip install tensorboardX``
or ``pip install "cgrad[tensorboard]"``), which writes TensorBoard's event files without
TensorFlow or torch. Every ``add_*`` method takes what torch's takes, with cgrad tensors
(detached and handed over as NumPy arrays, nested in dicts, lists and tuples too), NumPy
arrays and Python numbers::

    from cgrad.utils.tensorboard import SummaryWriter
    writer = SummaryWriter()                      # runs/<date>_<host>, as torch
    writer.add_scalar("loss/train", loss, step)   # a 0-d cgrad tensor is fine
    writer.add_histogram("fc1.weight", model.fc1.weight, step)
    writer.close()

As torch's module, importing it without the writer installed raises ImportError, saying
what to install. ``add_graph`` (torch traces the model with TorchScript) and
``add_onnx_graph`` have no cgrad counterpart and raise NotImplementedError.
"""
from __future__ import annotations

import functools
import time

try:
    import tensorboardX as _tbx
except ImportError as e:        # pragma: no cover - exercised in a subprocess by the tests
    raise ImportError(
        "cgrad.utils.tensorboard needs tensorboardX, the TensorBoard event writer that "
        "needs neither TensorFlow nor torch: pip install tensorboardX "
        "(or pip install \"cgrad[tensorboard]\")") from e

from cgrad._C import TensorBase

__all__ = ["SummaryWriter"]


def _plain(v):
    """cgrad tensors (also inside dicts, lists and tuples) as NumPy arrays; 0-d ones as
    Python numbers where the writer wants a number."""
    if isinstance(v, TensorBase):
        if v.is_sparse:
            v = v.to_dense()
        a = v.detach().numpy()
        return a.item() if a.ndim == 0 else a
    if isinstance(v, dict):
        return {k: _plain(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)) and not hasattr(v, "_fields"):
        return type(v)(_plain(x) for x in v)
    return v


def _converting(name):
    base = getattr(_tbx.SummaryWriter, name)

    @functools.wraps(base)
    def method(self, *args, **kwargs):
        return base(self, *[_plain(a) for a in args],
                    **{k: _plain(v) for k, v in kwargs.items()})
    return method


class SummaryWriter(_tbx.SummaryWriter):
    """Writes entries to event files in ``log_dir`` for TensorBoard (torch's signature:
    ``log_dir=None`` means ``runs/CURRENT_DATETIME_HOSTNAME``, ``comment`` is appended to
    that default, ``purge_step``, ``max_queue``, ``flush_secs``, ``filename_suffix``)."""

    def __init__(self, log_dir=None, comment="", purge_step=None, max_queue=10,
                 flush_secs=120, filename_suffix=""):
        super().__init__(logdir=log_dir, comment=comment, purge_step=purge_step,
                         max_queue=max_queue, flush_secs=flush_secs,
                         filename_suffix=filename_suffix)

    def get_logdir(self):
        """The directory the event files are written to."""
        return self.logdir

    def add_scalars(self, main_tag, tag_scalar_dict, global_step=None, walltime=None):
        """Several scalars in one plot: each key in its own run directory named as torch
        names it (``<log_dir>/<main_tag with / as _>_<key>``; tensorboardX would nest
        ``<main_tag>/<key>``, so runs logged by torch and by cgrad would not line up)."""
        from tensorboardX.summary import scalar
        from tensorboardX.writer import FileWriter
        walltime = time.time() if walltime is None else walltime
        fw_logdir = self._get_file_writer().get_logdir()
        for tag, value in tag_scalar_dict.items():
            fw_tag = fw_logdir + "/" + main_tag.replace("/", "_") + "_" + tag
            fw = self.all_writers.get(fw_tag)
            if fw is None:
                fw = FileWriter(logdir=fw_tag, max_queue=self._max_queue,
                                flush_secs=self._flush_secs,
                                filename_suffix=self._filename_suffix)
                self.all_writers[fw_tag] = fw
            fw.add_summary(scalar(main_tag, _plain(value)), global_step, walltime)

    def add_graph(self, model, input_to_model=None, verbose=False, use_strict_trace=True):
        raise NotImplementedError(
            "SummaryWriter.add_graph: torch traces the model with TorchScript, which cgrad "
            "has no counterpart of; log scalars, histograms and images instead")

    def add_onnx_graph(self, *args, **kwargs):
        raise NotImplementedError("SummaryWriter.add_onnx_graph: cgrad does not export ONNX")

    def add_openvino_graph(self, *args, **kwargs):
        raise NotImplementedError("SummaryWriter.add_openvino_graph: not supported by cgrad")

    def __repr__(self):
        return f"<cgrad.utils.tensorboard.SummaryWriter log_dir={self.logdir!r}>"


for _name in dir(_tbx.SummaryWriter):
    if (_name.startswith("add_") and _name not in SummaryWriter.__dict__
            and callable(getattr(_tbx.SummaryWriter, _name))):
        setattr(SummaryWriter, _name, _converting(_name))
del _name
