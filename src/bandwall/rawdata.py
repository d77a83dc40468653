"""Shipped TOML tables read as plain rows, without importing (or validating through) the
packages that own them: `--help` lists catalog keys as choices, and importing the catalog's
pydantic models costs more start-up time than the whole help text."""

from __future__ import annotations

import os
import tomllib
from functools import cache
from pathlib import Path
from typing import Any

from bandwall.errors import CatalogError

#: The installed package's root; data files live in `<package>/data/`.
ROOT = Path(__file__).resolve().parent


def read_tables(name: str, table: str) -> list[tuple[str, dict[str, Any]]]:
    """(origin, row) for every row of `table` in the catalog file `name`, shipped first, then
    the overlay in $BANDWALL_CATALOG_DIR."""
    paths = [ROOT / "catalog" / "data" / name]
    extra = os.environ.get("BANDWALL_CATALOG_DIR")
    if extra and (Path(extra) / name).is_file():
        paths.append(Path(extra) / name)
    rows: list[tuple[str, dict[str, Any]]] = []
    for path in paths:
        origin = (
            f"bandwall/catalog/data/{name}" if path.parent.parent == ROOT / "catalog" else str(path)
        )
        try:
            data = tomllib.loads(path.read_text(encoding="utf-8"))
        except tomllib.TOMLDecodeError as exc:
            raise CatalogError(f"{origin}: not valid TOML: {exc}") from None
        rows.extend((origin, row) for row in data.get(table, []))
    return rows


@cache
def raw_rows(package: str, name: str, table: str) -> list[dict[str, Any]]:
    """The rows of one shipped (and overlaid, for the catalog) TOML table, unvalidated: for
    listing keys where validating every entry would cost start-up time."""
    if package == "catalog":
        return [row for _, row in read_tables(name, table)]
    text = (ROOT / package / "data" / name).read_text(encoding="utf-8")
    return list(tomllib.loads(text).get(table, []))
