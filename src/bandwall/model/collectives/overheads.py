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
in the set has no overhead beyond NCCL's model: RoCE and sockets across nodes.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from bandwall.model.topology import GpuArch, Topology

FloatArray = npt.NDArray[np.float64]

#: Host enqueue + kernel launch per call, µs, by GPU generation (fitted; see module doc).
#: Ampere from A100 curves (Azure ND A100 v4, stas00/ml-engineering, AWS p4de), Hopper from
#: H100/H200/H20 (Azure ND H100/H200 v5, stas00, AWS p5, DeepEP#303, the 2-8 node NDR curves
#: of nccl-tests#309), Blackwell from B200 curves timed through torch.distributed (stas00),
#: less that loop's own cost per call (HARNESS_CALL_US). Volta has no curve in the set.
LAUNCH_US: dict[GpuArch, float] = {
    GpuArch.VOLTA: 0.0,
    GpuArch.AMPERE: 8.5,
    GpuArch.HOPPER: 1.7,
    GpuArch.BLACKWELL: 19.0,
}
#: What a curve's timing loop adds per call beyond nccl-tests' own, µs, by tool (fitted with
#: the rest; stas00's all_reduce_bench.py times each call from Python through
#: torch.distributed, and its H200 curve beside the nccl-tests H200/H100 curves separates that
#: from Hopper's launch). A measurement convention: the fit converts those curves with it and
#: the model never charges it (it prices calls as nccl-tests times them).
HARNESS_CALL_US: dict[str, float] = {"torch.distributed": 3.3}
#: Proxy progress per call across nodes, µs, by scale-out transport (fitted; see module doc).
#: InfiniBand (nccl-tests#309, 2-8 nodes of 8 H100 on NDR) fits to none beyond NCCL's model.
NETWORK_CALL_US: dict[str, float] = {
    "efa": 13.8,
    "infiniband": 0.0,
}
#: Pipeline fill per channel, bytes, for a group across nodes: NCCL moves each channel's data
#: in chunks through NCCL_STEPS = 8 buffer slots (src/include/device.h), so a message reaches
#: the algorithm's bandwidth only after the first chunks have filled the pipeline; the
#: bandwidth term is charged min(size, channels × this) more bytes (fitted; see module doc).
PIPELINE_FILL_BYTES = 1_245_184.0
#: The same within one node (NVLink/NVSwitch or PCIe P2P): a step there completes in about a
#: microsecond rather than a network round trip plus the proxy's turn, so the pipeline fills
#: in fewer bytes at the link's rate (fitted separately on the single-node rows; see module
#: doc).
PIPELINE_FILL_BYTES_IN_NODE = 458_752.0


def measured(topo: Topology) -> bool:
    """A topology with a calibrated link (`bandwall calibrate` writes `measured:NAME`): its
    fitted α and β already hold the per-call overheads and the pipeline fill of the run it
    was fitted on, so they are not charged again (nor in the fit's own design)."""
    links = (topo.scale_up, topo.scale_out, topo.wan)
    return any(link is not None and link.name.startswith("measured:") for link in links)


def per_call_s(topo: Topology, multi_node: npt.ArrayLike) -> FloatArray:
    """The overhead one call of a collective pays on `topo`, per element (multi_node: the
    group spans nodes)."""
    if topo.backend != "nccl" or measured(topo):
        return np.zeros(np.shape(multi_node))
    launch = LAUNCH_US.get(topo.arch, 0.0)
    out = topo.scale_out
    if out is None:
        net = 0.0
    elif out.call_overhead_s is not None:  # the fabric's own (catalog call_overhead_us)
        net = out.call_overhead_s / 1e-6
    else:
        net = NETWORK_CALL_US.get(out.transport, 0.0)
    return np.asarray((launch + np.where(multi_node, net, 0.0)) * 1e-6, dtype=np.float64)
