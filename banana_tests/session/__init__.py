"""The pytest glue: which runs are the suite's, the option aliases, the fixtures' work, the
matrix reporter, gating, score snapshots and the collection hooks, over the pytest-free
banana_tests.core. The pytest11 entry point is banana_tests.plugin.
"""
