"""ReFrame environments for the pipecoll builds of the project's Spack environment.

A Spack site runs the same checks as the embedded default: one ReFrame environment per
pipecoll build in spack.lock (pipecoll against each MPI library of the matrix), with the
same `extras` keys as site_configs/mpienv.py (mpi_library, mpi_family, mpi_display,
pcbench, mpi_version), so `%mpi_library=openmpi` picks Spack's Open MPI builds as well. In a site config:

    sys.path.append(str(Path(__file__).resolve().parent / "spack"))  # append: ReFrame pops sys.path by position
    import reframe_environments as spack_envs
    envs = spack_envs.environments(["mycluster"], only_installed=True)
    # partitions: "environs": [e["name"] for e in envs]; top level: "environments": envs

Each environment loads its build in the job script with `spack load --sh /<hash>` (the
pipecoll prefix and its MPI's: mpicc/mpirun/pcbench on PATH, the MPI's own run-time
variables such as I_MPI_ROOT), so it is exactly what Spack installed, externals included.
spack.lock is read as JSON (no Spack needed to build the dicts); Spack is needed to run
the checks, and for `only_installed`.

    python3 site_configs/spack/reframe_environments.py [--env DIR] [--system NAME]

prints the environments as JSON (to inspect what a site config would get).
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
if str(REPO_ROOT) not in sys.path:  # ReFrame loads site configs by path, not as a package
    sys.path.append(str(REPO_ROOT))

from mpistack import libraries  # noqa: E402

# Spack package providing `mpi` -> family in mpistack/libraries.toml.
SPACK_MPI_FAMILY = {"openmpi": "openmpi", "mpich": "mpich", "intel-oneapi-mpi": "impi"}


class SpackEnvironmentError(RuntimeError):
    """The Spack environment cannot give ReFrame environments; the message says why."""


@dataclasses.dataclass(frozen=True)
class PipecollBuild:
    """One concretized pipecoll root of spack.lock and the MPI it links."""
    hash: str
    spec: str           # the root as written in spack.yaml
    variants: dict
    mpi_name: str       # Spack package name (openmpi, mpich, intel-oneapi-mpi)
    mpi_version: str
    mpi_hash: str
    mpi_external: str   # external prefix, "" when Spack builds it

    @property
    def env_name(self) -> str:
        version = re.sub(r"[^A-Za-z0-9]", "_", self.mpi_version)
        return f"spack-{self.mpi_name}-{version}-{self.hash[:7]}"


def spack_executable() -> str:
    """`spack` on PATH, else $SPACK_ROOT/bin/spack."""
    found = shutil.which("spack")
    if found:
        return found
    root = os.environ.get("SPACK_ROOT")
    if root and Path(root, "bin", "spack").exists():
        return str(Path(root, "bin", "spack"))
    raise SpackEnvironmentError("spack not found: put Spack's bin/ on PATH or set SPACK_ROOT")


def pipecoll_builds(env_dir: Path = REPO_ROOT) -> list[PipecollBuild]:
    """Every pipecoll root of <env_dir>/spack.lock with the MPI library it depends on."""
    lock_path = Path(env_dir) / "spack.lock"
    if not lock_path.exists():
        raise SpackEnvironmentError(
            f"{lock_path} does not exist: concretize first (spack -e {env_dir} concretize)")
    try:
        lock = json.loads(lock_path.read_text())
        nodes = lock["concrete_specs"]
        roots = lock["roots"]
    except (ValueError, KeyError, TypeError) as err:
        raise SpackEnvironmentError(f"{lock_path} is not a Spack lockfile ({err})") from None
    builds = []
    for root in roots:
        node = nodes.get(root["hash"], {})
        if node.get("name") != "pipecoll":
            continue
        mpi = [dep for dep in node.get("dependencies", [])
               if "mpi" in dep.get("parameters", {}).get("virtuals", [])]
        if len(mpi) != 1:
            raise SpackEnvironmentError(
                f"{lock_path}: pipecoll /{root['hash'][:7]} has {len(mpi)} mpi providers")
        mpi_node = nodes[mpi[0]["hash"]]
        builds.append(PipecollBuild(
            hash=root["hash"], spec=root.get("spec", ""),
            variants={k: v for k, v in node.get("parameters", {}).items() if isinstance(v, bool)},
            mpi_name=mpi_node["name"], mpi_version=str(mpi_node["version"]),
            mpi_hash=mpi[0]["hash"],
            mpi_external=(mpi_node.get("external") or {}).get("path", "") or "",
        ))
    return builds


def installed_hashes(env_dir: Path = REPO_ROOT, spack: str | None = None) -> set[str]:
    """Hashes of the environment's installed pipecoll builds (one Spack call)."""
    spack = spack or spack_executable()
    done = subprocess.run([spack, "-e", str(env_dir), "find", "--format", "{hash}", "pipecoll"],
                          capture_output=True, text=True, timeout=300)
    if done.returncode not in (0, 1):  # 1: nothing matches
        raise SpackEnvironmentError(f"spack find failed: {done.stderr.strip()[:500]}")
    return {line.strip() for line in done.stdout.splitlines() if line.strip()}


def library_for(build: PipecollBuild) -> libraries.MpiLibrary:
    family = SPACK_MPI_FAMILY.get(build.mpi_name)
    matches = [lib for lib in libraries.load().values() if lib.family == family]
    if not matches:
        raise SpackEnvironmentError(
            f"pipecoll /{build.hash[:7]} uses MPI {build.mpi_name!r}, which no library of "
            f"{libraries.TABLE.name} describes (known Spack packages: "
            f"{', '.join(sorted(SPACK_MPI_FAMILY))})")
    return matches[0]


def environment(build: PipecollBuild, target_systems: list[str], env_dir: Path = REPO_ROOT,
                spack: str = "spack") -> dict:
    """The ReFrame environment running `build` (see module docstring)."""
    lib = library_for(build)
    # The library's launch settings from libraries.toml that do not point into the local
    # set-up (its venv or shim PATH): e.g. Open MPI's permission to run as root and to
    # oversubscribe. Spack's load provides PATH and the library's own variables.
    env_vars = [[key, value] for key, value in lib.env_overrides().items()
                if "{venv}" not in lib.env[key] and "{PATH}" not in lib.env[key]]
    load = f"{shlex.quote(spack)} -e {shlex.quote(str(env_dir))} load --sh /{build.hash}"
    install_hint = f"spack -e {env_dir} install"
    return {
        "name": build.env_name,
        "target_systems": list(target_systems),
        "prepare_cmds": [
            # Two steps: `eval "$(failing command)"` would succeed with nothing loaded.
            f"_pcrepro_spack_load=$({load}) || {{ echo 'pipecoll /{build.hash[:7]} is not "
            f"installed in {env_dir}: run {install_hint}' >&2; exit 1; }}",
            'eval "$_pcrepro_spack_load"',
        ],
        "cc": "mpicc",
        "env_vars": env_vars,
        "features": ["mpi", f"mpi_{lib.family}", "spack"],
        "extras": {
            "mpi_library": lib.name,
            "mpi_family": lib.family,
            "mpi_display": f"{lib.display} {build.mpi_version} (Spack)",
            # Not the set-up's install: the checks pick the knob table by this version.
            "mpi_version": build.mpi_version,
            "pcbench": "pcbench",  # on PATH once the build is loaded
            "spack_env": str(env_dir),
            "spack_hash": build.hash,
            "spack_mpi": f"{build.mpi_name}@{build.mpi_version}",
            "spack_mpi_external": build.mpi_external,
        },
    }


def environments(target_systems: list[str], env_dir: Path | str = REPO_ROOT,
                 only_installed: bool = False, spack: str | None = None) -> list[dict]:
    """One environment per pipecoll build of the Spack environment at `env_dir`
    (with `only_installed`, those Spack has installed; needs Spack)."""
    env_dir = Path(env_dir).resolve()
    builds = pipecoll_builds(env_dir)
    if only_installed or spack is None:
        try:
            spack = spack or spack_executable()
        except SpackEnvironmentError:
            if only_installed:
                raise
            spack = "spack"  # resolved on the compute node's PATH at run time
    if only_installed:
        done = installed_hashes(env_dir, spack)
        builds = [b for b in builds if b.hash in done]
    return [environment(b, target_systems, env_dir, spack) for b in builds]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--env", default=str(REPO_ROOT), help="Spack environment directory")
    parser.add_argument("--system", default="local", help="ReFrame system name")
    parser.add_argument("--only-installed", action="store_true")
    args = parser.parse_args(argv)
    try:
        envs = environments([args.system], args.env, only_installed=args.only_installed)
    except SpackEnvironmentError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    json.dump(envs, sys.stdout, indent=2)
    print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
