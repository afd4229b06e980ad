"""A suite run without pytest: its options read once into typed settings, the case planning and
this process's scoring (suite), the `--metric` import, scoring a selection, the run's facts and
the machine it runs on. The api and the commands use it; banana_tests.session turns it into
pytest's test cases. No module here imports pytest (tests/test_layout.py).
"""
