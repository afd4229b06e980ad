"""banana-tests: put no-reference IQA metrics on trial against iterative-editing degradation."""

__version__ = "0.1.0"
