"""One small function per rule: read the joined job, return the evidence (`Hit`s).

A detector never words the whole finding (the `Rule` does); it decides whether the rule
applies, how sure the evidence makes it (`Confidence`), quotes the lines, and adds the
case-specific part of the reason. `DETECTORS` maps each rule code to its function; a test
checks that every rule has one and every detector a rule.

Where one message has several possible causes (an IB completion error 12 is a dead link, an
unrouted RoCE GID or NICs on different rails), each cause gets its own hit with the confidence
the evidence supports, so the ranking can say which is most likely and the others still show.
"""

from __future__ import annotations

import dataclasses
import itertools
import re
from collections import Counter
from collections.abc import Callable

from bandwall.measure.doctor.evidence import Confidence, Hit, Line, first
from bandwall.measure.doctor.job import Job
from bandwall.measure.doctor.messages import Message, lookup
from bandwall.measure.doctor.nccl_log import TORCH_COLLECTIVE_CHECKS, NcclLog
from bandwall.measure.doctor.rules import BY_CODE

Detector = Callable[[Job], list[Hit]]
DETECTORS: dict[str, Detector] = {}

CERTAIN, LIKELY, POSSIBLE = Confidence.CERTAIN, Confidence.LIKELY, Confidence.POSSIBLE
#: Interfaces that never reach another host: loopback, container and VM bridges, CNI tunnels.
VIRTUAL_IFACE = re.compile(
    r"^(lo|docker\d*|virbr\d*|br-[0-9a-f]+|veth\w*|cali\w*|tunl\d*|flannel\S*"
    r"|cni\d*|cilium\w*|lxc\w*|vnet\d*|ip6tnl\d*)$"
)
IPOIB_IFACE = re.compile(r"^(ib\d\S*|ibs\w*|ibp\w*)$")
#: NCCL's GPU-NIC path types that cross the CPU (src/graph/topo.h PATH_PHB and above).
FAR_PATHS = ("PHB", "NODE", "SYS")
PATH_ORDER = ("LOC", "NVL", "NVB", "C2C", "PIX", "PXB", "PXN", "P2C", "PHB", "NODE", "SYS")
#: GPUs of instance types where EFA carries GPUDirect RDMA (p4d and later).
EFA_GDR_GPUS = ("A100-SXM-80GB", "H100-SXM", "H200", "B200", "GB200", "B300", "GB300")


def detector(code: str) -> Callable[[Detector], Detector]:
    """Register `fn` as the detector of rule `code` (which must exist)."""

    def wrap(fn: Detector) -> Detector:
        if code not in BY_CODE:
            raise KeyError(f"detector for unknown rule {code!r}")
        DETECTORS[code] = fn
        return fn

    return wrap


def _lines(job: Job, attr: str) -> list[Line]:
    return list(job.all(attr))


def _env(job: Job, name: str) -> tuple[set[str], list[Line]]:
    values: set[str] = set()
    lines: list[Line] = []
    for log in job.logs:
        values |= log.env_values(name)
        lines += log.env_lines(name)
    return values, lines


def _echoed(job: Job, name: str) -> bool:
    return any(name in log.env for log in job.logs)


# --- launch, resources, versions ----------------------------------------------------------------


@detector("duplicate_gpu")
def _duplicate_gpu(job: Job) -> list[Hit]:
    lines = _lines(job, "duplicate_gpu")
    if not lines:
        return []
    m = re.search(r"rank (\d+) and rank (\d+) both on CUDA device (\w+)", lines[0].text)
    reason = (
        f"NCCL found rank {m.group(1)} and rank {m.group(2)} on the same GPU (device {m.group(3)})"
        if m
        else "NCCL found several ranks on the same GPU"
    )
    return [Hit("duplicate_gpu", first(lines), reason, CERTAIN)]


@detector("tests_without_mpi")
def _tests_without_mpi(job: Job) -> list[Hit]:
    solo = [
        (t, n)
        for t in job.tests
        if (n := getattr(getattr(t, "block", None), "meta", {}).get("solo_processes"))
    ]
    lines = [b.line for b, _ in solo if b.line is not None]
    if solo and lines:
        return [
            Hit(
                "tests_without_mpi",
                first(lines, 2),
                f"{solo[0][1]} processes each report itself as rank 0 of its own run and no "
                "rank above 0 appears: they never formed one communicator",
                LIKELY,
                missing="whether one process per GPU was meant (mpirun/srun -n N)",
            )
        ]
    heads = max((log.concurrent_test_runs for log in job.logs), key=len, default=[])
    if not heads:
        return _one_rank_runs(job)
    return [
        Hit(
            "tests_without_mpi",
            heads[:2],
            f"the nccl-tests run header ('# nThread ... nGpus ...') appears {len(heads)} times "
            "before any result: with MPI only MPI rank 0 prints it, so each of these processes "
            "ran as rank 0 of its own job",
            LIKELY,
            missing="the '# Rank' lines of every process (an MPI run lists all ranks once)",
        )
    ]


def _one_rank_runs(job: Job) -> list[Hit]:
    """Reduction rows whose busbw is 0.00 beside a nonzero algbw (one rank per communicator),
    with sizes that start over within one output: several processes each ran its own
    one-rank job and printed into the same log (NVIDIA/nccl-tests#294: built without MPI=1
    and started under mpirun). One process on one GPU prints the same zeros once, in order:
    that is a one-GPU run, not this."""
    for log in job.logs:
        rows = log.one_rank_rows
        if len(rows) < 4 or log.other_rows:
            continue
        sizes = [size for size, _ in rows]
        restarts = sum(1 for a, b in itertools.pairwise(sizes) if b < a)
        if not restarts:
            continue
        return [
            Hit(
                "tests_without_mpi",
                first([ln for _, ln in rows], 2),
                f"every reduction row has busbw 0.00 beside a nonzero algbw (each communicator "
                f"holds one rank) and the sizes start over {restarts:,} times: several "
                "processes each ran alone and printed into one log",
                LIKELY,
                missing="the '# Rank' lines of every process (an MPI run lists all ranks once)",
            )
        ]
    return []


@detector("shm_space")
def _shm_space(job: Job) -> list[Hit]:
    lines = _lines(job, "shm_space")
    bus = _lines(job, "bus_errors")
    if not lines and bus and _mentions_nccl(job):
        return [
            Hit(
                "shm_space",
                first(bus),
                "a rank died on SIGBUS (Bus error) inside NCCL: a page of its /dev/shm segment "
                "could not be backed, as in a container with Docker's default 64 MB /dev/shm "
                "(NCCL's troubleshooting guide)",
                LIKELY,
                missing="`df -h /dev/shm` inside the container",
            )
        ]
    bare = _bare_system_error(job)
    if not lines and bare:
        # the other common ncclSystemError: a container's 64 MB /dev/shm (NCCL's
        # troubleshooting guide, Docker: --shm-size or --ipc=host)
        return [
            Hit(
                "shm_space",
                first(bare, 2),
                "a system call failed (ncclSystemError) and no NCCL line says which: in a "
                "container, Docker's default 64 MB /dev/shm is too small for NCCL's "
                "shared-memory buffers",
                POSSIBLE,
                missing="`df -h /dev/shm` inside the container, or the NCCL WARN line "
                "(NCCL_DEBUG=WARN)",
            )
        ]
    if not lines:
        return []
    size = re.search(r"size (\d+)", " ".join(ln.text for ln in lines))
    reason = "NCCL could not create its shared-memory segment in /dev/shm" + (
        f" ({int(size.group(1)) / 2**20:,.1f} MiB)" if size else ""
    )
    return [Hit("shm_space", first(lines), reason, CERTAIN)]


@detector("shm_not_shared")
def _shm_not_shared(job: Job) -> list[Hit]:
    # shmutils.cc prints strerror and errno: 'error: No such file or directory (2)'
    gone = [ln for ln in _lines(job, "shm_other") if "No such file or directory" in ln.text]
    if not gone:
        return []
    return [
        Hit(
            "shm_not_shared",
            first(gone),
            "a rank cannot find the /dev/shm segment its peer on the same host created: the "
            "two do not see the same /dev/shm (separate containers or pods)",
            LIKELY,
            missing="how the ranks of this host are placed (one container, or several)",
        )
    ]


def _mentions_nccl(job: Job) -> bool:
    """Whether the input shows NCCL at work (its lines, its library in a backtrace)."""
    return any(log.versions or log.records or log.nccl_frames for log in job.logs) or bool(
        job.tests
    )


@detector("driver_too_old")
def _driver_too_old(job: Job) -> list[Hit]:
    lines = _lines(job, "driver_old")
    if not lines:
        return []
    return [
        Hit(
            "driver_too_old",
            first(lines),
            "CUDA refuses to start: the driver is older than the runtime",
            CERTAIN,
        )
    ]


#: What the common Xids mean and NVIDIA's catalog's first action (docs.nvidia.com/deploy/
#: xid-errors); True: hardware or driver (drain, reset, service), False: the application's.
XIDS: dict[int, tuple[str, bool]] = {
    13: ("graphics engine exception: a kernel faulted (out-of-range access)", False),
    31: ("GPU memory page fault: a kernel used an invalid address", False),
    43: ("GPU stopped processing the channel (the application's kernel)", False),
    45: ("preemptive cleanup after an earlier error or a killed process", False),
    48: ("double-bit ECC error in GPU memory: reset the GPU", True),
    63: ("ECC page retirement or row remapping recorded: reset the GPU to activate it", True),
    64: ("ECC page retirement or row remapping failed: the GPU needs service", True),
    74: ("NVLink error: reset the GPU; if it repeats, check the NVLink/NVSwitch path", True),
    79: ("the GPU has fallen off the bus (PCIe, power or thermals): reboot, then service", True),
    92: ("high single-bit ECC error rate", True),
    94: ("contained ECC error: the affected application must restart", False),
    95: ("uncontained ECC error: reset the GPU", True),
    119: ("GSP firmware RPC timeout: reset the GPU or reboot; update the driver", True),
    120: ("GSP firmware error: reset the GPU or reboot; update the driver", True),
}


@detector("gpu_xid")
def _gpu_xid(job: Job) -> list[Hit]:
    found = job.all("xids")
    ecc = [ln for _, msg, _, ln in job.all("cuda_failures") if "uncorrectable ECC" in msg]
    if not found and ecc:
        return [
            Hit(
                "gpu_xid",
                first(ecc),
                "CUDA reports an uncorrectable ECC error: the GPU's memory failed (the kernel "
                "log holds its Xid, 48, 94 or 95); drain the node and reset the GPU",
                CERTAIN,
                missing="`dmesg -T | grep -i xid` and `nvidia-smi -q -d ECC` on that node",
            )
        ]
    if not found:
        return []
    hardware = [(x, ln) for x, ln in found if XIDS.get(x, ("", True))[1]]
    x, _ = (hardware or found)[0]
    meaning = XIDS.get(x, ("see NVIDIA's Xid catalog", True))[0]
    others = sorted({n for n, _ in found} - {x})
    return [
        Hit(
            "gpu_xid",
            first([ln for _, ln in hardware or found], 3),
            f"Xid {x}: {meaning}"
            + (f" (also Xid {', '.join(map(str, others))})" if others else ""),
            CERTAIN,
            severity=None if hardware else "medium",
        )
    ]


@detector("driver_unusable")
def _driver_unusable(job: Job) -> list[Hit]:
    lines = _lines(job, "driver_unusable")
    if not lines:
        return []
    text = " ".join(ln.text for ln in lines)
    reason = (
        "NVML's user-space library does not match the loaded kernel module (a driver "
        "upgrade without a reboot, or driver libraries inside the image)"
        if "Driver/library version mismatch" in text
        else "no GPU driver is usable where the job runs (libcuda/NVML not found)"
    )
    if all("Failed to find CUDA library" in ln.text for ln in lines) and _went_on(job, lines):
        # cudawrap.cc's dlopen of libcuda from NCCL_CUDA_PATH failed, yet NCCL printed its
        # version or picked a network afterwards: it ran on the runtime's driver
        return [
            Hit(
                "driver_unusable",
                first(lines),
                "NCCL could not load libcuda from NCCL_CUDA_PATH, but the log goes on past it "
                "(version, network selection): NCCL used the driver the CUDA runtime loaded, "
                "so this is not what stopped the job",
                POSSIBLE,
                severity="info",
            )
        ]
    return [Hit("driver_unusable", first(lines), reason, CERTAIN)]


def _went_on(job: Job, lines: list[Line]) -> bool:
    """Whether a log shows NCCL initialising after the last of `lines` (its version banner or
    a network chosen later in the same file)."""
    last = max(ln.number for ln in lines)
    for log in job.logs:
        if log.source != lines[-1].source:
            continue
        later = [ln for found in log.versions.values() for ln in found]
        later += [ln for _, ln in log.networks]
        if any(ln.number > last for ln in later):
            return True
    return False


@detector("port_in_use")
def _port_in_use(job: Job) -> list[Hit]:
    lines = _lines(job, "port_in_use")
    if not lines:
        return []
    port = re.search(r"(?:\]|\d):(\d{2,5})\b", " ".join(ln.text for ln in lines))
    fatal = any(
        re.search(r"failed to listen on any|Error|RuntimeError|^E\b|\[E ", ln.text) for ln in lines
    )
    return [
        Hit(
            "port_in_use",
            first(lines, 2),
            "the rendezvous could not bind its port"
            + (f" {port.group(1)}" if port else "")
            + ": another process already listens on it",
            CERTAIN if fatal else POSSIBLE,
            severity=None if fatal else "low",
            missing="" if fatal else "whether the job then failed (the error after this line)",
        )
    ]


@detector("mixed_versions")
def _mixed_versions(job: Job) -> list[Hit]:
    versions: dict[str, list[Line]] = {}
    for log in job.logs:
        for v, lines in log.versions.items():
            versions.setdefault(v, []).extend(lines)
    if len(versions) > 1:
        desc = "; ".join(
            f"{v} on {', '.join(sorted({ln.host or ln.source for ln in lines}))}"
            for v, lines in sorted(versions.items())
        )
        lines = [ls[0] for ls in versions.values()]
        return [Hit("mixed_versions", lines, f"the job's lines show NCCL {desc}", CERTAIN)]
    symbol = _lines(job, "nccl_symbol_missing")
    if symbol:
        return [
            Hit(
                "mixed_versions",
                first(symbol),
                "the process loaded a libnccl older than the one its framework was built "
                "against (an NCCL function it calls is missing): two NCCL installs",
                CERTAIN,
            )
        ]
    family = [ln for k, ln in job.all("iface_errors") if k == "family"]
    wrongtype = [
        ln for k, ln in job.all("socket_errors") if k == "wrongtype" and not _net_types_crossed(ln)
    ]
    if family or wrongtype:
        return [
            Hit(
                "mixed_versions",
                first(family + wrongtype, 2),
                "bootstrap read a malformed message from a peer (a garbage address family or "
                "socket type): a peer running another NCCL version sends that",
                POSSIBLE,
                missing="the 'NCCL version' line of one rank on every node",
            )
        ]
    return []


def _net_types_crossed(line: Line) -> bool:
    """socketFinalizeAccept's 'wrong type A != B' between NET/Socket (3) and NET/IB (4):
    NCCL's socket types (src/include/socket.h ncclSocketType: 1 bootstrap, 2 proxy, 3 net
    socket, 4 net IB, 5 RAS). Two ranks on different transports, not a malformed message."""
    m = re.search(r"wrong type (\d+) != (\d+)", line.text)
    return m is not None and {m.group(1), m.group(2)} == {"3", "4"}


@detector("gpu_memory")
def _gpu_memory(job: Job) -> list[Hit]:
    oom = [ln for code, msg, _, ln in job.all("cuda_failures") if "out of memory" in msg]
    oom += [ln for ln in job.all("warnings") if re.search(r"Failed to CUDA (?:c|m)alloc", ln.text)]
    torch_oom = [
        ln
        for _, msg, src, ln in job.all("cuda_failures")
        if src == "torch" and msg == "out of memory"
    ]
    if oom and len(torch_oom) == len(oom):
        return [
            Hit(
                "gpu_memory",
                first(oom),
                "PyTorch ran out of GPU memory on this rank: it stops, and the ranks waiting "
                "for it in a collective time out",
                CERTAIN,
            )
        ]
    if oom:
        return [Hit("gpu_memory", first(oom), "CUDA reported 'out of memory' inside NCCL", CERTAIN)]
    unhandled = _lines(job, "cuda_unhandled") + [
        ln for msg, ln in job.all("test_failures") if "unhandled cuda error" in msg
    ]
    specific = (
        job.all("cuda_failures")
        or job.all("driver_old")
        or job.all("fabric_not_ready")
        or job.all("nvls_errors")  # 'Failed to bind NVLink SHARP ... CUDA error 401' names it
    )
    if unhandled and not specific and not job.all("p2p_errors"):
        return [
            Hit(
                "gpu_memory",
                first(unhandled, 2),
                "NCCL reports an unhandled CUDA error without the CUDA error itself; the "
                "commonest cause is GPU memory held by the model or another process",
                POSSIBLE,
                missing="the 'Cuda failure' WARN line that names the CUDA error",
            )
        ]
    return []


def _mnnvl_not_permitted(code: int | None, msg: str, src: str) -> bool:
    """CUDA 800 (cudaErrorNotPermitted) inside NCCL's P2P transport: the cuMem import of a
    peer's fabric handle, refused where the IMEX channel is not accessible (NCCL docs)."""
    return (code == 800 or "operation not permitted" in msg) and "p2p" in src.lower()


@detector("cuda_error")
def _cuda_error(job: Job) -> list[Hit]:
    known = (
        "out of memory",
        "peer access",
        "system not yet initialized",
        "SYSTEM_NOT_READY",  # the driver API's name for 802 (nvswitch_fabric)
        "insufficient",
        "named symbol not found",  # gpu_arch_missing
        "no kernel image",
        "uncorrectable ECC",  # gpu_xid
        # cudaErrorCudartUnloading (4): a call made while the process exits, after the CUDA
        # runtime was torn down (NCCL's proxy or PyTorch's watchdog at teardown): no fault
        "driver shutting down",
    )
    lines = [
        ln
        for code, msg, src, ln in job.all("cuda_failures")
        if code != 217
        and not any(k in msg for k in known)
        and "nvls" not in src.lower()
        and not _mnnvl_not_permitted(code, msg, src)
    ]
    if not lines:
        return []
    msg, src = next((m, s) for c, m, s, ln in job.all("cuda_failures") if ln is lines[0])
    where = (
        " in the program's own CUDA work (PyTorch), not in the network"
        if src == "torch"
        else " inside NCCL"
    )
    hint = next((h for k, h in CUDA_HINTS if k in msg), "")
    return [Hit("cuda_error", first(lines), f"CUDA reported '{msg}'{where}" + hint, CERTAIN)]


#: What a CUDA error usually means (CUDA runtime API docs, cudaError_t; PyTorch's advice).
CUDA_HINTS = (
    (
        "invalid device ordinal",
        ": a rank asked for a GPU index that is not visible (more processes per node than "
        "GPUs: --nproc-per-node, CUDA_VISIBLE_DEVICES, LOCAL_RANK)",
    ),
    (
        "illegal memory access",
        ": a kernel touched memory outside its buffers; rerun with CUDA_LAUNCH_BLOCKING=1 to "
        "find it",
    ),
    (
        "device-side assert",
        ": a kernel's assertion failed (often an index out of range); rerun with "
        "CUDA_LAUNCH_BLOCKING=1",
    ),
)


@detector("gpu_arch_missing")
def _gpu_arch_missing(job: Job) -> list[Hit]:
    lines = _lines(job, "arch_missing")
    if not lines:
        older = _nccl_older_than_gpu(job)
        return [older] if older else []
    smem = [ln for ln in lines if "maxSharedMem" in ln.text]
    reason = (
        "NCCL's kernels ask for more shared memory than this GPU gives a block: the NCCL "
        "build predates the GPU's architecture"
        if smem and len(smem) == len(lines)
        else "the build has no device code for this GPU ('named symbol not found' / 'no kernel "
        "image' / an unsupported compute capability)"
    )
    return [Hit("gpu_arch_missing", first(lines), reason, CERTAIN)]


#: The first NCCL release for each GPU architecture, keyed by the names logs print (nvidia-smi,
#: nccl-tests, PyTorch), newest first. From NVIDIA/nccl's release commits: 1.3.4-1 (649f04d0
#: 'Added Pascal nvcc flags': sm_60/61 in NVCC_GENCODE), 2.7.3-1 ('Add support for A100 GPU'),
#: 2.15.1-1 ('Add support for H100 (sm90)'), 2.25.1-1 ('Add Blackwell/SM100 support'),
#: 2.26.2-1 ('Fix shared memory usage on recent Blackwell GPUs': 2.25's kernels ask sm_120 for
#: more shared memory than it has, NVIDIA/nccl-tests#287, NVIDIA/nccl#1637).
FIRST_NCCL: tuple[tuple[str, str, tuple[int, int, int]], ...] = (
    (r"RTX 50[5-9]0|RTX PRO \d{4} Blackwell", "sm_120 (Blackwell RTX)", (2, 26, 2)),
    (r"\bG?B200\b|\bB100\b", "sm_100 (Blackwell)", (2, 25, 1)),
    (r"\bG?H(?:100|200|800|20)\b", "sm_90 (Hopper)", (2, 15, 1)),
    (r"\bA(?:100|800|30|40|10G?)\b|\bA[456]000\b", "sm_80 (Ampere)", (2, 7, 3)),
    (r"\bP(?:100|40)\b|GTX 10[5-8]0", "sm_60 (Pascal)", (1, 3, 4)),
)
#: Architectures an older NCCL never runs on, whatever the log shows next: 2.25's kernels ask
#: sm_120 for more shared memory than it has, so every launch fails (NVIDIA/nccl-tests#287,
#: #291). Elsewhere an older release may still run through PTX JIT, so only a failing log is
#: named.
ALWAYS_FAILS = frozenset({"sm_120 (Blackwell RTX)"})
#: The NCCL that first read Hopper's NVLinks right: 2.15.1 counts 18 per GPU from sm_90 (12
#: before) and reads their state through NVML field values (src/graph/xml.cc
#: ncclTopoGetXmlFromGpu); an older one records some GPU-GPU NVLinks on one side only.
NVLINK_SM90_NCCL = (2, 15, 1)
_TOPO_GPU = 0  # src/graph/topo.h: node type GPU


def _arch_of(name: str) -> tuple[str, tuple[int, int, int]] | None:
    """The architecture and first NCCL release of a GPU by its printed name (FIRST_NCCL)."""
    return next(((a, need) for pat, a, need in FIRST_NCCL if re.search(pat, name)), None)


def _dotted(release: tuple[int, ...]) -> str:
    return ".".join(map(str, release))


def _release(version: str) -> tuple[int, int, int] | None:
    parts = version.split(".")
    if len(parts) != 3 or not all(p.isdigit() for p in parts):
        return None
    return int(parts[0]), int(parts[1]), int(parts[2])


def _nccl_older_than_gpu(job: Job) -> Hit | None:
    """A failing job whose NCCL release predates its GPU's architecture (FIRST_NCCL), or a
    pre-2.15 NCCL whose topology has a GPU-GPU link one way only (Hopper's NVLinks read with
    the Ampere count): NCCL runs without the kernels, NVLink discovery or tuning the GPU needs."""
    failing = [
        *_lines(job, "warnings"),
        *_lines(job, "cuda_unhandled"),
        *(ln for _, ln in job.all("test_failures")),
    ]
    releases = [
        (r, lines[0]) for log in job.logs for v, lines in log.versions.items() if (r := _release(v))
    ]
    built = job.all("tests_nccl")
    gpus = [(*row, ln) for name, ln in job.all("device_names") if (row := _arch_of(name))]
    gpu = gpus[0] if gpus else None
    oldest = min(releases, key=lambda rl: rl[0]) if releases else None
    if gpu and oldest:
        (have, vline), (arch, need, gline) = oldest, gpu
        if have < need and (failing or arch in ALWAYS_FAILS):
            # on an architecture it never runs on, the release is the defect even where the
            # excerpt stops before the failure (NVIDIA/nccl-tests#291: 2.25 on an RTX 5090)
            return Hit(
                "gpu_arch_missing",
                first([gline, vline, *failing]),
                f"NCCL {_dotted(have)} predates the GPU: {arch} is supported from NCCL "
                f"{_dotted(need)}",
                LIKELY if failing else POSSIBLE,
                severity=None if failing else "medium",
                missing="" if failing else "the run's outcome: the rest of its output",
            )
    if not failing:
        return None
    if gpu and built and not releases:
        (major, minor), bline = built[0]
        arch, need, gline = gpu
        one_x = major == 1  # src/nccl1_compat.h: every NCCL 1.x reads 1.0
        if (major, minor) < need[:2] and not (one_x and need[0] == 1):
            return Hit(
                "gpu_arch_missing",
                first([gline, bline, *failing]),
                f"the nccl-tests binary was built with NCCL {major}.{minor}, older than the "
                f"GPU: {arch} is supported from NCCL {_dotted(need)}",
                LIKELY,
            )
        if one_x and need[0] == 1:
            return Hit(
                "gpu_arch_missing",
                first([gline, bline, *failing]),
                f"the nccl-tests binary was built with NCCL 1.x, run on an {arch} GPU: NCCL 1 "
                f"releases before {_dotted(need)} carry no {arch.split()[0]} code (some no "
                "PTX either), which CUDA reports as an unhandled error",
                POSSIBLE,
                missing="the NCCL 1 release (its package or Makefile's NVCC_GENCODE)",
            )
    reverse = [ln for a, b, ln in job.all("reverse_path") if a == b == _TOPO_GPU]
    new_gpu = gpu is None or gpu[1] >= NVLINK_SM90_NCCL
    if reverse and oldest and oldest[0] < NVLINK_SM90_NCCL and new_gpu:
        have, vline = oldest
        return Hit(
            "gpu_arch_missing",
            first([*reverse, vline]),
            f"NCCL {_dotted(have)} found an NVLink from one GPU to another but not "
            "back: NCCL before 2.15.1 reads 12 NVLinks per GPU and Hopper has 18, so it builds "
            "a one-way topology on H100-class GPUs",
            LIKELY,
            missing="the GPU model (nvidia-smi -L)",
        )
    return None


@detector("topology_file")
def _topology_file(job: Job) -> list[Hit]:
    lines = _lines(job, "topo_file_errors")
    if not lines:
        return []
    files = [ln for var in ("NCCL_GRAPH_FILE", "NCCL_TOPO_FILE") for ln in _env(job, var)[1]]
    reason = "NCCL could not use the topology/graph XML it was given" + (
        " (set by the environment)" if files else ""
    )
    return [Hit("topology_file", first(lines + files, 3), reason, CERTAIN if files else LIKELY)]


@detector("pci_sysfs")
def _pci_sysfs(job: Job) -> list[Hit]:
    lines = _lines(job, "pci_sysfs")
    if not lines:
        return []
    return [
        Hit(
            "pci_sysfs",
            first(lines),
            "NCCL could not resolve a device's PCI path under /sys: topology detection has no "
            "PCI tree to read (WSL2, or a sandbox that hides /sys)",
            CERTAIN,
        )
    ]


@detector("net_plugin_load")
def _net_plugin_load(job: Job) -> list[Hit]:
    lines = _lines(job, "plugin_load_failed")
    wanted = job.all("net_not_found")
    if wanted and not lines:
        absent = _lines(job, "plugin_absent")
        return [
            Hit(
                "net_plugin_load",
                first([ln for _, ln in wanted] + absent, 3),
                f"NCCL_NET asks for the network '{wanted[0][0]}', which no loaded plugin "
                "provides: the plugin was not found (its name or path) or did not load",
                CERTAIN,
            )
        ]
    named, named_lines = _env(job, "NCCL_NET_PLUGIN")
    loaded = any(log.plugins for log in job.logs)
    absent = _lines(job, "plugin_absent")
    if not lines and named and absent and not loaded and not named & {"none", "0"}:
        # NCCL_NET_PLUGIN names a plugin (net.cc: 'libnccl-net-<name>.so' or a path) and the
        # dlopen of every candidate failed with 'cannot open shared object file'
        return [
            Hit(
                "net_plugin_load",
                first(named_lines[:1] + absent, 3),
                f"NCCL_NET_PLUGIN={sorted(named)[0]} asks for a network plugin that is not "
                "found where the job runs (not installed, or not on LD_LIBRARY_PATH): NCCL "
                "goes on with its internal transports",
                CERTAIN,
            )
        ]
    if not lines:
        return []
    return [
        Hit(
            "net_plugin_load",
            first(lines),
            "the network plugin was found but would not load: a library it needs is missing "
            "or too old",
            CERTAIN,
        )
    ]


@detector("collective_mismatch")
def _collective_mismatch(job: Job) -> list[Hit]:
    lines = _lines(job, "size_mismatch")
    if not lines:
        return []
    return [
        Hit(
            "collective_mismatch",
            first(lines),
            "PyTorch's collective check (TORCH_DISTRIBUTED_DEBUG=DETAIL) found the ranks calling "
            "collectives with different shapes or operations"
            if any(k in ln.text for ln in lines for k in TORCH_COLLECTIVE_CHECKS)
            else "a peer sent more data than this rank posted for the same operation",
            LIKELY,
        )
    ]


# --- NVSwitch / NVLS ----------------------------------------------------------------------------


@detector("nvswitch_fabric")
def _nvswitch_fabric(job: Job) -> list[Hit]:
    down = _lines(job, "fm_down")
    if down:
        return [
            Hit(
                "nvswitch_fabric",
                first(_lines(job, "fm_service")[:1] + down),
                "Fabric Manager is not running (its service failed, or it refuses a driver of "
                "another version): the NVSwitches are not configured, so NVLink between the "
                "GPUs does not work",
                CERTAIN,
            )
        ]
    ready = _lines(job, "fabric_not_ready")
    if ready:
        return [
            Hit(
                "nvswitch_fabric",
                first(ready),
                "CUDA says the system is not yet "
                "initialized (802): the NVSwitch fabric has not registered the GPUs",
                CERTAIN,
            )
        ]
    imex = [
        ln
        for code, msg, src, ln in job.all("cuda_failures")
        if _mnnvl_not_permitted(code, msg, src)
    ]
    if imex:
        return [
            Hit(
                "nvswitch_fabric",
                first(imex),
                "CUDA refuses to import a peer's memory in NCCL's P2P transport (800, operation "
                "not permitted): across a multi-node NVLink domain (GB200 NVL72) that is the "
                "IMEX channel this process needs missing or not readable (NCCL's "
                "troubleshooting guide, MNNVL)",
                POSSIBLE,
                missing="`ls -l /dev/nvidia-caps-imex-channels/` in the container and whether "
                "the IMEX daemon runs (`nvidia-imex-ctl -N`)",
            )
        ]
    nvls = _lines(job, "nvls_errors") + [
        ln for _, msg, src, ln in job.all("cuda_failures") if "nvls" in src.lower()
    ]
    if nvls:
        return [
            Hit(
                "nvswitch_fabric",
                first(nvls),
                "CUDA fails inside NCCL's NVLS (NVLink SHARP) setup (transport/nvls.cc): the "
                "multicast objects the Fabric Manager provides are not usable",
                LIKELY,
            )
        ]
    return []


# --- GPU peer-to-peer ---------------------------------------------------------------------------


@detector("p2p_broken")
def _p2p_broken(job: Job) -> list[Hit]:
    errs = _lines(job, "p2p_errors") + [
        ln for code, msg, _, ln in job.all("cuda_failures") if code == 217 or "peer access" in msg
    ]
    iommu = _lines(job, "iommu_faults")
    if iommu and not errs:
        return [
            Hit(
                "p2p_broken",
                first(iommu),
                "the IOMMU blocked a device's DMA (an I/O page fault in the kernel log): GPU "
                "peer-to-peer and GPUDirect RDMA writes are translated and refused unless the "
                "IOMMU is in passthrough mode",
                LIKELY,
                missing="which device faulted (its PCI address against `nvidia-smi -q` and "
                "`ibdev2netdev`) and the IOMMU mode (`cat /proc/cmdline`)",
            )
        ]
    if errs:
        shm = any("shm.cc" in ln.text for ln in errs)
        return [
            Hit(
                "p2p_broken",
                first(errs),
                "CUDA refuses peer access between the GPUs NCCL tried to connect"
                + (
                    " while sharing host memory through cuMem (transport/shm.cc): "
                    "NCCL_CUMEM_HOST_ENABLE=0 avoids that path"
                    if shm
                    else ""
                ),
                CERTAIN,
            )
        ]
    nvlink = _lines(job, "p2p_nvlink_disabled")
    if nvlink:
        return [
            Hit(
                "p2p_broken",
                first(nvlink),
                "NCCL finds P2P disabled between GPUs that "
                "NVLink connects: a hardware or driver fault",
                LIKELY,
            )
        ]
    wrong = _lines(job, "wrong_results") + [ln for t in job.tests for ln in t.wrong_rows]
    if wrong:
        return [
            Hit(
                "p2p_broken",
                first(wrong),
                "nccl-tests found wrong values after the "
                "collective: data corrupted between GPUs (P2P or GDR through ACS/IOMMU)",
                LIKELY,
            )
        ]
    return _pcie_hang(job)


#: WARNs a run goes on after: not a reason to stop (NVIDIA/nccl#259: no libibverbs on a host
#: without RDMA; cudawrap's NCCL_CUDA_PATH lookup, after which NCCL uses the runtime's driver).
_BENIGN_WARNINGS = ("Failed to open libibverbs", "Failed to find CUDA library")


#: Parsed evidence that is itself an error (any of it means the run did not just stop).
_ERROR_FIELDS = ("cuda_unhandled", "timeouts", "watchdog_work", "watchdog_other", "desync")


def _errors_in(log: NcclLog) -> bool:
    return any(
        getattr(log, f.name)
        for f in dataclasses.fields(log)
        if f.name in _ERROR_FIELDS or f.name.endswith(("_errors", "_failures", "_faults"))
    )


def _pcie_hang(job: Job) -> list[Hit]:
    """nccl-tests on one host of PCIe-only GPUs that lists its devices and its table header,
    raises no error and prints no result: the first collective does not finish. GeForce
    40xx/50xx have no P2P at all (NVIDIA/nccl-tests#117, #287); on other PCIe GPUs the P2P
    writes cross PCIe switches or the root complex, where ACS redirects them and an IOMMU not
    in passthrough refuses them: NCCL's troubleshooting guide names both as the cause of
    hangs and corruption."""
    hw = job.hardware()
    devices = [ln for log in job.logs for _, ln in log.device_names]
    results = sum(log.table_rows + len(log.test_failures) for log in job.logs)
    warns = [ln for ln in job.all("warnings") if not any(b in ln.text for b in _BENIGN_WARNINGS)]
    hosts = {h for log in job.logs for h in log.hosts}
    if (
        not hw.pcie_gpu
        or any(_errors_in(log) for log in job.logs)
        or len(devices) < 2
        or results
        or warns
        or len(hosts) > 1
        or job.multi_node
        or job.tests
    ):
        return []
    header = [t for log in job.logs for t in log.table_header]
    if not header:
        # an excerpt cut during initialisation reads the same on a healthy run (a GTX 1080 Ti
        # node of NVIDIA/nccl#259 and a hung one of #257 print the same lines): no finding
        return []
    cause = (
        "consumer GPUs, no peer-to-peer support"
        if hw.consumer_gpu and re.search(r"[45]0[5-9]0", hw.gpu_name or "")
        else "PCIe peer-to-peer, which ACS or an IOMMU not in passthrough redirects or blocks"
    )
    return [
        Hit(
            "p2p_broken",
            first(header[:1] + devices, 3),
            f"{len(devices)} {hw.gpu_name}s on one host ({cause}) stop after the table "
            "header: the first collective never finishes",
            LIKELY,
            missing=(
                "whether the run hangs there, and the same run with NCCL_P2P_DISABLE=1 set "
                "before the command (finishes: P2P is the cause)"
            ),
        )
    ]


@detector("p2p_disabled")
def _p2p_disabled(job: Job) -> list[Hit]:
    disabled, dlines = _env(job, "NCCL_P2P_DISABLE")
    level, llines = _env(job, "NCCL_P2P_LEVEL")
    shm = [c for c in job.all("connections") if c.transport == "SHM"]
    info = _lines(job, "p2p_info_disabled")
    reasons: list[str] = []
    lines: list[Line] = []
    conf = POSSIBLE
    severity = None
    if "1" in disabled:
        lines += dlines[:1]
        if _echoed(job, "NCCL_P2P_DISABLE"):
            reasons.append("NCCL_P2P_DISABLE=1 is in effect")
            conf = CERTAIN
        else:
            # only a command line says so: a deliberate experiment as often as a fault
            reasons.append("a command line sets NCCL_P2P_DISABLE=1")
            severity = "info"
    if level & {"LOC", "0"}:
        reasons.append(f"NCCL_P2P_LEVEL={sorted(level & {'LOC', '0'})[0]} allows no P2P path")
        lines += llines[:1]
        conf = max(conf, CERTAIN if _echoed(job, "NCCL_P2P_LEVEL") else LIKELY)
    if shm:
        reasons.append(f"{len(shm)} intra-node connection(s) go via SHM instead of P2P")
        lines += [c.line for c in shm[:2]]
        # NCCL picks SHM by itself where the GPUs have no P2P path (across CPU sockets,
        # consumer cards; on a two-socket PCIe node the pairs across sockets, beside P2P
        # within each): only a ring over NVLink or one PCIe switch (NCCL's graph type), or
        # a setting, makes SHM a loss rather than the right choice
        p2p_path = any(g.type_intra in ("NVL", "NVB", "PIX", "PXB") for g in job.all("graphs"))
        if p2p_path or reasons[:-1]:
            conf = max(conf, LIKELY)
        elif conf == POSSIBLE:
            severity = "info"
    if info:
        reasons.append("NCCL reports P2P disabled between connected GPUs")
        lines += info[:1]
        conf = max(conf, LIKELY)
    if not reasons:
        return []
    if conf > POSSIBLE:
        severity = None
    elif severity is None and shm and not info:
        severity = "info"
    return [Hit("p2p_disabled", lines, "; ".join(reasons), conf, severity=severity)]


# --- transport selection ------------------------------------------------------------------------


def _uses_sockets(log: NcclLog) -> list[Line]:
    """Lines showing NET/Socket carries data. 'NET/Socket : Using ...' alone does not: NCCL
    initialises the socket transport next to IB and prints it either way (2.4-2.30)."""
    lines = [ln for n, ln in log.networks if "socket" in n.lower()]
    lines += [c.line for c in log.net_connections if c.net and "socket" in c.net.lower()]
    chosen_other = any("socket" not in n.lower() for n, _ in log.networks) or any(
        c.net and "socket" not in c.net.lower() for c in log.net_connections
    )
    if not lines and not chosen_other and not log.ib_devices:
        lines += [ln for _, ln in log.socket_ifaces.values()]
    return lines


@detector("socket_fallback")
def _socket_fallback(job: Job) -> list[Hit]:
    hits: list[Hit] = []
    for log in job.logs:
        sock = _uses_sockets(log)
        if log.single_node or any("ofi" in p.lower() for p, _ in log.plugins):
            continue
        expects_ib = (
            log.env_values("NCCL_IB_HCA")
            or "0" in log.env_values("NCCL_IB_DISABLE")
            or any(re.search(r"ib|rdma|sharp", p, re.I) for p, _ in log.plugins)
        )
        # NET/IB finding no device where the job asks for it is the fallback itself: NCCL
        # takes the next network, Socket (src/net.cc), whether or not the excerpt shows it
        if not sock and not log.verbs_provider_missing and not (log.ib_missing and expects_ib):
            continue
        reasons: list[str] = []
        lines: list[Line] = []
        conf = POSSIBLE
        if log.ib_open_failed:
            reasons.append(
                "NCCL found HCA(s) but could not open them (a container without "
                "/dev/infiniband, or no permission)"
            )
            lines += log.ib_open_failed[:2]
            conf = CERTAIN
        if log.verbs_provider_missing:
            reasons.append(
                "libibverbs has no userspace driver for the uverbs device "
                "(ibverbs-providers/libmlx5 missing)"
            )
            lines += log.verbs_provider_missing[:1]
            conf = CERTAIN
        if "1" in log.env_values("NCCL_IB_DISABLE"):
            reasons.append("NCCL_IB_DISABLE=1 turns InfiniBand/RoCE off")
            lines += log.env_lines("NCCL_IB_DISABLE")[:1]
            conf = CERTAIN
        if {v.lower() for v in log.env_values("NCCL_NET")} & {"socket"}:
            reasons.append("NCCL_NET=Socket forces TCP")
            lines += log.env_lines("NCCL_NET")[:1]
            conf = CERTAIN
        ipoib = sorted(
            n for n in {*log.socket_ifaces, *log.bootstrap_ifaces} if IPOIB_IFACE.match(n)
        )
        if ipoib:
            reasons.append(
                "the sockets run over " + ", ".join(ipoib) + ", IP-over-InfiniBand "
                "interfaces: InfiniBand hardware is there"
            )
            src = log.socket_ifaces.get(ipoib[0]) or log.bootstrap_ifaces.get(ipoib[0])
            if src:
                lines.append(src[1])
            conf = max(conf, LIKELY)
        if log.ib_missing and expects_ib:
            reasons.append(
                "the job asks for InfiniBand (NCCL_IB_HCA / NCCL_IB_DISABLE=0 / an "
                "RDMA plugin) yet NET/IB finds no device where it runs"
            )
            lines += log.ib_missing[:1]
            conf = max(conf, LIKELY)
        if log.ib_devices:
            reasons.append(
                "NET/IB lists " + ", ".join(sorted(log.ib_devices)) + " yet traffic is TCP"
            )
            lines += log.ib_using[:1]
            conf = max(conf, LIKELY)
        missing = ""
        if log.verbs_missing and not reasons:
            reasons.append(
                "NCCL could not load libibverbs, so it never looked for RDMA NICs "
                "and fell back to TCP sockets"
            )
            lines += log.verbs_missing[:1]
            missing = "whether the nodes have InfiniBand/RoCE NICs: `ibv_devinfo` on a node"
        if not reasons:
            continue
        ifaces = ", ".join(sorted(log.socket_ifaces)) or "the socket interfaces"
        hits.append(
            Hit(
                "socket_fallback",
                first(lines + sock[:1], 4),
                "; ".join(reasons) + f". NCCL moves inter-node data over {ifaces} with TCP",
                conf,
                severity=None if conf > POSSIBLE else "medium",
                missing=missing,
                source=log.source,
            )
        )
    return hits


@detector("socket_transport")
def _socket_transport(job: Job) -> list[Hit]:
    hits = []
    fallback = {h.source for h in _socket_fallback(job)}
    for log in job.logs:
        sock = _uses_sockets(log)
        if sock and log.multi_node and log.source not in fallback and not log.ofi_errors:
            ifaces = ", ".join(sorted(log.socket_ifaces)) or "TCP"
            hits.append(
                Hit(
                    "socket_transport",
                    first(sock, 2),
                    f"NET/Socket over {ifaces}",
                    LIKELY,
                    source=log.source,
                )
            )
    return hits


@detector("uneven_nodes")
def _uneven_nodes(job: Job) -> list[Hit]:
    counts_seen = job.all("net_count_mismatch")
    if counts_seen:
        lo, hi, _ = counts_seen[0]
        return [
            Hit(
                "uneven_nodes",
                first([ln for *_, ln in counts_seen], 2),
                f"NCCL found nodes with different numbers of network devices (from {lo} to "
                f"{hi}) and refuses to mix them",
                CERTAIN,
            )
        ]
    hosts = job.hosts()
    with_nics = {h: v for h, v in hosts.items() if v.nics}
    if len(with_nics) < 2:
        return []
    counts = Counter(len(v.nics) for v in with_nics.values())
    links = {frozenset(v.nics.values()) for v in with_nics.values()}
    if len(counts) < 2 and len(links) < 2:
        return []
    desc = "; ".join(f"{h}: {len(v.nics)} NIC(s)" for h, v in sorted(with_nics.items()))
    lines = [v.nic_line for v in with_nics.values() if v.nic_line is not None]
    return [
        Hit(
            "uneven_nodes",
            first(lines, 3),
            f"NET/IB lists different NICs per host ({desc})",
            CERTAIN,
        )
    ]


# --- plugins ------------------------------------------------------------------------------------


@detector("efa_unavailable")
def _efa_unavailable(job: Job) -> list[Hit]:
    errs = _lines(job, "ofi_errors")
    if not errs:
        return []
    return [
        Hit(
            "efa_unavailable",
            first(errs),
            "aws-ofi-nccl found no usable libfabric provider (EFA) where the job runs",
            CERTAIN,
        )
    ]


@detector("net_plugin_mismatch")
def _net_plugin_mismatch(job: Job) -> list[Hit]:
    hosts = job.hosts()
    loaded = {h: v for h, v in hosts.items() if v.plugin_lines}
    absent = {h: v for h, v in hosts.items() if v.plugin_absent and not v.plugin_lines}
    if loaded and absent:
        lines = [
            next(iter(loaded.values())).plugin_lines[0],
            next(iter(absent.values())).plugin_absent[0],
        ]
        return [
            Hit(
                "net_plugin_mismatch",
                lines,
                f"a NET plugin loads on {', '.join(sorted(loaded))} but not on "
                f"{', '.join(sorted(absent))}",
                CERTAIN,
            )
        ]
    crossed = [
        ln for k, ln in job.all("socket_errors") if k == "wrongtype" and _net_types_crossed(ln)
    ]
    if crossed:
        return [
            Hit(
                "net_plugin_mismatch",
                first(crossed, 2),
                "a peer connected with NET/IB's socket where this rank listens with "
                "NET/Socket's (socket types 4 and 3, src/include/socket.h): the ranks chose "
                "different network transports, as when NCCL_IB_DISABLE, NCCL_NET or a "
                "plugin path is set on some nodes only (mpirun without -x)",
                LIKELY,
                missing="the 'Using network' line of a rank on every node",
            )
        ]
    nets = {h: v.networks.most_common(1)[0][0] for h, v in hosts.items() if v.networks}
    if len(set(nets.values())) > 1:
        lines = [v.network_lines[0] for v in hosts.values() if v.network_lines]
        desc = "; ".join(f"{h}: {n}" for h, n in sorted(nets.items()))
        return [
            Hit(
                "net_plugin_mismatch",
                first(lines, 3),
                f"hosts use different networks ({desc})",
                LIKELY,
            )
        ]
    return []


# --- bootstrap and sockets ----------------------------------------------------------------------


@detector("socket_ifname")
def _socket_ifname(job: Job) -> list[Hit]:
    hits: list[Hit] = []
    ifname, iflines = _env(job, "NCCL_SOCKET_IFNAME")
    errs = job.all("iface_errors")
    hard = [ln for k, ln in errs if k in ("none", "create", "subnet")]
    family = [ln for k, ln in errs if k == "family"]
    loopback = [ln for k, ln in errs if k == "loopback"]
    setting = f"NCCL_SOCKET_IFNAME={sorted(ifname)[0]}" if ifname else "NCCL_SOCKET_IFNAME"
    if loopback and not hard:
        hits.append(
            Hit(
                "socket_ifname",
                first(loopback),
                "Gloo could not resolve the hostname to a local address and bound to loopback "
                "(127.0.0.1): other hosts cannot reach it; set GLOO_SOCKET_IFNAME (and "
                "NCCL_SOCKET_IFNAME) to the interface between the nodes",
                CERTAIN,
            )
        )
    if hard:
        hits.append(
            Hit(
                "socket_ifname",
                first(hard + iflines[:1]),
                f"NCCL finds no usable "
                f"socket interface ({setting} matches none that is up, or none exists)",
                CERTAIN,
            )
        )
    elif family:
        hits.append(
            Hit(
                "socket_ifname",
                first(family + iflines[:1]),
                "bootstrap connects to a "
                "garbage address: NCCL found no interface to advertise ("
                f"{setting} matching nothing, NVIDIA/nccl#1837)",
                LIKELY,
                missing="the 'Bootstrap : Using' line of every rank",
            )
        )
    notlocal = [ln for k, ln in errs if k == "notlocal"]
    if notlocal and not hits:
        hits.append(
            Hit(
                "socket_ifname",
                first(notlocal + iflines[:1]),
                "a socket was bound to (or sent from) an address this host does not have "
                "(EADDRNOTAVAIL): MASTER_ADDR or NCCL_COMM_ID names another host, or the "
                "interface NCCL or Gloo picked is not the one that carries that address",
                LIKELY,
                missing="`ip -br addr` on the failing host against MASTER_ADDR and the "
                "'Bootstrap : Using' line",
            )
        )
    noroute = [ln for k, ln in job.all("socket_errors") if k == "noroute"]
    if noroute and not hits and _one_routable_iface(job) and not ifname:
        # one ordinary interface and nothing chose it: the address is the right one, and
        # a firewall's REJECT (firewalld/iptables answer icmp-host-prohibited, which
        # connect() reports as EHOSTUNREACH) is the likelier reading: bootstrap_unreachable
        hits.append(
            Hit(
                "socket_ifname",
                first(noroute),
                "a peer's address is not routable from here: NCCL may advertise an interface "
                "the other hosts cannot reach",
                POSSIBLE,
            )
        )
    if noroute and not hits:
        hits.append(
            Hit(
                "socket_ifname",
                first(noroute + iflines[:1]),
                "a peer's address is "
                "not routable from here: NCCL advertises an interface the other hosts "
                "cannot reach",
                LIKELY,
            )
        )
    internal = job.all("internal_errors")
    if not hits and internal and job.multi_node and not any(log.records for log in job.logs):
        hits.append(
            Hit(
                "socket_ifname",
                first(internal),
                "NCCL before 2.19 returns 'internal error' when bootstrap finds no socket "
                "interface ('Bootstrap : no socket interface found', src/bootstrap.cc), as when "
                f"{setting} names an interface one host does not have (NVIDIA/nccl-tests#219)",
                POSSIBLE,
                missing="the run with NCCL_DEBUG=INFO: the 'Bootstrap : Using' line or the "
                "WARN of every host",
            )
        )
    if not hits:
        hits += _ifname_by_address(job)
    bare = _bare_system_error(job)
    known = any(log.socket_ifaces or log.bootstrap_ifaces for log in job.logs)
    if not hits and bare and not known:
        # NCCL's networking troubleshooting names this first for failures at init: an
        # interface that is up but does not reach the other nodes, which NCCL may pick (not
        # where the log shows the interfaces: the rules above read those)
        hits.append(
            Hit(
                "socket_ifname",
                first(bare, 2),
                "a system call failed (ncclSystemError) and no NCCL line says which: NCCL may "
                "have picked an interface that is up but does not reach the other hosts (a "
                "container or bridge address)",
                POSSIBLE,
                missing="the 'Bootstrap : Using' and 'NET/Socket : Using' lines "
                "(NCCL_DEBUG=INFO) of a rank on each host",
            )
        )
    return hits


def _ifname_by_address(job: Job) -> list[Hit]:
    """The address NCCL or Gloo advertised cannot work: IPv6 link-local, a loopback peer, or
    a loopback/bridge interface, read from the interfaces and the failing connections."""
    hits: list[Hit] = []
    # an IPv6 link-local address chosen for bootstrap or sockets (NCCL prefers IPv4 unless
    # NCCL_SOCKET_FAMILY says otherwise, but takes a v6-only interface as it is)
    local6 = [
        ln
        for log in job.logs
        for a, ln in {**log.socket_ifaces, **log.bootstrap_ifaces}.values()
        if _link_local(a)
    ]
    bad_conn = [ln for k, ln in job.all("socket_errors") if k != "closed"]
    if not hits and local6 and bad_conn:
        hits.append(
            Hit(
                "socket_ifname",
                first(local6, 1) + first(bad_conn, 2),
                "NCCL advertises an IPv6 link-local address (fe80::): other hosts cannot "
                "route to it; give the interface a routable address, or pick one that has an "
                "IPv4 address (NCCL_SOCKET_IFNAME, NCCL_SOCKET_FAMILY=AF_INET)",
                LIKELY,
            )
        )
    # a connection to an IPv4 link-local address (169.254/16, RFC 3927: never forwarded
    # off its link): a rank advertised an interface such as EKS Pod Identity's pod-id-link0
    # or a cloud metadata link, listed by NCCL's default filter (only ^docker,lo)
    to_link_local = [
        ln
        for k, ln in job.all("socket_errors")
        if k != "closed" and _LINK_LOCAL_PEER.search(ln.text)
    ]
    if not hits and to_link_local:
        named = [
            ln
            for log in job.logs
            for a, ln in {**log.socket_ifaces, **log.bootstrap_ifaces}.values()
            if _LINK_LOCAL_PEER.fullmatch(a.split("%")[0])
        ]
        hits.append(
            Hit(
                "socket_ifname",
                first(named, 1) + first(to_link_local, 2),
                "connections go to a link-local address (169.254.x.x): a rank advertised an "
                "interface that does not route off its own link (a cloud metadata or pod "
                "identity link); exclude it, e.g. NCCL_SOCKET_IFNAME=^lo,docker,<that "
                "interface>, or name the interface between the nodes",
                CERTAIN,
            )
        )
    # a peer advertised a loopback address: its hostname resolves to 127.0.1.1 (Debian's
    # /etc/hosts) or it bound to lo; nothing off that host can connect to it
    to_loopback = [
        ln
        for k, ln in job.all("socket_errors")
        if k != "closed"
        and (m := _LOOPBACK_PEER.search(ln.text))
        and (m.group(0) != "127.0.0.1" or job.multi_node)
    ]
    if not hits and to_loopback:
        hits.append(
            Hit(
                "socket_ifname",
                first(to_loopback, 2),
                "connections go to a loopback address (127.x): a rank advertised it because "
                "its hostname resolves there (127.0.1.1 in /etc/hosts) or it bound to lo; set "
                "GLOO_SOCKET_IFNAME / NCCL_SOCKET_IFNAME to the interface between the nodes, "
                "or map the hostname to its routable address",
                LIKELY,
            )
        )
    # NCCL's default interface filter excludes lo and docker* (misc/socket.cc
    # ncclFindInterfaces: '^docker,lo' ... then lo as the last resort), so bootstrap or
    # NET/Socket on one of them means NCCL_SOCKET_IFNAME chose it or nothing else was up
    failed = [
        ln for k, ln in job.all("socket_errors") if k in ("refused", "abort", "timeout", "noroute")
    ]
    if not hits and (job.multi_node or failed):
        bad: list[tuple[str, Line]] = []
        for log in job.logs:
            for name, (_, ln) in {**log.socket_ifaces, **log.bootstrap_ifaces}.items():
                if VIRTUAL_IFACE.match(name):
                    bad.append((name, ln))
        if bad:
            names = sorted({n for n, _ in bad})
            what = "NCCL uses " + ", ".join(names) + " (loopback or container/VM bridges)"
            if failed:
                hits.append(
                    Hit(
                        "socket_ifname",
                        first([ln for _, ln in bad], 1) + first(failed, 2),
                        what + " and its connections fail: an address on that interface is "
                        "not reachable from the other hosts",
                        LIKELY,
                    )
                )
            else:
                hits.append(
                    Hit(
                        "socket_ifname",
                        first([ln for _, ln in bad], 2),
                        what + " between hosts: connections over them do not route",
                        LIKELY,
                        severity="medium",
                    )
                )
    return hits


_LOOPBACK_PEER = re.compile(r"(?<![\d.])127\.\d{1,3}\.\d{1,3}\.\d{1,3}(?![\d.])")
_LINK_LOCAL_PEER = re.compile(r"(?<![\d.])169\.254\.\d{1,3}\.\d{1,3}(?![\d.])")


def _one_routable_iface(job: Job) -> bool:
    """The logs name exactly one socket interface, an ordinary one (not loopback, a bridge or
    IPoIB): NCCL had no other to choose."""
    ifaces = {
        n: a
        for log in job.logs
        for n, (a, _) in {**log.socket_ifaces, **log.bootstrap_ifaces}.items()
    }
    return len(ifaces) == 1 and not any(
        VIRTUAL_IFACE.match(n) or IPOIB_IFACE.match(n) or _link_local(a) for n, a in ifaces.items()
    )


def _link_local(addr: str) -> bool:
    """An IPv6 link-local address (fe80::/10): it does not route off its own link."""
    return addr.lower().startswith("fe80")


@detector("bootstrap_unreachable")
def _bootstrap_unreachable(job: Job) -> list[Hit]:
    store = _lines(job, "store_errors")
    if store:
        return [
            Hit(
                "bootstrap_unreachable",
                first(store),
                "the ranks cannot reach the c10d rendezvous store (MASTER_ADDR:MASTER_PORT)",
                CERTAIN,
            )
        ]
    sock = [ln for k, ln in job.all("socket_errors") if k in ("refused", "abort", "timeout")]
    noroute = [ln for k, ln in job.all("socket_errors") if k == "noroute"]
    if noroute and _one_routable_iface(job) and not _env(job, "NCCL_SOCKET_IFNAME")[0]:
        return [
            Hit(
                "bootstrap_unreachable",
                first(noroute + sock, 2),
                "'No route to host' although NCCL uses the node's only ordinary interface: a "
                "firewall rejecting the connection (iptables/firewalld REJECT answers "
                "icmp-host-prohibited, which connect() reports as EHOSTUNREACH) or a cloud "
                "security group closed to NCCL's ports",
                LIKELY,
                missing="`nc -zv PEER PORT` from this host, and the firewall rules "
                "(`iptables -S`, `firewall-cmd --list-all`) on the peer",
            )
        ]
    if sock:
        return [
            Hit(
                "bootstrap_unreachable",
                first(sock),
                "socket connections between the ranks are refused, aborted or time out",
                LIKELY,
            )
        ]
    system = _bare_system_error(job)
    if system:
        return [
            Hit(
                "bootstrap_unreachable",
                first(system, 2),
                "a system call failed (ncclSystemError) and no NCCL line says which: the "
                "ranks may not reach each other (a firewall, a closed port)",
                POSSIBLE,
                missing="the NCCL WARN line before the error (NCCL_DEBUG=WARN)",
            )
        ]
    return []


def _bare_system_error(job: Job) -> list[Line]:
    """ncclSystemError lines when nothing else in the log says which call failed."""
    system = _lines(job, "system_errors")
    explained = (
        job.all("socket_errors")
        or job.all("iface_errors")
        or job.all("shm_space")
        or job.all("completions")
        or job.all("modify_qp")
        or job.all("verbs_nomem")
        or job.all("remote_errors")
        or job.all("warnings")
        or job.all("bus_errors")
    )
    return [] if explained else system


# --- timeouts and dead peers --------------------------------------------------------------------


@detector("collective_timeout")
def _collective_timeout(job: Job) -> list[Hit]:
    timeouts = job.all("timeouts")
    work = job.all("watchdog_work")
    other = _lines(job, "watchdog_other")
    desync = _lines(job, "desync")
    if not (timeouts or work or other or desync):
        return []
    ops = Counter((t.op, t.seq) for t in timeouts)
    title = None
    reason_parts: list[str] = []
    if ops:
        (op, seq), _ = ops.most_common(1)[0]
        title = f"Watchdog timeout in {op or 'a collective'}" + (
            f" (SeqNum {seq})" if seq is not None else ""
        )
        ranks = sorted(
            {t.rank for t in timeouts if t.rank is not None and t.op == op and t.seq == seq}
        )
        t0 = next(t for t in timeouts if t.op == op and t.seq == seq)
        if ranks:
            reason_parts.append(f"rank(s) {', '.join(map(str, ranks))} waited in {op}")
        if t0.numel_in:
            reason_parts.append(f"{t0.numel_in:,} elements")
        if t0.timeout_ms:
            reason_parts.append(f"past the {t0.timeout_ms / 1e3:,.0f} s timeout")
        seqs = sorted({t.seq for t in timeouts if t.seq is not None})
        if len(seqs) > 1:
            reason_parts.append(
                "the ranks report different SeqNums ("
                + ", ".join(map(str, seqs[:6]))
                + "): they are out of step, one rank took another path through the code"
            )
    completed = sorted({c for _, w, _, c, _ in work})
    if completed:
        reason_parts.append(f"last completed work {max(completed)}")
    world = max((log.world_size or 0 for log in job.logs), default=0)
    reporting = {t.rank for t in timeouts if t.rank is not None} | {
        r for r, *_ in work if r is not None
    }
    if world and reporting and len(reporting) < world:
        missing = sorted(set(range(world)) - reporting)
        reason_parts.append(f"rank(s) {', '.join(map(str, missing[:16]))} did not report")
    if desync:
        reason_parts.append("the desync report names the rank that did not join")
    lines = first(desync + [t.line for t in timeouts] + [w[-1] for w in work] + other, 4)
    return [
        Hit(
            "collective_timeout",
            lines,
            "; ".join(reason_parts) or "PyTorch's watchdog aborted a collective",
            CERTAIN,
            title=title,
        )
    ]


@detector("peer_exited")
def _peer_exited(job: Job) -> list[Hit]:
    remote = _lines(job, "remote_errors")
    closed = [ln for k, ln in job.all("socket_errors") if k == "closed"]
    killed = _lines(job, "killed")
    crashed = job.all("crashed")
    gone = [ln for k, ln in job.all("efa_errors") if k == "peer_gone"]
    if gone and not (crashed or killed):
        return [
            Hit(
                "peer_exited",
                first(gone),
                "EFA found no queue pair at the receiver (invalid receiver QPN): the peer's "
                "endpoint is gone, which libfabric's own help text puts down to a crashed "
                "peer (an OOM kill, a container memory limit, an exception on that rank)",
                LIKELY,
                missing="the peer rank's own log and `dmesg` / the pod's last state on its node "
                "(OOMKilled, 'Out of memory: Killed process')",
            )
        ]
    if crashed and not killed:
        sig = crashed[0][0]
        return [
            Hit(
                "peer_exited",
                first([ln for _, ln in crashed] + closed + remote, 3),
                f"the launcher reports a rank that died on {sig}: a crash in that process "
                "(native code, a driver, or memory); the other ranks fail because it is gone",
                LIKELY,
                missing="that rank's own log and `dmesg` on its node (segfault, Xid)",
            )
        ]
    if killed:
        return [
            Hit(
                "peer_exited",
                first(killed + closed + remote, 3),
                "the launcher reports a rank killed by SIGKILL (-9): nothing in the job sends "
                "that, the kernel's OOM killer (host memory) or a scheduler's limit does",
                LIKELY,
                missing="`dmesg` / `journalctl -k` on that node ('Out of memory: Killed process')",
            )
        ]
    if not (remote or closed):
        return []
    if job.all("completions") or job.all("async_events"):
        return []  # NCCL's own network error explains it
    conf = LIKELY if closed else POSSIBLE
    return [
        Hit(
            "peer_exited",
            first(closed + remote, 3),
            "connections to a peer were closed "
            "or reset: that process died (crash, OOM kill) or its network failed",
            conf,
        )
    ]


# --- IB / RoCE verbs ----------------------------------------------------------------------------


def _modify_qp(job: Job, *errnos: str) -> list[Line]:
    """The failed ibv_modify_qp lines whose errno is one of `errnos` ('EINVAL', ...)."""
    return [ln for k, ln in job.all("modify_qp") if k in errnos]


def _completion_lines(job: Job, statuses: set[int]) -> list[Line]:
    return [ln for st, _, ln in job.all("completions") if st in statuses]


@detector("ib_link_error")
def _ib_link_error(job: Job) -> list[Hit]:
    events = [(e, ln) for e, ln in job.all("async_events") if "GID" not in e]
    fatal = [ln for e, ln in events if re.search(r"port error|catastrophic|fatal", e, re.I)]
    down = _lines(job, "nic_down")
    if down and not fatal:
        return [
            Hit(
                "ib_link_error",
                first(down),
                "the kernel log shows a NIC port going down or a cable/transceiver error: the "
                "link failed under the job",
                LIKELY,
                missing="whether that port carries the job's traffic (NCCL's 'NET/IB : Using' "
                "line) and its errors at the time of the failure",
            )
        ]
    if fatal:
        return [
            Hit(
                "ib_link_error",
                first(fatal),
                "the NIC reports port errors / fatal events: the link went down under the job",
                CERTAIN,
            )
        ]
    efa = job.all("efa_errors")
    stopped = [ln for k, ln in efa if k == "unresponsive"]
    if stopped:
        return [
            Hit(
                "ib_link_error",
                first(stopped),
                "the EFA peer answered before and stopped: libfabric's own reading is a "
                "hardware failure on the remote peer or its process gone",
                LIKELY,
                missing="the peer's log (did it exit first?) and its instance status",
            )
        ]
    # a completion EFA itself calls unreachable is ib_qp_unreachable's evidence, and one
    # whose receiver has no queue pair left is peer_exited's: not this
    unreach = {id(ln) for k, ln in efa if k in ("unreachable", "peer_gone")}
    timeouts = [ln for ln in _completion_lines(job, {12, 13}) if id(ln) not in unreach]
    if timeouts:
        unrouted = bool(_roce_link_local(job))
        return [
            Hit(
                "ib_link_error",
                first(timeouts),
                "IB work completions failed with status "
                "12 (transport retry counter exceeded): the peer's NIC stopped acknowledging",
                POSSIBLE if unrouted else LIKELY,
                missing="a transfer that succeeded before: the QPs use a link-local RoCE GID"
                if unrouted
                else "",
            )
        ]
    flushed = [ln for ln in _completion_lines(job, {5, -1}) if id(ln) not in unreach]
    # a QP access error flushes the QP's pending work: the flush is ib_mtu's consequence
    if flushed and not _lines(job, "access_violation"):
        return [
            Hit(
                "ib_link_error",
                first(flushed),
                "IB/EFA work requests were flushed or "
                "undeliverable: the connection to the peer broke",
                LIKELY,
            )
        ]
    remote = _lines(job, "remote_errors")
    if remote:
        return [
            Hit(
                "ib_link_error",
                first(remote, 2),
                "NCCL's remote error means a peer exited or the network between them failed",
                POSSIBLE,
                missing="NET/IB warnings (completion errors, port events) on any rank",
            )
        ]
    return []


@detector("ib_mtu")
def _ib_mtu(job: Job) -> list[Hit]:
    access = _lines(job, "access_violation")
    length = _completion_lines(job, {1})
    mtus = job.all("qp_mtus")
    sizes = sorted({m for m, _ in mtus})
    if not access and not length and len(sizes) > 1:
        # NET/IB's own QP lines show ports of different MTUs in one job (ibv_mtu 1-5 =
        # 256 << (n - 1) bytes); a failure beside it makes the mismatch the likely cause
        versions = {v for log in job.logs for v in log.versions}
        clamped = bool(versions) and all(
            tuple(int(x) for x in v.split(".")[:2]) < (2, 20) for v in versions
        )
        failed = not clamped and bool(
            job.all("completions") or job.all("timeouts") or _lines(job, "remote_errors")
        )
        shown = [next(ln for m, ln in mtus if m == size) for size in sizes]
        return [
            Hit(
                "ib_mtu",
                first(shown, 2),
                "the job's QPs run at different MTUs ("
                + ", ".join(f"{256 << (m - 1)} B" for m in sizes if 1 <= m <= 5)
                + "): NCCL 2.20+ no longer clamps a QP to the smaller end's MTU (NVIDIA/nccl#1524)",
                LIKELY if failed else POSSIBLE,
                severity=None if failed else "info" if clamped else "medium",
                missing=""
                if failed
                else "a failure or hang of this job at its first large "
                "transfer; `ibv_devinfo -v` active_mtu on every node",
            )
        ]
    if not access and not length:
        return []
    return [
        Hit(
            "ib_mtu",
            first(access + length, 2),
            (
                "the NIC reports a local access violation on the work queue"
                if access
                else "work completions failed with status 1 (local length error)"
            )
            + ": the message did not fit what the QP accepts, most often two ports with "
            "different MTUs (NCCL 2.20 stopped clamping to the smaller; NVIDIA/nccl#1524)",
            LIKELY,
            missing="`ibv_devinfo -v` active_mtu on both hosts",
        )
    ]


@detector("ib_qp_unreachable")
def _ib_qp_unreachable(job: Job) -> list[Hit]:
    efa = [ln for k, ln in job.all("efa_errors") if k == "unreachable"]
    if efa:
        return [
            Hit(
                "ib_qp_unreachable",
                first(efa),
                "the EFA device never reached the peer or never completed a handshake with it: "
                "security group rules that do not allow all traffic to and from the group "
                "itself, instances in different subnets, or a peer process that is gone "
                "(libfabric's efa_show_help)",
                LIKELY,
                missing="the security group's inbound and outbound rules, and the peer's log",
            )
        ]
    qp = _modify_qp(job, "ETIMEDOUT", "ENETUNREACH")
    if qp:
        return [
            Hit(
                "ib_qp_unreachable",
                first(qp),
                "moving the QP to RTR timed out or found "
                "no route: the two NICs cannot reach each other (different rails or "
                "partitions)",
                POSSIBLE if _gid_unshown_on_roce(job, qp) else LIKELY,
            )
        ]
    timeouts = _completion_lines(job, {12})
    if timeouts:
        return [
            Hit(
                "ib_qp_unreachable",
                first(timeouts, 2),
                "completion timeouts (status 12) "
                "are also what NICs that cannot reach each other print",
                POSSIBLE,
                missing="whether any transfer succeeded before: `ib_write_bw` between them",
            )
        ]
    return []


@detector("roce_gid")
def _roce_gid(job: Job) -> list[Hit]:
    gid = [ln for e, ln in job.all("async_events") if "GID" in e]
    if gid:
        return [
            Hit(
                "roce_gid",
                first(gid),
                "the RoCE GID table changed under the running job: "
                "QPs built on the old GID can no longer reach their peers",
                CERTAIN,
            )
        ]
    einval = _modify_qp(job, "EINVAL")
    if einval:
        return [
            Hit(
                "roce_gid",
                first(einval),
                "ibv_modify_qp rejected the address (EINVAL): NCCL's own hint is a wrong GID index",
                LIKELY,
            )
        ]
    query = _lines(job, "gid_query_failed")
    if query:
        return [
            Hit(
                "roce_gid",
                first(query),
                "NET/IB could not read the RoCE GID type from sysfs (gid_attrs under "
                "/sys/class/infiniband), as in containers that do not expose it: NCCL cannot "
                "choose a RoCE v2 GID",
                LIKELY,
                missing="whether NCCL_IB_GID_INDEX is set, and `show_gids` inside the container",
            )
        ]
    local = _roce_link_local(job)
    if local:
        return [
            Hit(
                "roce_gid",
                first(local),
                "the QP was addressed with a link-local GID (fe80::): it does not route between "
                "nodes, the routable RoCE v2 GID carries the interface's IPv4 or global address",
                LIKELY,
            )
        ]
    hw_links = {d.link for log in job.logs for d, _ in log.ib_devices.values()}
    roce_or_unknown = not hw_links or "RoCE" in hw_links
    connect, gid_rows = _lines(job, "proxy_connect_failed"), _lines(job, "roce_gid_rows")
    if connect and (gid_rows or "RoCE" in hw_links) and not job.all("modify_qp"):
        return [
            Hit(
                "roce_gid",
                first(connect, 2) + first(gid_rows, 1),
                "a network connection failed while the proxy set it up, on RoCE, with no "
                "verbs call named: NCCL picks and types each GID while it connects (reading "
                "gid_attrs from sysfs, which some containers do not expose) and a GID it "
                "cannot type or route fails there",
                POSSIBLE,
                missing="the WARN lines before it (NCCL_DEBUG=INFO, NCCL_DEBUG_SUBSYS=INIT,NET) "
                "and `show_gids` inside the container",
            )
        ]
    gid_set, _ = _env(job, "NCCL_IB_GID_INDEX")
    qp = _modify_qp(job, "ETIMEDOUT", "ENODEV")
    timeouts = _completion_lines(job, {12})
    if (qp or timeouts) and roce_or_unknown:
        return [
            Hit(
                "roce_gid",
                first(qp + timeouts, 2),
                "on RoCE the same failure comes from a "
                "GID that does not route (link-local IPv6 or RoCE v1)"
                + (f"; NCCL_IB_GID_INDEX={sorted(gid_set)[0]} is forced" if gid_set else ""),
                LIKELY if qp and _gid_unshown_on_roce(job, qp) else POSSIBLE,
                missing="`show_gids` on both hosts",
            )
        ]
    return []


def _gid_unshown_on_roce(job: Job, qp: list[Line]) -> bool:
    """A QP that timed out moving to RTR, on RoCE (or an unknown link), with no GID in the
    warning (NCCL < 2.23 prints none). On RoCE the RTR transition resolves the peer's GID to
    a MAC through the kernel's neighbour table (ib_resolve_eth_dmac), which is what times out
    when the GID does not route; native IB resolves nothing there. With the GID shown and
    routable (an IPv4-mapped RoCE v2 address) the GID is not the suspect: rails or routes are.
    """
    hw_links = {d.link for log in job.logs for d, _ in log.ib_devices.values()}
    roce_or_unknown = not hw_links or "RoCE" in hw_links
    return roce_or_unknown and not any("GID" in ln.text for ln in qp)


def _roce_link_local(job: Job) -> list[Line]:
    """Lines showing a failing RoCE job's QPs on a link-local GID (empty when not so)."""
    roce = any(d.link == "RoCE" for log in job.logs for d, _ in log.ib_devices.values())
    failing = job.all("modify_qp") or _completion_lines(job, {12})
    if not (roce and failing):
        return []
    local = [ln for _, ln in job.all("modify_qp") if _link_local_gid(ln.text)]
    return local + [ln for _, ll, ln in job.all("qp_gids") if ll]


def _link_local_gid(text: str) -> bool:
    """NCCL >= 2.23 prints the QP's GIDs in its ibv_modify_qp warning ('local GID fe80::...,
    remote GID ...', src/misc/ibvwrap.cc ibvModifyQpLog); fe80::/10 is link-local. On IB that
    is the normal GID (IB routes by LID), hence the caller's RoCE condition."""
    m = re.search(r"(?:local|remote) GID (fe[89ab][0-9a-f]:[0-9a-f:]*)", text, re.I)
    return m is not None


@detector("memlock")
def _memlock(job: Job) -> list[Hit]:
    lines = _lines(job, "verbs_nomem")
    bare = _lines(job, "reg_mr_failed")
    if bare and not lines:
        return [
            Hit(
                "memlock",
                first(bare),
                "registering memory with the NIC failed (ibv_reg_mr) without a reason printed: "
                "most often the locked-memory limit; without GPUDirect RDMA support, GPU "
                "buffers cannot be registered either",
                POSSIBLE,
                missing="the errno (a newer NCCL prints it) and `ulimit -l` inside the job",
            )
        ]
    if not lines:
        return []
    conf = CERTAIN if any("Cannot allocate memory" in ln.text for ln in lines) else LIKELY
    return [
        Hit(
            "memlock",
            first(lines),
            "the verbs library cannot pin memory for the NIC "
            "(ENOMEM from ibv_reg_mr/ibv_create_cq, or libfabric's EFA provider): the "
            "locked-memory limit",
            conf,
        )
    ]


@detector("ib_hca_select")
def _ib_hca_select(job: Job) -> list[Hit]:
    mix = _lines(job, "hca_mix")
    if mix:
        return [
            Hit(
                "ib_hca_select",
                first(mix),
                "NCCL refuses to pair NICs of different link layers",
                CERTAIN,
            )
        ]
    for log in job.logs:
        links = Counter(d.link for d, _ in log.ib_devices.values())
        if len(links) > 1:
            odd = sorted(
                n for n, (d, _) in log.ib_devices.items() if d.link == links.most_common()[-1][0]
            )
            return [
                Hit(
                    "ib_hca_select",
                    first(log.ib_using, 1),
                    "NET/IB uses NICs of mixed "
                    f"link layers ({', '.join(f'{n} {k}' for k, n in links.items())}): "
                    + ", ".join(odd)
                    + " is the odd one out",
                    LIKELY,
                )
            ]
    nodev = _modify_qp(job, "ENODEV")
    if nodev:
        return [
            Hit(
                "ib_hca_select",
                first(nodev),
                "ibv_modify_qp found no network device behind the port and GID NCCL chose "
                "(ENODEV): that HCA port has no interface that is up and addressed, so another "
                "HCA (or port) should carry the traffic",
                LIKELY,
                missing="`ibv_devinfo` port states and `show_gids` for the HCA in the error",
            )
        ]
    hca, hlines = _env(job, "NCCL_IB_HCA")
    missing = _lines(job, "ib_missing")
    if hca and missing and not any(log.ib_devices for log in job.logs):
        return [
            Hit(
                "ib_hca_select",
                first(hlines[:1] + missing[:1]),
                f"NCCL_IB_HCA={sorted(hca)[0]} is set and NET/IB finds no device",
                POSSIBLE,
                missing="`ibv_devinfo` names on that host",
            )
        ]
    return []


# --- GPUDirect RDMA -----------------------------------------------------------------------------


@detector("dmabuf_failed")
def _dmabuf_failed(job: Job) -> list[Hit]:
    lines = _lines(job, "dmabuf_failed")
    if not lines:
        return []
    why = re.search(r"failed with (?:error )?(?:\d{1,4} )?([A-Za-z][A-Za-z ]{2,40})", lines[0].text)
    reason = f" ({why.group(1).strip()})" if why else ""
    if "Cannot allocate memory" in reason:
        # not the locked-memory limit: DMA-BUF registrations are not charged to it
        reason += (
            ": the NIC or the GPU's BAR ran out of registration space, as oversized NCCL "
            "buffers (NCCL_BUFFSIZE) or many channels and peers ask for"
        )
    return [
        Hit(
            "dmabuf_failed",
            first(lines),
            "registering GPU memory with the NIC through DMA-BUF failed" + reason,
            CERTAIN,
        )
    ]


@detector("gdr_acs")
def _gdr_acs(job: Job) -> list[Hit]:
    prot = _completion_lines(job, {4})
    remote = _completion_lines(job, {10})
    if not prot and remote:
        # IBV_WC_REM_ACCESS_ERR: the peer's NIC refused the RDMA write into its registered
        # buffer, which for NCCL with GDR is GPU memory: the peer's side of status 4
        return [
            Hit(
                "gdr_acs",
                first(remote),
                "IB completions fail with status 10 (remote access error): the peer's NIC "
                "refused access to its registered (GPU) memory, as ACS/IOMMU on the peer's "
                "PCIe path or a broken registration there does",
                POSSIBLE,
                missing="the peer's own log (status 4 there) and `lspci -vvv | grep ACSCtl` on it",
            )
        ]
    if prot:
        return [
            Hit(
                "gdr_acs",
                first(prot),
                "IB completions fail with status 4 (local protection "
                "error): the NIC's DMA into GPU memory is refused on the PCIe path",
                # NCCL's own hint says 'in many cases' ACS (net_ib/common.h): not certain
                LIKELY,
                missing="`lspci -vvv | grep ACSCtl` on the host that printed it",
            )
        ]
    viol = _lines(job, "access_violation")
    if viol:
        return [
            Hit(
                "gdr_acs",
                first(viol),
                "the QP hit a local access violation: the NIC "
                "cannot reach the registered (GPU) memory",
                LIKELY,
            )
        ]
    return []


@detector("gdr_off")
def _gdr_off(job: Job) -> list[Hit]:
    hits = []
    hw = None
    for log in job.logs:
        no_reason = [ln for d, _, ln in log.gdr_disabled if d is None]
        net = [c for c in log.net_connections if c.net and "socket" not in c.net.lower()]
        without = [c for c in net if not c.gdr]
        if no_reason:
            hits.append(
                Hit(
                    "gdr_off",
                    first(no_reason + [c.line for c in without], 3),
                    "NCCL reports GPU Direct RDMA disabled for the HCA with no distance "
                    "reason: no peer-memory module or DMA-BUF support is registered",
                    CERTAIN,
                    source=log.source,
                )
            )
            continue
        if not without or any(d is not None for d, _, _ in log.gdr_disabled):
            continue
        efa = log.net_transport == "EFA"
        if efa:
            hw = hw or job.hardware()
            if hw.gpu not in EFA_GDR_GPUS:
                continue  # EFA carries GDR only on p4d and later instance types
        if len(without) < len(net):
            hosts_off = sorted({c.line.host or "?" for c in without})
            hits.append(
                Hit(
                    "gdr_off",
                    first([c.line for c in without] + [c.line for c in net if c.gdr], 3),
                    f"{len(without)} of {len(net)} NET connections do not use GPUDirect "
                    f"RDMA (on {', '.join(hosts_off)}) while the others do: the peer-memory "
                    "module is missing on some nodes",
                    CERTAIN,
                    source=log.source,
                )
            )
        else:
            hits.append(
                Hit(
                    "gdr_off",
                    first([c.line for c in without], 2),
                    f"none of the {len(net)} NET connections shows /GDRDMA",
                    LIKELY,
                    source=log.source,
                )
            )
    return hits


# --- topology -----------------------------------------------------------------------------------


@detector("nic_far")
def _nic_far(job: Job) -> list[Hit]:
    lines: list[Line] = []
    kinds: set[str] = set()
    conf = LIKELY
    for log in job.logs:
        if log.single_node:
            continue
        for d, _level, ln in log.gdr_disabled:
            if d is not None:
                lines.append(ln)
                kinds.add("distance")
                conf = CERTAIN
        for g in log.graphs:
            if g.type_inter in FAR_PATHS:
                lines.append(g.line)
                kinds.add(g.type_inter)
                conf = CERTAIN
        best: dict[str, tuple[int, str, Line]] = {}
        for gpu, _net, kind, ln in log.gpu_net_paths:
            r = PATH_ORDER.index(kind) if kind in PATH_ORDER else len(PATH_ORDER)
            if gpu not in best or r < best[gpu][0]:
                best[gpu] = (r, kind, ln)
        for _, kind, ln in best.values():
            if kind in FAR_PATHS:
                lines.append(ln)
                kinds.add(kind)
        for _dev, kind, ln in log.nic_distances:
            if kind in FAR_PATHS:
                lines.append(ln)
                kinds.add(kind)
    if not lines:
        return []
    where = (
        "NCCL turned GPUDirect RDMA off because the NIC is too far from the GPU"
        if "distance" in kinds
        else "the NIC sits "
        + (
            "on the other NUMA node (SYS)"
            if "SYS" in kinds
            else "behind the CPU's host bridge (PHB/NODE), not on the GPU's PCIe switch"
        )
    )
    return [Hit("nic_far", first(lines, 3), where, conf)]


@detector("few_channels")
def _few_channels(job: Job) -> list[Hit]:
    hits = []
    for log in job.logs:
        low = []
        for name in ("NCCL_MAX_NCHANNELS", "NCCL_MAX_CTAS"):
            for value, ln in log.env.get(name, []):
                if value.isdigit() and int(value) < 8:
                    low.append((name, value, ln))
        channels = max([c for c, _ in log.coll_channels] + [log.ring_channels or 0]) or None
        nics = len(log.ib_devices)
        few = (
            channels is not None
            and nics >= 2
            and log.net_transport in ("IB", "RoCE")
            and channels < nics
        )
        if not low and not few:
            continue
        parts = []
        if low:
            parts.append("capped by " + ", ".join(f"{n}={v}" for n, v, _ in low))
        if few:
            parts.append(f"{channels} channel(s) for {nics} NICs: some NICs carry nothing")
        lines = [ln for *_, ln in low] + [ln for _, ln in log.coll_channels[:1]]
        hits.append(
            Hit(
                "few_channels",
                first(lines, 2),
                "; ".join(parts),
                CERTAIN if low else LIKELY,
                source=log.source,
            )
        )
    return hits


# --- performance (nccl-tests, traces) ------------------------------------------------------------


@detector("busbw_low")
def _busbw_low(job: Job) -> list[Hit]:
    hits = []
    for t in job.tests:
        c = t.comparison
        if not c or not (0 < c["ratio"] < 0.7):
            continue
        hits.append(
            Hit(
                "busbw_low",
                [t.line] if t.line else [],
                _busbw_text(t),
                CERTAIN,
                severity="high" if c["ratio"] < 0.5 else "medium",
                source=t.source,
            )
        )
    return hits


def _busbw_text(t: object) -> str:
    c = t.comparison  # type: ignore[attr-defined]
    sizes = c["compared_sizes"]
    span = _size(sizes[0]) + (f" to {_size(sizes[-1])}" if len(sizes) > 1 else "")
    return (
        f"{c['op']} on {c['ranks']} ranks: median busbw over the {len(sizes)} size(s) from "
        f"{span} is {c['measured_busbw_GBps']:,.1f} GB/s, {c['ratio']:.0%} of the "
        f"{c['model_busbw_GBps']:,.1f} GB/s the model gives for {c['layout']}"
        + (f" (assumed: {'; '.join(c['assumptions'])})" if c.get("assumptions") else "")
    )


def _size(n: int) -> str:
    for unit, div in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= div:
            return f"{n / div:,.0f} {unit}"
    return f"{n:,} B"


#: measured / modelled busbw past which a table cannot be this hardware's: the model's busbw
#: is within ±15% of published runs where its inputs are right (docs/network.md), and NVLS or
#: SHARP beat a ring by at most ~2x
IMPOSSIBLE_BUSBW_RATIO = 3.0


@detector("model_assumption")
def _model_assumption(job: Job) -> list[Hit]:
    hits = []
    for t in job.tests:
        c = t.comparison
        if c and c["ratio"] > 1.3:
            # beyond IMPOSSIBLE_BUSBW_RATIO no fabric assumption explains it: the table is
            # not from the hardware it is priced on (a wrong --gpu/--fabric), or corrupt
            impossible = c["ratio"] > IMPOSSIBLE_BUSBW_RATIO
            hits.append(
                Hit(
                    "model_assumption",
                    [t.line] if t.line else [],
                    _busbw_text(t)
                    + (
                        f": {c['ratio']:,.1f} x what these links carry, so the table is not "
                        "from this hardware or its figures are corrupt"
                        if impossible
                        else ""
                    ),
                    CERTAIN,
                    severity="medium" if impossible else None,
                    source=t.source,
                )
            )
    return hits


@detector("straggler")
def _straggler(job: Job) -> list[Hit]:
    tr = job.trace
    if tr is None or tr.step_s <= 0 or tr.straggler is None:
        return []
    s = tr.straggler
    others = [r for r in tr.ranks if r is not s and r.steps]
    where = f"rank {s.rank}" + (f" on {s.host}" if s.host else "")
    exposed = [r.median("exposed_s") for r in others] or [0.0]
    reason = (
        f"{where} spends {s.median('outside_comm_s') * 1e3:,.1f} ms per step outside "
        f"communication, {tr.straggler_excess_s * 1e3:,.1f} ms more than the others' median; "
        f"the others wait in their collectives (exposed {min(exposed) * 1e3:,.1f}-"
        f"{max(exposed) * 1e3:,.1f} ms against {s.median('exposed_s') * 1e3:,.1f} ms on {where})"
    )
    return [
        Hit(
            "straggler",
            [],
            reason,
            CERTAIN,
            severity="high" if tr.straggler_excess_s / tr.step_s > 0.2 else "medium",
            title=f"Straggler: {where}",
            cost_s=tr.straggler_excess_s,
            step_s=tr.step_s,
            cost_basis="the straggler's median excess over the others per step",
            source=s.source,
        )
    ]


@detector("exposed_comm")
def _exposed_comm(job: Job) -> list[Hit]:
    tr = job.trace
    if tr is None or tr.step_s <= 0:
        return []
    share = tr.exposed_share
    own = tr.exposed_s if tr.straggler is None else max(tr.straggler.median("exposed_s"), 0.0)
    reason = (
        f"per step, ranks spend {tr.comm_s * 1e3:,.1f} ms in collectives, "
        f"{tr.exposed_s * 1e3:,.1f} ms of it not hidden behind compute ({share:.1%} of a "
        f"{tr.step_s * 1e3:,.1f} ms step)"
        + (" - most of it waiting for the straggler" if tr.straggler is not None else "")
    )
    if job.plan is not None:
        p = job.plan
        reason += (
            f". The model predicts {p['predicted_exposed_comm_s'] * 1e3:,.1f} ms exposed and a "
            f"{p['predicted_step_s'] * 1e3:,.1f} ms step for this job's layout"
        )
    sev = "high" if share > 0.3 else "medium" if share > 0.1 else "info"
    return [
        Hit(
            "exposed_comm",
            [],
            reason,
            CERTAIN,
            severity=sev,
            title=f"Exposed communication: {share:.0%} of the step",
            cost_s=own,
            step_s=tr.step_s,
            cost_basis="communication left exposed per step",
        )
    ]


@detector("idle")
def _idle(job: Job) -> list[Hit]:
    tr = job.trace
    if tr is None or tr.step_s <= 0 or tr.idle_share <= 0.1 or tr.straggler is not None:
        return []
    if tr.compute_s <= 0 and tr.comm_s <= 0:
        # no compute or communication was read inside the steps (events with unreadable
        # times, a profiler without CPU and CUDA activities): that is no evidence of idle
        # ranks (fuzz round 20, C6: 'idle 100%' beside 'no GPU kernel was readable')
        job.notes.append(
            "no compute or communication event was read inside the profiler steps: idle "
            "time not judged"
        )
        return []
    return [
        Hit(
            "idle",
            [],
            f"{tr.idle_share:.0%} of the step has neither compute nor communication",
            CERTAIN,
            title=f"Ranks idle {tr.idle_share:.0%} of the step",
            cost_s=tr.idle_share * tr.step_s,
            step_s=tr.step_s,
            cost_basis="idle time per step",
        )
    ]


@detector("nccl_errors")
def _nccl_errors(job: Job) -> list[Hit]:
    """Filled in by `leftovers` once every other detector has run (it needs their lines)."""
    return []


def leftovers(job: Job, hits: list[Hit]) -> list[Hit]:
    """WARN lines and error lines no other hit quotes or explains."""
    quoted = {(ln.source, ln.number) for h in hits for ln in h.lines}
    explained_msgs = (
        "Cuda failure",
        "NET/IB",
        "Got completion",
        "socket",
        "Socket",
        "shared memory",
        "Duplicate GPU",
        "libibverbs",
        "ibv_",
        "NET/OFI",
        "Connect",
        "connect",
        "Connection",
        "P2P",
        "peer",
        "Bootstrap",
        "GPU Direct",
        "Call to",
        "async",
        "timed out",
        "nvls",
    )
    covered = {ln.number for h in hits for ln in h.lines}
    have = {h.code for h in hits}
    named: dict[str, tuple[Message, list[Line]]] = {}
    rest: list[Line] = []
    for log in job.logs:
        for ln in log.warnings:
            if (ln.source, ln.number) in quoted or ln.number in covered:
                continue
            msg = lookup(ln.text)
            if msg is not None:  # a message whose source names its cause (messages.py)
                if msg.code not in have:
                    named.setdefault(msg.code, (msg, []))[1].append(ln)
                continue
            if hits and any(k in ln.text for k in explained_msgs):
                continue
            if "Failed to open libibverbs" in ln.text:
                continue  # harmless alone (NVIDIA/nccl#259); socket_fallback judges it
            if "driver shutting down" in ln.text:
                continue  # a CUDA call at process exit (cudaErrorCudartUnloading)
            rest.append(ln)
    out = [
        Hit(
            code,
            first(lines),
            f"{msg.why} (the message's source: {msg.source})",
            LIKELY if msg.likely else POSSIBLE,
        )
        for code, (msg, lines) in named.items()
    ]
    if rest:
        out.append(Hit("nccl_errors", first(rest, 3), "", POSSIBLE))
    return out
