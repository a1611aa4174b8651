"""ReFrame site config for real Slurm clusters, one system per site file.

    reframe -C site_configs/slurm_site.py --system <name>:<layout> -c reframe_checks -r

Reads every site_configs/sites/*.toml (or the files in PCREPRO_SITES, colon-separated);
each describes one cluster: Slurm partition/account/QOS/constraint, the rank layouts to
offer as ReFrame partitions (`pernode`: one rank per node as in the paper; `packed`:
several per node) and how each MPI is reached. Start from sites/example.toml, or let
tools/onboard_cluster.py write one from what Slurm reports. Format and checks: slurmsite.py.
"""
import sys
from pathlib import Path

# Append only (see slurmsite.py: ReFrame pops sys.path by position after loading this).
sys.path.append(str(Path(__file__).resolve().parent))
import slurmsite  # noqa: E402

site_configuration = slurmsite.configuration_or_exit(slurmsite.site_files())
