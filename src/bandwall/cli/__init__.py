"""The `bandwall` command line (Typer). Nothing in the package imports it.

`app` is the lazy root group (`bandwall.cli.root`): each command's module is imported when that
command runs. `main` sends `bandwall doctor ...` to doctor's own light entry point (argparse,
no Typer or Pydantic at start-up: on-call and CI runs start in well under a second) before the
root is imported.
"""

from __future__ import annotations

import sys
from typing import Any


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if args[:1] == ["doctor"]:
        from bandwall.cli import doctor

        if not doctor.needs_full_cli(args[1:]):
            return doctor.main(args[1:])
    from bandwall.cli.root import main as root_main

    return root_main(args)


def __getattr__(name: str) -> Any:
    if name == "app":
        from bandwall.cli.root import app

        return app
    raise AttributeError(name)


__all__ = ["app", "main"]
