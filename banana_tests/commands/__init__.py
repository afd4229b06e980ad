"""The `banana-tests` subcommands: a module per subcommand, or per few of one concept."""
