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


# ---- Hypothesis profiles for the differential fuzzer (tests/test_fuzz.py) --------------
# default:  CI; the four fuzz tests together take about two minutes on a 2-core machine.
# long:     >= 20,000 programs over the four fuzz tests (--hypothesis-profile=long).
# sanitize: 1,000 programs over the four fuzz tests, for the ASan+UBSan build.
# No deadline (a program has up to 300 nodes and 2,000-input nodes); a failure prints its
# reproduction blob. default and sanitize are derandomized: CI draws the same programs every
# run, so a red run means the change broke something, never that a new draw found an old bug.
# long draws new programs every run: it is the exploration (run it, fix what it finds, add a
# regression test to tests/test_fuzz_regressions.py). Tests that set their own settings
# (test_engine.py) keep them: a profile only supplies what a test leaves unset.
import os

from hypothesis import HealthCheck, settings

_FUZZ_HEALTH = [HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much,
                HealthCheck.large_base_example]
settings.register_profile("default", deadline=None, derandomize=True, print_blob=True,
                          suppress_health_check=_FUZZ_HEALTH, max_examples=100)
# CGRAD_FUZZ_EXAMPLES=n: n programs per fuzz test in the long profile instead (a shorter
# exploration on a busy machine: about 0.1 s per program on one core)
settings.register_profile("long", settings.get_profile("default"),
                          max_examples=int(os.environ.get("CGRAD_FUZZ_EXAMPLES", 5000)),
                          derandomize=False)
settings.register_profile("sanitize", settings.get_profile("default"), max_examples=250)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "default"))
# ---- end of the hypothesis profiles ----------------------------------------------------
