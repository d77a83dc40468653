"""The `bandwall` command line (Typer). Nothing in the package imports it.

`app` is the lazy root group: each command's module is imported when that command runs.
"""

from bandwall.cli.root import app, main

__all__ = ["app", "main"]
