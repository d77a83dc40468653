"""One error hierarchy for bandwall.

The CLI catches :class:`BandwallError`, prints one line and exits 2; the web API answers 422
with the field in ``loc``. So every error a user can cause names the request field it is about
(``field``, the schema's name) and, where there is a closed set, the valid choices::

    BandwallError
    ├── ConfigError        bad user input: unknown name, out-of-range value, malformed size
    │   └── LayoutError    a parallel layout that does not divide the cluster or does not fit
    ├── CatalogError       the shipped (or user-supplied) catalog data is invalid
    ├── BenchmarkError     a measurement failed: lost rank, timeout, missing torch
    └── LabError           the emulated cluster cannot be built or used (not root, clash)
"""

from __future__ import annotations

from collections.abc import Iterable
from enum import StrEnum
from typing import TypeVar


class BandwallError(Exception):
    """Base class of every error bandwall raises on purpose.

    ``field`` is the request field the error is about (snake_case, as in the schema and the
    JSON API) or None; ``reason`` is the message without the field. ``str()`` gives
    ``"field-name: reason"``, the form a log or a test reads.
    """

    def __init__(self, reason: str, *, field: str | None = None) -> None:
        self.field = field
        self.reason = reason
        super().__init__(f"{field.replace('_', '-')}: {reason}" if field else reason)


class ConfigError(BandwallError):
    """A user-supplied value is invalid."""


class LayoutError(ConfigError):
    """A parallel layout cannot run on the given cluster."""


class CatalogError(BandwallError):
    """Catalog data failed validation."""


class BenchmarkError(BandwallError):
    """A benchmark could not finish; what it measured is kept in the results store."""


class LabError(BandwallError):
    """The emulated cluster cannot be built, used or removed."""


def unknown_choice(field: str, value: object, choices: Iterable[str]) -> ConfigError:
    """The standard 'unknown X' error listing what is allowed."""
    allowed = ", ".join(sorted(choices))
    return ConfigError(f"unknown value {value!r}; choose one of: {allowed}", field=field)


_E = TypeVar("_E", bound=StrEnum)


def parse_choice(kind: type[_E], text: str, field: str) -> _E:
    """`text` as a member of the string enum `kind` (case and surrounding space ignored), or
    the standard 'unknown value' error for `field` listing the members."""
    try:
        return kind(text.strip().lower())
    except ValueError:
        raise unknown_choice(field, text, [m.value for m in kind]) from None
