"""ReFrame site config for the embedded default: this machine, no scheduler.

    reframe -C site_configs/local.py -c reframe_checks -r

System `local` (any host), partition `default`: local scheduler, ReFrame's `mpirun`
launcher (each environment puts its library's shim mpirun first on PATH, which adds the
flags that library needs, e.g. --oversubscribe for Open MPI). `max_jobs: 1` because the
checks are benchmarks: two running at once on 2 cores would measure each other.
Environments come from mpistack/libraries.toml through site_configs/mpienv.py.
Stage, output, perflogs and the debug log go under PCREPRO_RFM_PREFIX (default: here).
"""
import sys
from pathlib import Path

# Append, never insert: ReFrame appends the loaded file's folder to sys.path and then pops
# that position, so an insert would make it drop another entry.
if str(Path(__file__).resolve().parent) not in sys.path:
    sys.path.append(str(Path(__file__).resolve().parent))
import mpienv  # noqa: E402

PREFIX = mpienv.run_prefix()

site_configuration = {
    "systems": [{
        "name": "local",
        "descr": "This machine, processes launched directly (no batch scheduler)",
        "hostnames": [".*"],
        "modules_system": "nomod",
        "prefix": PREFIX,
        "partitions": [{
            "name": "default",
            "descr": "All local cores; MPI ranks oversubscribe them when p > cores",
            "scheduler": "local",
            "launcher": "mpirun",
            "max_jobs": 1,
            "features": ["mpi"],
            "environs": [env["name"] for env in mpienv.environments(["local"])],
        }],
    }],
    "environments": mpienv.environments(["local"]),
    "logging": mpienv.logging_config(PREFIX),
    "general": [{
        # Keep the full stage of every test (passing ones too) so a run can be audited.
        "keep_stage_files": True,
    }],
}
