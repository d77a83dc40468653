"""One error hierarchy for bandwall.

The CLI catches :class:`BandwallError`, prints its message on one line and exits 2, so every
message must name the offending field and, where there is a closed set, the valid choices::

    BandwallError
    ├── ConfigError        bad user input: unknown name, out-of-range value, malformed size
    │   └── LayoutError    a parallel layout that does not divide the cluster or does not fit
    ├── CatalogError       the shipped (or user-supplied) catalog data is invalid
    ├── BenchmarkError     a measurement failed: lost rank, timeout, missing torch
    └── LabError           the emulated cluster cannot be built or used (not root, clash)
"""

from __future__ import annotations

from collections.abc import Iterable


class BandwallError(Exception):
    """Base class of every error bandwall raises on purpose."""


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
    """Build the standard 'unknown X' error listing what is allowed."""
    allowed = ", ".join(sorted(choices))
    return ConfigError(f"{field}: unknown value {value!r}; choose one of: {allowed}")
