"""banana-tests: put no-reference IQA metrics on trial against iterative-editing degradation."""


def __getattr__(name: str) -> str:
    """`__version__`, read from the installed package's metadata: pyproject.toml is its one source."""
    if name == "__version__":
        from importlib.metadata import version

        return version("banana-tests")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
