# ---- Hypothesis profiles for the differential fuzzer (tests/test_fuzz.py) --------------
# default:  CI; the four fuzz tests together take about two minutes on a 2-core machine.
# long:     >= 20,000 programs over the four fuzz tests (--hypothesis-profile=long).
# sanitize: 1,000 programs over the four fuzz tests, for the ASan+UBSan build.
# No deadline (a program has up to 300 nodes and 2,000-input nodes); seeds stay random and a
# failure prints its reproduction blob. Tests that set their own settings (test_engine.py)
# keep them: a profile only supplies what a test leaves unset.
import os

from hypothesis import HealthCheck, settings

_FUZZ_HEALTH = [HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much,
                HealthCheck.large_base_example]
settings.register_profile("default", deadline=None, derandomize=False, print_blob=True,
                          suppress_health_check=_FUZZ_HEALTH, max_examples=100)
settings.register_profile("long", settings.get_profile("default"), max_examples=5000)
settings.register_profile("sanitize", settings.get_profile("default"), max_examples=250)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "default"))
# ---- end of the hypothesis profiles ----------------------------------------------------
