"""Issue 14 item 9 and issue 15 item 9: the Slurm and Kubernetes launchers quote or refuse
every user string, and the PyTorchJob validates against a schema written from the Kubeflow
PyTorchJob CRD's fields (tests/data/k8s/pytorchjob-v1.schema.json; no cluster needed)."""

from __future__ import annotations

import json
import shlex
import shutil
import subprocess
from pathlib import Path

import pytest

from bandwall.errors import ConfigError
from bandwall.measure.bench.launch import DEFAULT_IMAGE, k8s_job, k8s_manifest, slurm_script

yaml = pytest.importorskip("yaml", reason="needs PyYAML (dev extra) to read the manifest back")
jsonschema_rs = pytest.importorskip("jsonschema_rs", reason="needs jsonschema-rs (dev extra)")

SCHEMA = Path(__file__).resolve().parents[1] / "data" / "k8s" / "pytorchjob-v1.schema.json"
PVC_SCHEMA = SCHEMA.with_name("pvc-v1.schema.json")
EVIL = "bench collectives --sizes '1K; touch /tmp/pwned' $(reboot) `id` '\"]: {x: 1}' '- a'"


def _last_command(script: str) -> list[str]:
    """The torchrun command line as bash would split it."""
    body = script.split("srun", 1)[1].replace("\\\n", " ")
    return shlex.split("srun" + body)


def test_slurm_command_is_requoted_and_reads_back_as_the_same_words() -> None:
    cmd = "bench collectives --sizes '1K; touch /tmp/pwned' --ops '$(reboot)'"
    script = slurm_script(2, 8, cmd, "gpu", "01:00:00")
    words = _last_command(script)
    assert words[words.index("bandwall") + 1 :] == shlex.split(cmd)
    assert "'1K; touch /tmp/pwned'" in script and "'$(reboot)'" in script


@pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash for a syntax check")
def test_slurm_script_is_valid_bash() -> None:
    script = slurm_script(2, 8, "bench collectives --ops 'a b'", None, "30", "reg.io/x/bw:1")
    r = subprocess.run(["bash", "-n"], input=script, text=True, capture_output=True, check=False)
    assert r.returncode == 0, r.stderr
    assert "--container-image=reg.io/x/bw:1 torchrun" in script


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"partition": "gpu\n#SBATCH --uid=0"}, "partition"),
        ({"partition": "gpu;rm"}, "partition"),
        ({"time_limit": "1:00\nrm -rf /"}, "time"),
        ({"command": "bench collectives --ops 'all\nrm -rf /'"}, "command"),
        ({"command": ""}, "command"),
        ({"command": "bench 'unclosed"}, "command"),
        ({"image": "bandwall:1 --mount=/:/host"}, "image"),
        ({"image": "Bad/Name"}, "image"),
    ],
)
def test_slurm_refuses_what_it_cannot_quote(kwargs: dict[str, str], field: str) -> None:
    args = {"command": "bench collectives", "partition": None, "time_limit": "00:30:00"} | kwargs
    with pytest.raises(ConfigError) as err:
        slurm_script(
            1, 8, args["command"], args["partition"], args["time_limit"], args.get("image")
        )
    assert err.value.field == field


def test_k8s_manifest_reads_back_as_the_job_and_validates_against_the_crd_schema() -> None:
    validator = jsonschema_rs.validator_for(json.loads(SCHEMA.read_text()))
    claims = jsonschema_rs.validator_for(json.loads(PVC_SCHEMA.read_text()))
    for nodes in (1, 4):
        text = k8s_manifest(nodes, 8, "bench collectives --ops all", DEFAULT_IMAGE, "bw-bench")
        claim, doc = yaml.safe_load_all(text)
        assert doc == k8s_job(nodes, 8, "bench collectives --ops all", DEFAULT_IMAGE, "bw-bench")
        assert [e.message for e in validator.iter_errors(doc)] == []
        assert [e.message for e in claims.iter_errors(claim)] == []
        specs = doc["spec"]["pytorchReplicaSpecs"]
        assert set(specs) == ({"Master"} if nodes == 1 else {"Master", "Worker"})
        assert specs.get("Worker", {"replicas": 0})["replicas"] == nodes - 1


def _pod(doc: dict, replica: str) -> dict:
    return doc["spec"]["pytorchReplicaSpecs"][replica]["template"]["spec"]


def test_k8s_pods_get_shm_rdma_ipc_lock_and_a_results_volume_that_outlives_them() -> None:
    """Issue 24: what a cluster needs for NCCL at speed (a memory-backed /dev/shm, the RDMA
    device plugin's resource, IPC_LOCK to pin memory) and for results to survive the pod (the
    master, rank 0, writes BANDWALL_DB onto the claim the manifest creates)."""
    claim, doc = yaml.safe_load_all(k8s_manifest(3, 8, "bench collectives", DEFAULT_IMAGE, "bw"))
    for replica in ("Master", "Worker"):
        pod = _pod(doc, replica)
        (box,) = pod["containers"]
        volumes = {v["name"]: v for v in pod["volumes"]}
        mounts = {m["mountPath"]: m["name"] for m in box["volumeMounts"]}
        assert set(mounts.values()) <= set(volumes)  # every mount names a volume of the pod
        assert volumes[mounts["/dev/shm"]]["emptyDir"]["medium"] == "Memory"
        assert box["resources"]["limits"] == {"nvidia.com/gpu": 8, "rdma/rdma_shared_device_a": 1}
        assert box["securityContext"]["capabilities"]["add"] == ["IPC_LOCK"]
    master = _pod(doc, "Master")
    db = {e["name"]: e["value"] for e in master["containers"][0]["env"]}["BANDWALL_DB"]
    mounts = {m["mountPath"]: m["name"] for m in master["containers"][0]["volumeMounts"]}
    results = next(p for p in mounts if db.startswith(p + "/"))
    volume = {v["name"]: v for v in master["volumes"]}[mounts[results]]
    assert volume["persistentVolumeClaim"]["claimName"] == claim["metadata"]["name"]
    assert master["securityContext"]["fsGroup"] == 10001  # the image's user can write it
    # an existing claim: no claim document, the job mounts the one named; no RDMA on TCP
    (only,) = yaml.safe_load_all(
        k8s_manifest(
            2, 8, "bench links", DEFAULT_IMAGE, "bw", results_claim_name="lab-runs",
            rdma_resource=None,
        )
    )  # fmt: skip
    vols = {v["name"]: v for v in _pod(only, "Master")["volumes"]}
    assert vols["results"]["persistentVolumeClaim"]["claimName"] == "lab-runs"
    assert _pod(only, "Worker")["containers"][0]["resources"]["limits"] == {"nvidia.com/gpu": 8}


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"nodes": 0}, "nodes"),
        ({"nodes": 10**20}, "nodes"),
        ({"gpus_per_node": 1000}, "gpus_per_node"),
        ({"rdma_resource": "rdma/x: 1\nevil"}, "rdma_resource"),
        ({"shm_size": "16Gi; rm"}, "shm_size"),
        ({"results_claim_name": "Bad_Claim"}, "results_claim"),
    ],
)
def test_k8s_bounds_and_refusals(kwargs: dict, field: str) -> None:
    args = {"nodes": 2, "gpus_per_node": 8} | kwargs
    nodes, gpn = args.pop("nodes"), args.pop("gpus_per_node")
    with pytest.raises(ConfigError) as err:
        k8s_manifest(nodes, gpn, "bench collectives", DEFAULT_IMAGE, "bw", **args)
    assert err.value.field == field


def test_k8s_schema_catches_what_an_injection_would_add() -> None:
    validator = jsonschema_rs.validator_for(json.loads(SCHEMA.read_text()))
    doc = k8s_job(2, 8, "bench collectives", DEFAULT_IMAGE, "bw")
    doc["spec"]["pytorchReplicaSpecs"]["Master"]["template"]["spec"]["hostNetwork"] = True
    assert not validator.is_valid(doc)  # the schema is not a rubber stamp


def test_k8s_user_strings_stay_strings() -> None:
    """A command full of YAML and shell syntax comes back as the same argument list."""
    text = k8s_manifest(2, 8, EVIL, "registry.example.com:5000/team/bandwall:0.1.0", "bw")
    _, doc = yaml.safe_load_all(text)
    args = doc["spec"]["pytorchReplicaSpecs"]["Worker"]["template"]["spec"]["containers"][0]
    assert args["args"] == shlex.split(EVIL)
    assert list(doc) == ["apiVersion", "kind", "metadata", "spec"]


@pytest.mark.parametrize(
    ("name", "image", "command", "field"),
    [
        ("Bandwall", DEFAULT_IMAGE, "bench collectives", "name"),
        ("bw\nkind: Pod", DEFAULT_IMAGE, "bench collectives", "name"),
        ("x" * 41, DEFAULT_IMAGE, "bench collectives", "name"),
        ("bw", 'bandwall"\n  evil: true', "bench collectives", "image"),
        ("bw", "bandwall:latest ; id", "bench collectives", "image"),
        ("bw", DEFAULT_IMAGE, "bench collectives '\n- evil'", "command"),
        ("bw", DEFAULT_IMAGE, "bandwall bench collectives", "command"),
    ],
)
def test_k8s_refuses_invalid_names_images_and_commands(
    name: str, image: str, command: str, field: str
) -> None:
    with pytest.raises(ConfigError) as err:
        k8s_manifest(2, 8, command, image, name)
    assert err.value.field == field


def test_cli_launch_k8s_names_the_dockerfile_image(run_cli) -> None:  # type: ignore[no-untyped-def]
    r = run_cli("launch", "k8s", "--nodes", "2")
    assert r.code == 0 and "Dockerfile" in r.out and f"image: {json.dumps(DEFAULT_IMAGE)}" in r.out
    bad = run_cli("launch", "k8s", "--name", "Evil_Name")
    assert bad.code == 2 and bad.err.startswith("error: --name:")
    s = run_cli("launch", "slurm", "--image", "reg.io/bandwall:0.1.0")
    assert s.code == 0 and "--container-image=reg.io/bandwall:0.1.0" in s.out
