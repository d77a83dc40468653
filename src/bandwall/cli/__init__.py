"""The `bandwall` command line (Typer). Nothing in the package imports it."""

from bandwall.cli.app import app, main

__all__ = ["app", "main"]
