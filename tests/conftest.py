"""pytest configuration for cgrad's tests."""

# ---- begin: the torch-oracle skip summary ------------------------------------------------
# torch is an optional oracle (tests call pytest.importorskip("torch")). Without it a third
# of the tests skip, which pytest would only show as an "s" among the dots: say it in one
# line at the end of the run, with the command that brings the oracle in.
TORCH_VERSION = "2.13.0"


def _skipped_for_torch(report):
    reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
    return "'torch'" in reason or "No module named 'torch" in reason


def pytest_terminal_summary(terminalreporter):
    n = sum(map(_skipped_for_torch, terminalreporter.stats.get("skipped", [])))
    if n:
        terminalreporter.write_line(
            f"{n} tests need torch {TORCH_VERSION.rsplit('.', 1)[0]} as an oracle and were "
            f"skipped: pip install torch=={TORCH_VERSION}", yellow=True, bold=True)
# ---- end: the torch-oracle skip summary --------------------------------------------------
