"""An emulated cluster on one Linux machine: network namespaces, tbf-shaped links, and a
userspace delay line for link latency and jitter."""

from bandwall.measure.lab.netns import (
    Lab,
    check_name,
    lab_down,
    lab_down_all,
    lab_run,
    lab_status,
    lab_up,
)

__all__ = ["Lab", "check_name", "lab_down", "lab_down_all", "lab_run", "lab_status", "lab_up"]
