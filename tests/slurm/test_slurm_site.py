"""The private Slurm cluster, the Slurm site configs and onboarding, against real Slurm.

One cluster (tools/slurm_cluster.py) is started for the module in its own directory and on
free ports, so a cluster someone started in build/slurm is not touched; the last test
stops it and checks that none of its processes is left. MPI jobs go through srun with the
PMI plugin the site config chooses for each library (site_configs/slurmsite.py), and the
ReFrame checks run through site_configs/slurm_local.py exactly as the workflow runs them.
"""
from __future__ import annotations

import json
import os
import re
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from mpistack import libraries

REPO = Path(__file__).resolve().parents[2]
sys.path.append(str(REPO / "tools"))
sys.path.append(str(REPO / "site_configs"))
import slurm_cluster  # noqa: E402
import slurmsite  # noqa: E402

REFRAME = REPO / "build" / "venv" / "bin" / "reframe"
PYTHON = REPO / "build" / "venv" / "bin" / "python"
HELLO = r"""
#include <mpi.h>
#include <stdio.h>
int main(int argc, char **argv) {
    int rank, size;
    double mine, sum;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    mine = rank;
    MPI_Allreduce(&mine, &sum, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    printf("rank %d of %d sum %.0f\n", rank, size, sum);
    MPI_Finalize();
    return 0;
}
"""


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


NO_ACCOUNTING = []  # why the cluster runs without accounting, if it does


@pytest.fixture(scope="module")
def cluster():
    try:
        slurm_cluster.install_packages(quiet=True)
    except slurm_cluster.ClusterError as error:
        pytest.skip(f"Slurm is not installed and cannot be installed here: {error}")
    try:
        slurm_cluster.install_packages(quiet=True, accounting=True)
    except slurm_cluster.ClusterError as error:
        NO_ACCOUNTING.append(str(error))
    # Not pytest's tmp_path: munged refuses sockets below its 0700 folders.
    folder = libraries.build_root() / f"slurm-test-{os.getpid()}"
    instance = slurm_cluster.Cluster(folder, cpus=8, ctld_port=free_port(),
                                     slurmd_port=free_port(), accounting=not NO_ACCOUNTING,
                                     dbd_port=free_port(), mysql_port=free_port())
    began = time.monotonic()
    instance.start()
    print(f"local Slurm cluster (accounting: {instance.accounting}) started in "
          f"{time.monotonic() - began:.2f} s")
    yield instance
    instance.stop()
    shutil.rmtree(folder, ignore_errors=True)


def slurm_env(cluster, lib=None, **extra) -> dict:
    env = lib.environment() if lib else dict(os.environ)
    env = cluster.client_env(env)
    env.update(extra)
    return env


@pytest.fixture(scope="module")
def hello(tmp_path_factory):
    """A tiny MPI program (rank, size, an allreduce) built against each library."""
    folder = tmp_path_factory.mktemp("hello")
    source = folder / "hello.c"
    source.write_text(HELLO)
    built = {}

    def build(lib):
        if lib.name not in built:
            binary = folder / f"hello_{lib.name}"
            subprocess.run([str(lib.shim_mpicc), "-o", str(binary), str(source)], check=True,
                           env=lib.environment(), timeout=120)
            built[lib.name] = binary
        return built[lib.name]
    return build


def srun(cluster, lib, binary, ntasks, *options, pmi=None, timeout=120):
    pmi = pmi or slurmsite.DEFAULT_SRUN_MPI[lib.family]
    return subprocess.run(["srun", f"--ntasks={ntasks}", *options, str(binary)],
                          env=slurm_env(cluster, lib, SLURM_MPI_TYPE=pmi),
                          capture_output=True, text=True, timeout=timeout)


def ranks_seen(stdout: str) -> list[tuple[int, int, float]]:
    return sorted((int(r), int(n), float(s)) for r, n, s in
                  re.findall(r"^rank (\d+) of (\d+) sum (\S+)$", stdout, re.M))


# -- the cluster -------------------------------------------------------------------------
def test_cluster_is_up_and_start_is_idempotent(cluster):
    assert all(cluster.running().values()), cluster.running()
    node, state, cpus = cluster.sinfo().split()
    assert state.rstrip("*") == "idle" and cpus == "8"
    began = time.monotonic()
    assert cluster.start() is False  # already running: nothing restarted
    assert time.monotonic() - began < 5


def test_start_names_a_port_in_use(cluster):
    other = slurm_cluster.Cluster(cluster.dir / "other", ctld_port=cluster.ctld_port,
                                  slurmd_port=free_port())
    with pytest.raises(slurm_cluster.ClusterError, match=rf"port {cluster.ctld_port} .*in use"):
        other.start()
    assert not any(other.running().values())


def test_start_names_a_folder_munge_refuses(tmp_path):
    # pytest's tmp_path is below a 0700 folder.
    other = slurm_cluster.Cluster(tmp_path / "c", ctld_port=free_port(), slurmd_port=free_port())
    with pytest.raises(slurm_cluster.ClusterError, match=r"not traversable by others"):
        other.start()
    assert not any(other.running().values())


def test_impossible_job_is_rejected_not_queued(cluster, mpi_library, hello):
    # 9 ranks on 8 declared CPUs without --overcommit: EnforcePartLimits rejects it at once.
    result = srun(cluster, mpi_library, hello(mpi_library), 9, "--immediate=5", timeout=60)
    assert result.returncode != 0
    assert "More processors requested than permitted" in result.stderr


# -- MPI through srun --------------------------------------------------------------------
@pytest.mark.parametrize("ntasks, options", [(8, ()), (9, ("--overcommit",))],
                         ids=["8ranks", "9ranks-overcommit"])
def test_srun_runs_every_rank(cluster, mpi_library, hello, ntasks, options):
    result = srun(cluster, mpi_library, hello(mpi_library), ntasks, *options)
    assert result.returncode == 0, result.stderr[-2000:]
    expected_sum = ntasks * (ntasks - 1) / 2
    assert ranks_seen(result.stdout) == [(r, ntasks, expected_sum) for r in range(ntasks)], \
        result.stdout + result.stderr[-1000:]


def test_library_mpirun_inside_an_allocation(cluster, mpi_library, hello):
    # The other way to launch: the library's own mpirun (Open MPI's orted / hydra started
    # through Slurm) inside salloc, e.g. for a site whose srun lacks the right PMI.
    result = subprocess.run(["salloc", "--ntasks=8", str(mpi_library.shim_mpirun), "-np", "8",
                             str(hello(mpi_library))], env=slurm_env(cluster, mpi_library),
                            capture_output=True, text=True, timeout=180)
    assert result.returncode == 0, result.stderr[-2000:]
    assert ranks_seen(result.stdout) == [(r, 8, 28.0) for r in range(8)]


def test_wrong_pmi_starts_singletons(cluster, mpi_library, hello):
    # The trap the checks' sanity must catch: without a PMI, MPICH and Intel MPI start
    # singletons ("rank 0 of 1") and srun exits 0. Open MPI 4.1.4 at least fails loudly.
    result = srun(cluster, mpi_library, hello(mpi_library), 4, pmi="none")
    if mpi_library.family == "openmpi":
        assert result.returncode != 0
        assert "direct launched" in result.stderr
    else:
        assert result.returncode == 0, result.stderr[-1000:]
        assert ranks_seen(result.stdout) == [(0, 1, 0.0)] * 4


# -- site files ------------------------------------------------------------------------------
GOOD_SITE = """
[system]
name = "{name}"
[slurm]
partition = "local"
[layouts.pernode]
tasks_per_node = 1
[layouts.packed]
overcommit = true
[mpi.openmpi]
from_libraries = "openmpi"
[mpi.mpich]
family = "mpich"
prefix = "/opt/mpich"
srun_mpi = "{mpich_pmi}"
"""


def write_site(tmp_path, text, name="site.toml") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def test_site_file_layouts_and_pmi(tmp_path):
    system, envs = slurmsite.load(write_site(tmp_path, GOOD_SITE.format(name="t", mpich_pmi="pmi2")))
    parts = {p["name"]: p for p in system["partitions"]}
    assert "--ntasks-per-node=1" in parts["pernode"]["access"]      # the paper's layout
    assert "--overcommit" in parts["packed"]["access"]
    env = {e["name"]: dict(e["env_vars"]) for e in envs}
    assert env["openmpi"]["SLURM_MPI_TYPE"] == "pmix"
    assert env["mpich"]["SLURM_MPI_TYPE"] == "pmi2"
    assert env["mpich"]["PATH"].startswith("/opt/mpich/bin:")


@pytest.mark.parametrize("edit, message", [
    (lambda t: t.replace('name = "t"', ""), r"\[system\] missing required key\(s\) name"),
    (lambda t: t.replace('prefix = "/opt/mpich"', ""), r"\[mpi.mpich\] say how this MPI is reached"),
    (lambda t: t.replace('family = "mpich"', 'family = "mvapich"'), r"unknown MPI family 'mvapich'"),
    (lambda t: t.replace('from_libraries = "openmpi"', 'from_libraries = "lam"'),
     r"unknown MPI library 'lam'"),
    (lambda t: t.replace("tasks_per_node = 1", "task_per_node = 1"), r"unknown key\(s\) task_per_node"),
    (lambda t: t.replace('srun_mpi = "pmi2"', 'srun_mpi = "pmi3"'), r"srun_mpi = 'pmi3' is not one of"),
], ids=["missing-name", "mpi-unreachable", "unknown-family", "unknown-library", "typo", "bad-pmi"])
def test_bad_site_file_is_a_clear_error(tmp_path, edit, message):
    text = edit(GOOD_SITE.format(name="t", mpich_pmi="pmi2"))
    with pytest.raises(slurmsite.SiteConfigError, match=message):
        slurmsite.load(write_site(tmp_path, text))


def test_reframe_reports_a_bad_site_file_in_one_line(tmp_path):
    text = GOOD_SITE.format(name="t", mpich_pmi="pmi2").replace('family = "mpich"', 'family = "lam"')
    site = write_site(tmp_path, text)
    result = subprocess.run([str(REFRAME), "-C", str(REPO / "site_configs" / "slurm_site.py"),
                             "--system", "t", "--show-config"], cwd=tmp_path,
                            env=dict(os.environ, PCREPRO_SITES=str(site)),
                            capture_output=True, text=True, timeout=120)
    assert result.returncode != 0
    assert "Traceback" not in result.stderr + result.stdout
    assert f"{site}: [mpi.mpich] unknown MPI family 'lam'" in result.stderr


def test_example_site_file_loads():
    system, envs = slurmsite.load(slurmsite.SITES_DIR / "example.toml")
    assert {p["name"] for p in system["partitions"]} == {"pernode", "packed"}
    assert {e["name"] for e in envs} == {"openmpi", "mpich", "impi"}


# -- onboarding ----------------------------------------------------------------------------
def test_onboarding_writes_a_loadable_site(cluster, tmp_path):
    output = tmp_path / "new.toml"
    result = subprocess.run([str(PYTHON), str(REPO / "tools" / "onboard_cluster.py"),
                             "--name", "newcluster", "--output", str(output)],
                            env=slurm_env(cluster), capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    system, envs = slurmsite.load(output)
    assert system["name"] == "newcluster"
    parts = {p["name"]: p for p in system["partitions"]}
    assert "--partition=local" in parts["pernode"]["access"]
    assert "--ntasks-per-node=8" in parts["packed"]["access"]   # the node's 8 declared CPUs
    set_up = {lib.name for lib in libraries.load().values() if lib.shim_mpirun.exists()}
    assert set_up <= {e["extras"]["mpi_library"] for e in envs}
    # ReFrame accepts it as a system of the generic site config.
    shown = subprocess.run([str(REFRAME), "-C", str(REPO / "site_configs" / "slurm_site.py"),
                            "--system", "newcluster:packed", "--show-config=systems/0/name"],
                           cwd=tmp_path, env=dict(slurm_env(cluster), PCREPRO_SITES=str(output)),
                           capture_output=True, text=True, timeout=120)
    assert shown.returncode == 0 and "newcluster" in shown.stdout, shown.stderr
    # A second run refuses to overwrite the user's edits.
    again = subprocess.run([str(PYTHON), str(REPO / "tools" / "onboard_cluster.py"),
                            "--name", "newcluster", "--output", str(output)],
                           env=slurm_env(cluster), capture_output=True, text=True, timeout=120)
    assert again.returncode == 2 and "--force" in again.stderr


# -- the ReFrame checks through the Slurm site ---------------------------------------------
def run_config(tmp_path: Path) -> Path:
    """The default run configuration, cut down: fig1 at p = 2, 8, 9, one 1 MiB size."""
    config = yaml.safe_load((REPO / "config" / "config.yaml").read_text())
    config.update(figures=["fig1"], nprocs={"allreduce": [2, 8, 9], "others": [2]},
                  sizes={"min_bytes": "1M", "max_bytes": "1M"},
                  site={"config": "site_configs/slurm_local.py", "system": "slurm-local"})
    config["measure"].update(warmup=1, iters=3, time_budget=0.2)
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(config))
    return path


def checks_ready(libs) -> list:
    """Libraries whose pcbench is built; skip (with the reason) when the checks cannot run."""
    try:
        from mpistack import algorithms  # noqa: F401  (the checks need the algorithm table)
    except ImportError:
        pytest.skip("mpistack/algorithms.py is missing: the ReFrame checks cannot list cases")
    ready = [lib for lib in libs if (lib.pipecoll_build / "pcbench").exists()]
    if not ready:
        pytest.skip("pcbench is not built for any library: run `make setup`")
    return ready


def reframe(site_config: Path, system: str, cases: list[str], prefix: Path, config: Path,
            env: dict, run_id: str, timeout: float = 420) -> tuple[subprocess.CompletedProcess, dict]:
    """The workflow's command line (workflow/scripts/run_group.py); returns the report too."""
    report = prefix / "report.json"
    names = "|".join(re.escape(case) for case in cases)
    result = subprocess.run(
        [str(REFRAME), "-C", str(site_config), "--system", system,
         "-c", str(REPO / "reframe_checks" / "pcbench_sweep.py"), "-n", f"%case=({names})$",
         "-S", f"run_id={run_id}", "--report-file", str(report), "-r"],
        cwd=prefix, capture_output=True, text=True, timeout=timeout,
        env=dict(env, PCREPRO_CONFIG=str(config), PCREPRO_RFM_PREFIX=str(prefix)))
    outcome = {}
    if report.exists():
        for run in json.loads(report.read_text()).get("runs", []):
            for test in run.get("testcases", []):
                outcome[test["display_name"].split("%case=")[-1].strip()] = test
    return result, outcome


def test_reframe_checks_through_slurm_land_in_the_tidy_table(cluster, tmp_path):
    from analysis import tidy
    ready = checks_ready(libraries.selected())
    config = run_config(tmp_path)
    # Every library at p=2; 8 ranks once and 9 (overcommitted) once.
    cases = [f"fig1_{lib.name}_AUTO_sum_p2" for lib in ready]
    cases += [f"fig1_{ready[0].name}_AUTO_sum_p8", f"fig1_{ready[-1].name}_AUTO_sum_p9"]
    slurm_prefix = tmp_path / "slurm"
    slurm_prefix.mkdir()
    began = time.monotonic()
    result, outcome = reframe(REPO / "site_configs" / "slurm_local.py", "slurm-local", cases,
                              slurm_prefix, config, slurm_env(cluster, PCREPRO_SLURM_DIR=str(
                                  cluster.dir), PCREPRO_SLURM_AUTOSTART="0"), "through-slurm")
    print(f"{len(cases)} checks through Slurm in {time.monotonic() - began:.1f} s")
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-2000:]
    assert sorted(outcome) == sorted(cases)
    for case, test in outcome.items():
        assert test["result"] == "pass", (case, test.get("fail_reason"))
        assert (test["system"], test["partition"]) == ("slurm-local", "default")
        provenance = json.loads((Path(test["outputdir"]) / "provenance.json").read_text())
        assert provenance["launcher"] == "srun"
        assert provenance["system"] == "slurm-local:default"

    # One case through the no-scheduler site: both runs' rows load into ONE tidy table.
    local_prefix = tmp_path / "local"
    local_prefix.mkdir()
    local, local_outcome = reframe(REPO / "site_configs" / "local.py", "local", cases[:1],
                                   local_prefix, config, dict(os.environ), "local")
    assert local.returncode == 0, local.stdout[-3000:]
    table = tidy.load([slurm_prefix / "output", local_prefix / "output"])
    assert set(table["run_id"]) == {"through-slurm", "local"}
    slurm_rows = table[table["run_id"] == "through-slurm"]
    assert set(slurm_rows["library"]) == {lib.name for lib in ready}
    assert sorted(set(slurm_rows["nprocs"])) == [2, 8, 9]
    assert len(slurm_rows) == len(cases)  # one variant x one size per case


def test_reframe_slurm_scheduler_reads_sacct(cluster, tmp_path):
    """System slurm-local-acct: ReFrame's `slurm` scheduler, job states from slurmdbd."""
    if NO_ACCOUNTING:
        pytest.skip(f"no accounting (slurmdbd + MariaDB): {NO_ACCOUNTING[0]}")
    openmpi = libraries.get("openmpi")
    if openmpi not in checks_ready([openmpi]):
        pytest.skip("pcbench is not built against Open MPI")
    prefix = tmp_path / "acct"
    prefix.mkdir()
    case = "fig1_openmpi_AUTO_sum_p2"
    result, outcome = reframe(REPO / "site_configs" / "slurm_local.py", "slurm-local-acct", [case],
                              prefix, run_config(tmp_path),
                              slurm_env(cluster, PCREPRO_SLURM_DIR=str(cluster.dir),
                                        PCREPRO_SLURM_AUTOSTART="0"), "sacct")
    assert result.returncode == 0, result.stdout[-3000:]
    assert outcome[case]["result"] == "pass"
    jobid = outcome[case]["jobid"]
    sacct = subprocess.run(["sacct", "-n", "-X", "-P", "-j", str(jobid), "-o", "state,exitcode"],
                           env=slurm_env(cluster), capture_output=True, text=True, timeout=60)
    assert sacct.stdout.strip() == "COMPLETED|0:0", sacct.stdout + sacct.stderr


def test_wrong_pmi_run_fails_sanity(cluster, tmp_path):
    mpich = libraries.get("mpich")
    if mpich not in checks_ready([mpich]):
        pytest.skip("pcbench is not built against MPICH")
    # A site whose MPICH environment uses no PMI: srun starts 2 singletons that exit 0.
    site = write_site(tmp_path, '[system]\nname = "wrongpmi"\n[slurm]\npartition = "local"\n'
                                '[layouts.default]\novercommit = true\n'
                                '[mpi.mpich]\nfrom_libraries = "mpich"\nsrun_mpi = "none"\n')
    prefix = tmp_path / "run"
    prefix.mkdir()
    case = "fig1_mpich_AUTO_sum_p2"
    result, outcome = reframe(REPO / "site_configs" / "slurm_site.py", "wrongpmi", [case],
                              prefix, run_config(tmp_path),
                              slurm_env(cluster, PCREPRO_SITES=str(site)), "wrong-pmi")
    assert result.returncode != 0
    test = outcome[case]
    assert test["result"] == "fail" and test["fail_phase"] == "sanity", test
    # Caught by counting ranks (the two singletons each report 1), not by luck elsewhere.
    assert "rank" in test["fail_reason"], test["fail_reason"]


def test_workflow_targets_the_slurm_site(cluster, tmp_path):
    """The Snakemake workflow with `site: slurm_local.py / slurm-local`: same outputs."""
    openmpi = libraries.get("openmpi")
    if openmpi not in checks_ready([openmpi]):
        pytest.skip("pcbench is not built against Open MPI")
    config = yaml.safe_load((REPO / "config" / "config.yaml").read_text())
    config.update(results_dir=str(tmp_path / "results"), libraries=["openmpi"], figures=["fig3"],
                  nprocs={"allreduce": [2], "others": [2]},
                  sizes={"min_bytes": "512K", "max_bytes": "1M"},
                  site={"config": "site_configs/slurm_local.py", "system": "slurm-local"})
    config["measure"].update(warmup=1, iters=3, time_budget=0.2)
    path = tmp_path / "run.yaml"
    path.write_text(yaml.safe_dump(config))
    began = time.monotonic()
    proc = subprocess.run(
        [str(REPO / "build" / "venv" / "bin" / "snakemake"), "--snakefile",
         str(REPO / "workflow" / "Snakefile"), "--directory", str(tmp_path), "--cores", "2",
         "--configfile", str(path)], capture_output=True, text=True, timeout=600,
        env=slurm_env(cluster, PCREPRO_SLURM_DIR=str(cluster.dir), PCREPRO_SLURM_AUTOSTART="0"))
    print(f"workflow (fig3, Open MPI, p=2) through Slurm in {time.monotonic() - began:.1f} s")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    (run,) = [p for p in (tmp_path / "results").iterdir() if p.is_dir()]
    table = (run / "tables" / "measurements.csv").read_text().splitlines()
    assert len(table) == 1 + 2 * 5 * 2  # header + 2 algorithms x 5 variants x 2 sizes
    assert (run / "figures" / "fig3.png").stat().st_size > 1000
    provenances = [json.loads(p.read_text()) for p in (run / "data" / "fig3").glob("*.provenance.json")]
    assert provenances and {p["system"] for p in provenances} == {"slurm-local:default"}
    assert {p["launcher"] for p in provenances} == {"srun"}


# -- the paper's layout: one rank per node on virtual nodes ---------------------------------
def free_ports(count: int) -> int:
    """First of `count` consecutive free ports."""
    for _ in range(50):
        base = free_port()
        if base + count < 65536 and not any(slurm_cluster._port_in_use(base + i)
                                            for i in range(count)):
            return base
    raise RuntimeError(f"no {count} consecutive free ports")


@pytest.fixture(scope="module")
def nine_nodes(cluster):
    """A second cluster: 9 virtual nodes (one slurmd each) of 1 CPU, as the paper's 9 nodes."""
    folder = libraries.build_root() / f"slurm-test-nodes-{os.getpid()}"
    instance = slurm_cluster.Cluster(folder, cpus=1, nodes=9, ctld_port=free_port(),
                                     slurmd_port=free_ports(9))
    began = time.monotonic()
    instance.start()
    print(f"9-node cluster started in {time.monotonic() - began:.2f} s")
    yield instance
    instance.stop()
    shutil.rmtree(folder, ignore_errors=True)


def test_one_rank_per_node_on_nine_nodes(nine_nodes, mpi_library, hello):
    lib = mpi_library
    binary = hello(lib)
    result = subprocess.run(
        ["srun", "--nodes=9", "--ntasks-per-node=1", "sh", "-c",
         f'echo "$SLURMD_NODENAME $({binary})"'],
        env=slurm_env(nine_nodes, lib, SLURM_MPI_TYPE=slurmsite.DEFAULT_SRUN_MPI[lib.family],
                      OMPI_MCA_btl="self,tcp"),
        capture_output=True, text=True, timeout=180)
    assert result.returncode == 0, result.stderr[-2000:]
    lines = sorted(line.split() for line in result.stdout.splitlines() if line.strip())
    assert sorted(line[0] for line in lines) == [f"n{i}" for i in range(1, 10)]  # one per node
    assert sorted(int(line[2]) for line in lines) == list(range(9))
    assert {(line[4], line[6]) for line in lines} == {("9", "36")}


def test_reframe_pernode_layout(nine_nodes, tmp_path):
    """System slurm-local-pernode: sbatch --ntasks-per-node=1, 8 ranks on 8 nodes.

    MPICH: on virtual nodes Open MPI has to use TCP between ranks of one host, which on
    2 loaded cores can take minutes for this sweep (measured); the srun test above covers it.
    """
    mpich = libraries.get("mpich")
    if mpich not in checks_ready([mpich]):
        pytest.skip("pcbench is not built against MPICH")
    prefix = tmp_path / "pernode"
    prefix.mkdir()
    case = "fig1_mpich_AUTO_sum_p8"
    result, outcome = reframe(REPO / "site_configs" / "slurm_local.py", "slurm-local-pernode",
                              [case], prefix, run_config(tmp_path),
                              slurm_env(nine_nodes, PCREPRO_SLURM_DIR=str(nine_nodes.dir),
                                        PCREPRO_SLURM_AUTOSTART="0"), "pernode")
    assert result.returncode == 0, result.stdout[-3000:]
    test = outcome[case]
    assert test["result"] == "pass" and test["partition"] == "pernode"
    script = (Path(test["stagedir"]) / "rfm_job.sh").read_text()
    assert "#SBATCH --ntasks-per-node=1" in script and "#SBATCH --ntasks=8" in script
    # Where Slurm put it (ReFrame's squeue poll may miss the node list of a short job).
    log = nine_nodes.logfile("slurmctld").read_text()
    placed = re.search(rf"Allocate JobId={test['jobid']} NodeList=(\S+)", log)
    assert placed and placed.group(1) == "n[1-8]", placed  # 8 ranks -> 8 nodes
    nine_nodes.stop()
    assert nine_nodes.own_processes() == []


# -- last: stopping ------------------------------------------------------------------------
def test_stop_leaves_nothing_running(cluster):
    # A job still running when the cluster stops must not survive it either.
    job = subprocess.run(["sbatch", "--parsable", "--ntasks=1", "--output=/dev/null",
                          "--wrap", "srun sleep 613.7"], env=slurm_env(cluster),
                         capture_output=True, text=True, timeout=60)
    assert job.returncode == 0, job.stderr
    deadline = time.monotonic() + 30
    while "slurmstepd" not in {slurm_cluster._proc_comm(p) for p in cluster.own_processes()}:
        assert time.monotonic() < deadline, "the job's step never started"
        time.sleep(0.2)
    daemons = [pid for pid in cluster.running().values() if pid]
    cluster.stop()
    assert cluster.own_processes() == []
    assert set(cluster.running().values()) == {None}
    for pid in daemons:
        assert not Path(f"/proc/{pid}").exists() or slurm_cluster._proc_state(pid) == "Z"
    leftover = subprocess.run(["pgrep", "-f", "sleep 613.7"], capture_output=True, text=True)
    assert leftover.stdout.strip() == "", f"job processes survived: {leftover.stdout}"
    for port in (cluster.ctld_port, cluster.slurmd_port):
        assert not slurm_cluster._port_in_use(port)
    cluster.stop()  # idempotent
