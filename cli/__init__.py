"""The `primacy` command line: one thin module per command over the packages below."""
