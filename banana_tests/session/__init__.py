"""The pytest session: options, the suite state built from them, gating, score snapshots.
Glue that turns the stages below into test cases; the pytest11 entry point is banana_tests.plugin.
"""
