"""Shipped TOML tables read as plain rows, without importing (or validating through) the
packages that own them: `--help` lists catalog keys as choices, and importing the catalog's
pydantic models costs more start-up time than the whole help text."""

from __future__ import annotations

import os
import stat
import tomllib
from functools import cache
from pathlib import Path
from typing import Any

from bandwall.errors import CatalogError

#: The installed package's root; data files live in `<package>/data/`.
ROOT = Path(__file__).resolve().parent
#: Largest catalog overlay file read: the shipped catalog is a few dozen KiB.
MAX_OVERLAY_BYTES = 8 << 20


def _overlay_text(path: Path) -> str:
    """An overlay file's text: a regular file, bounded, strict UTF-8, or one CatalogError
    naming it (the commands that need the catalog print it; `--help` never reads it)."""
    where = f"$BANDWALL_CATALOG_DIR/{path.name} ({str(path)!r})"
    try:
        st = path.stat()
        if not stat.S_ISREG(st.st_mode):
            raise CatalogError(f"{where}: not a regular file")
        if st.st_size > MAX_OVERLAY_BYTES:
            raise CatalogError(f"{where}: over {MAX_OVERLAY_BYTES >> 20} MiB")
        with path.open("rb") as fh:
            data = fh.read(MAX_OVERLAY_BYTES + 1)
    except OSError as exc:
        raise CatalogError(f"{where}: cannot read: {exc.strerror}") from None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise CatalogError(
            f"{where}: not UTF-8 text (byte {exc.start:,}); save it as UTF-8 TOML"
        ) from None


def _rows(origin: str, data: dict[str, Any], table: str) -> list[dict[str, Any]]:
    rows = data.get(table, [])
    if not isinstance(rows, list) or not all(isinstance(r, dict) for r in rows):
        raise CatalogError(f"{origin}: [[{table}]] must be an array of tables")
    return rows


def _overlay_present(path: Path) -> bool:
    """Whether the overlay folder has this file; a path the kernel refuses (a name over 255
    bytes: ENAMETOOLONG, which `is_file()` raises) is the overlay's error, not a missing file."""
    try:
        return path.is_file()
    except OSError as exc:
        shown = str(path) if len(str(path)) <= 60 else str(path)[:57] + "..."
        raise CatalogError(f"$BANDWALL_CATALOG_DIR ({shown!r}): {exc.strerror}") from None


def read_tables(name: str, table: str) -> list[tuple[str, dict[str, Any]]]:
    """(origin, row) for every row of `table` in the catalog file `name`, shipped first, then
    the overlay in $BANDWALL_CATALOG_DIR."""
    paths = [ROOT / "catalog" / "data" / name]
    extra = os.environ.get("BANDWALL_CATALOG_DIR")
    if extra and _overlay_present(Path(extra) / name):
        paths.append(Path(extra) / name)
    rows: list[tuple[str, dict[str, Any]]] = []
    for path in paths:
        shipped = path.parent.parent == ROOT / "catalog"
        origin = f"bandwall/catalog/data/{name}" if shipped else str(path)
        data = _shipped(name) if shipped else _parse(origin, _overlay_text(path))
        rows.extend((origin, row) for row in _rows(origin, data, table))
    return rows


def _parse(origin: str, text: str) -> dict[str, Any]:
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise CatalogError(f"{origin}: not valid TOML: {exc}") from None


@cache
def _shipped(name: str) -> dict[str, Any]:
    """A shipped catalog file, parsed once per process: power.toml alone holds four tables,
    each read by its own caller (five parses of it made a fifth of `plan`'s TOML time)."""
    path = ROOT / "catalog" / "data" / name
    return _parse(f"bandwall/catalog/data/{name}", path.read_text(encoding="utf-8"))


@cache
def raw_rows(package: str, name: str, table: str) -> list[dict[str, Any]]:
    """The rows of one shipped (and overlaid, for the catalog) TOML table, unvalidated: for
    listing keys where validating every entry would cost start-up time."""
    if package == "catalog":
        return [row for _, row in read_tables(name, table)]
    text = (ROOT / package / "data" / name).read_text(encoding="utf-8")
    return list(tomllib.loads(text).get(table, []))
