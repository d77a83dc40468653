"""The `bandwall` command line (Typer). Nothing in the package imports it.

`app` is the lazy root group: each command's module is imported when that command runs;
`main` sends `bandwall doctor ...` to doctor's own light entry point (argparse, no Typer or
Pydantic at start-up: on-call and CI runs start in well under a second).
"""

from bandwall.cli.root import app, main

__all__ = ["app", "main"]
