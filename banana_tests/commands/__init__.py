"""The `banana-tests` subcommands, one module each."""
