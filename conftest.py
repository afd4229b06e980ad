"""Root conftest: shared by the suite (banana_tests/) and the project's own tests (tests/)."""

pytest_plugins = ["pytester"]
