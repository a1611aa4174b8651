"""ReFrame environments for the MPI libraries in mpistack/libraries.toml, and the logging
section every site config of this project shares.

One environment per library, named after it (`openmpi`, `mpich`, `impi`), built from the
library table, so no path is typed in a site config. A site whose MPI comes from somewhere
else (a Spack environment, a module, a vendor prefix) adds one more dict with the same
`extras` keys; the checks in reframe_checks/ select environments by these extras only:

  extras.mpi_library   library name as in libraries.toml (openmpi | mpich | impi); the
                       checks pick environments with `%mpi_library=<name>` and read the
                       algorithm knobs for that library's family
  extras.mpi_family    openmpi | mpich | impi (selects the knob table in mpistack.algorithms)
  extras.pcbench       path of the pcbench binary built against this library
                       (or a bare name found on the environment's PATH)
  extras.mpi_version   (optional) the library's version, for an environment that brings
                       its own build; without it the set-up's install is asked (the
                       algorithm knobs depend on the version: mpistack/algorithms.toml)
"""
from __future__ import annotations

import os
import sys
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
if str(REPO_ROOT) not in sys.path:  # ReFrame loads this file by path, not as a package
    sys.path.append(str(REPO_ROOT))

from mpistack import libraries  # noqa: E402


def run_prefix() -> str:
    """Where ReFrame keeps stage/, output/, perflogs/ and its log: PCREPRO_RFM_PREFIX
    (the workflow sets results/<run_id>/reframe/<group>), else the current directory."""
    return os.environ.get("PCREPRO_RFM_PREFIX", ".")


def environment(lib: libraries.MpiLibrary, target_systems: list[str]) -> dict:
    """The ReFrame environment that reaches `lib` through the set-up's shim prefix."""
    env_vars = dict(lib.env_overrides())
    # The shim bin (mpicc/mpirun/mpiexec scripts that add the library's launch flags) goes
    # first, so ReFrame's plain `mpirun` launcher reaches the right library for all three.
    path_rest = env_vars.pop("PATH", "$PATH")
    env_vars = {"PATH": f"{lib.prefix / 'bin'}:{path_rest}", **env_vars}
    return {
        "name": lib.name,
        "target_systems": list(target_systems),
        "cc": str(lib.shim_mpicc),
        "env_vars": [[key, value] for key, value in env_vars.items()],
        "features": ["mpi", f"mpi_{lib.family}"],
        "extras": {
            "mpi_library": lib.name,
            "mpi_family": lib.family,
            "mpi_display": lib.display,
            "pcbench": str(lib.pipecoll_build / "pcbench"),
        },
    }


def environments(target_systems: list[str], names: str | None = None) -> list[dict]:
    """One environment per selected library (PCREPRO_MPIS or `names`, default all)."""
    return [environment(lib, target_systems) for lib in libraries.selected(names)]


PERFLOG_FORMAT = (
    "%(check_job_completion_time)s|reframe %(version)s|%(check_display_name)s|"
    "%(check_system)s:%(check_partition)s|%(check_environ)s|%(check_num_tasks)s|"
    "%(check_result)s|%(check_perfvalues)s"
)


def logging_config(prefix: str | None = None) -> list[dict]:
    """Console at info, a debug log and the per-test perflogs under `prefix`."""
    prefix = run_prefix() if prefix is None else prefix
    os.makedirs(prefix, exist_ok=True)  # the log file handler does not create its folder
    return [{
        "level": "debug",
        "handlers": [
            {"type": "stream", "name": "stdout", "level": "info", "format": "%(message)s"},
            {"type": "file", "name": f"{prefix}/reframe.log", "level": "debug",
             "format": "[%(asctime)s] %(levelname)s: %(check_info)s: %(message)s",
             "append": True},
        ],
        "handlers_perflog": [{
            # One file per test under <prefix>/perflogs/<system>/<partition>/; the header
            # line names every column, including each performance variable.
            "type": "filelog",
            "prefix": "%(check_system)s/%(check_partition)s",
            "level": "info",
            "basedir": f"{prefix}/perflogs",
            "format": PERFLOG_FORMAT,
            "format_perfvars": "%(check_perf_value)s|%(check_perf_unit)s|",
            "append": True,
        }],
    }]
