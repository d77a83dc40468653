"""Peer tools the comparison benchmarks run against, and the extra that installs them.

They live in `bandwall[peers]`, not in `dev`: llm-analysis 0.2.2 pins an old transformers that
made a dev set-up backtrack through ~850 MB of releases. A benchmark without them prints this
hint once and leaves their columns empty.
"""

from __future__ import annotations

import importlib.util

INSTALL = "pip install -e '.[peers]'"


def available(module: str = "llm_analysis") -> bool:
    """True when the peer tool imports; else print which extra brings it."""
    if importlib.util.find_spec(module) is not None:
        return True
    print(f"{module.replace('_', '-')} is not installed: {INSTALL} (the peer columns stay n/a)")
    return False
