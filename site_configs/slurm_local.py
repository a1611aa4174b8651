"""ReFrame site config for the private one-node Slurm cluster (tools/slurm_cluster.py).

    reframe -C site_configs/slurm_local.py --system slurm-local -c reframe_checks -r

System `slurm-local`, partition `default`: scheduler `squeue`, launcher `srun`, one
environment per library of mpistack/libraries.toml (PCREPRO_MPIS selects), each with the
srun PMI plugin it needs (SLURM_MPI_TYPE). Described by slurm_local.toml, loaded by the same
code as a real site (slurmsite.py). System `slurm-local-acct` is the same with ReFrame's
`slurm` scheduler, which reads job states and exit codes from sacct: it needs the cluster
started with accounting (`tools/slurm_cluster.py start --accounting`, or
PCREPRO_SLURM_ACCOUNTING=1 for the automatic start). System `slurm-local-pernode`, partition
`pernode`, places one rank per node as the paper did (sbatch --ntasks-per-node=1): it needs
the cluster started with virtual nodes (`tools/slurm_cluster.py start --nodes 9 --cpus 1`).

The cluster lives in PCREPRO_SLURM_DIR (default build/slurm); this file points SLURM_CONF
there for ReFrame's sbatch/squeue/srun and starts the cluster when it is not running
(idempotent, ~0.3 s, ~3-9 s with accounting; PCREPRO_SLURM_AUTOSTART=0 turns that into an
error instead). Stop it with `tools/slurm_cluster.py stop`.
"""
import os
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
# Append only (see slurmsite.py: ReFrame pops sys.path by position after loading this).
sys.path.append(str(HERE))
sys.path.append(str(HERE.parent / "tools"))
import slurm_cluster  # noqa: E402
import slurmsite  # noqa: E402

cluster = slurm_cluster.Cluster(
    os.environ.get("PCREPRO_SLURM_DIR", slurm_cluster.DEFAULT_DIR)).adopt_configuration()
cluster.accounting |= os.environ.get("PCREPRO_SLURM_ACCOUNTING", "0") == "1"
os.environ["SLURM_CONF"] = str(cluster.conf)
if not all(cluster.running().values()):
    # SystemExit, not an exception: ReFrame would bury the message under a traceback.
    if os.environ.get("PCREPRO_SLURM_AUTOSTART", "1") == "0":
        raise SystemExit(f"ERROR: the local Slurm cluster in {cluster.dir} is not running: run "
                         "`tools/slurm_cluster.py start` (or unset PCREPRO_SLURM_AUTOSTART)")
    try:
        cluster.start()
    except slurm_cluster.ClusterError as error:
        raise SystemExit(f"ERROR: cannot start the local Slurm cluster: {error}") from None

LOCAL = HERE / "slurm_local.toml"
site_configuration = slurmsite.configuration_or_exit([
    LOCAL,
    (LOCAL, {"system": {"name": "slurm-local-acct",
                        "descr": "slurm-local with accounting: ReFrame's slurm scheduler (sacct)"},
             "slurm": {"scheduler": "slurm"}}),
    # The paper's layout: needs a cluster of virtual nodes (`start --nodes 9`).
    (LOCAL, {"system": {"name": "slurm-local-pernode",
                        "descr": "slurm-local, one rank per (virtual) node"},
             "layouts": {"pernode": {"descr": "One rank per node, as the paper's 8/9 nodes",
                                     "tasks_per_node": 1}},
             # Virtual nodes share one host: Open MPI's shared-memory transport would map
             # every node's "local rank 0" to the same segment and crash or hang; TCP works.
             "mpi": {"openmpi": {"from_libraries": "openmpi",
                                 "env": {"OMPI_MCA_btl": "self,tcp"}}}}),
])
