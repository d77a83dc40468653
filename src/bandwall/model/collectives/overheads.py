"""Per-call overheads NCCL's tuner leaves out: what nccl-tests measures on top of NCCL's own
latency model for a message that moves almost nothing.

NCCL's latency constants (tuning.cc) model the algorithm's steps; a call also pays the host
enqueue and kernel launch, and across nodes the proxy thread's progress on the network
(posting, polling completions, and on EFA the libfabric provider's work). These constants
are fitted, per GPU generation and per network transport family, on the fit third of
`measure/calibrate/data/collective_small_msgs.csv` (published nccl-tests curves, each row
with its source; rows with sha256(id) % 3 == 0) by
:func:`bandwall.measure.calibrate.collective_fit.fit_overheads`; the other two thirds are held
out (docs/network.md lists both errors). A generation or transport with no published curve
in the set has no overhead beyond NCCL's model.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from bandwall.model.topology import GpuArch, Topology

FloatArray = npt.NDArray[np.float64]

#: Host enqueue + kernel launch per call, µs, by GPU generation (fitted; see module doc).
LAUNCH_US: dict[GpuArch, float] = {
    GpuArch.VOLTA: 0.0,
    GpuArch.AMPERE: 0.0,
    GpuArch.HOPPER: 0.0,
    GpuArch.BLACKWELL: 0.0,
}
#: Proxy progress per call across nodes, µs, by scale-out transport (fitted; see module doc).
NETWORK_CALL_US: dict[str, float] = {
    "efa": 0.0,
}


def per_call_s(topo: Topology, multi_node: npt.ArrayLike) -> FloatArray:
    """The overhead one call of a collective pays on `topo`, per element (multi_node: the
    group spans nodes)."""
    if topo.backend != "nccl":
        return np.zeros(np.shape(multi_node))
    launch = LAUNCH_US.get(topo.arch, 0.0)
    out = topo.scale_out
    net = NETWORK_CALL_US.get(out.transport, 0.0) if out is not None else 0.0
    return np.asarray((launch + np.where(multi_node, net, 0.0)) * 1e-6, dtype=np.float64)
