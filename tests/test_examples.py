"""The examples run and reach their published figures (skipped without their extras)."""
from __future__ import annotations

import os
import runpy
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _load(name):
    return runpy.run_path(os.path.join(ROOT, "examples", name), run_name="example")


def test_custom_function_example(capsys):
    runpy.run_path(os.path.join(ROOT, "examples", "custom_function.py"), run_name="__main__")
    out = capsys.readouterr().out
    assert "tensor([2.], grad_fn=<MyFunctionBackward>)" in out


def test_mlp_on_digits_reaches_95_percent(capsys):
    pytest.importorskip("sklearn")
    acc = _load("mlp.py")["main"]([])
    assert acc >= 0.95
    out = capsys.readouterr().out
    assert "epoch  30" in out and "test accuracy" in out


def test_cnn_on_digits_reaches_97_percent(capsys):
    pytest.importorskip("sklearn")
    acc = _load("digits_cnn.py")["main"]([])
    assert acc >= 0.97
    out = capsys.readouterr().out
    assert "epoch  15" in out and "MaxPool2d" in out and "BatchNorm2d" in out


def test_char_lstm_learns_the_text(capsys):
    loss = _load("char_lstm.py")["main"](["--steps", "150"])
    assert loss < 1.0               # from ln(31) = 3.4 at the start; 0.09 after 400 steps
    out = capsys.readouterr().out
    assert "LSTM(32, 128, num_layers=2, batch_first=True)" in out
    assert "'Beautiful is better than" in out
