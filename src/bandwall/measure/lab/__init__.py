"""An emulated cluster on one Linux machine: network namespaces, a bridge, tbf-shaped links."""

from bandwall.measure.lab.netns import Lab, lab_down, lab_run, lab_status, lab_up

__all__ = ["Lab", "lab_down", "lab_run", "lab_status", "lab_up"]
