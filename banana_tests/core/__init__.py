"""A suite run without pytest: its options read once into typed settings, the case planning,
the scoring of a selection, the run's facts and the units `--shard` deals. The api and the
commands use it; banana_tests.session turns it into pytest's test cases. No module here imports
pytest (tests/test_layout.py).
"""
