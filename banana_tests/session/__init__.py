"""The pytest glue over the pytest-free banana_tests.core: which runs are the suite's, the run's
state, a metric's `Scorer`, the fixtures' work, what the suite does to a collection (baseline
gating, `--shard`, the families' plugins), the matrix reporter. The pytest11 entry point is
banana_tests.plugin.
"""
