"""Slurm sites for ReFrame, described by a small TOML file each (site_configs/sites/*.toml).

A site file says where jobs go (Slurm partition, account, QOS, constraint, ...), which
rank layouts to offer (each becomes a ReFrame partition: the paper's one rank per node on
8/9 nodes, and a packed one), and how each MPI library is reached (its project set-up in
mpistack/libraries.toml, environment modules, a Spack environment, or an install prefix)
plus the srun PMI plugin it needs. site_configs/sites/example.toml documents every key;
tools/onboard_cluster.py writes a starting file from what Slurm reports.

`load(path)` validates a file and returns (system, environments) dicts for a ReFrame
`site_configuration`; every mistake raises SiteConfigError naming the file, the key and the
fix. Environments carry the same `extras` as site_configs/mpienv.py, so the checks in
reframe_checks/ run unchanged on every site.
"""
from __future__ import annotations

import os
import re
import sys
import tomllib
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO_ROOT = HERE.parent
# ReFrame loads config files by path. Append, never insert: ReFrame appends the config's
# folder to sys.path and afterwards pops that POSITION, so an insert before it would make
# ReFrame drop another entry (e.g. the standard library) instead of its own.
for entry in (str(REPO_ROOT), str(HERE)):
    if entry not in sys.path:
        sys.path.append(entry)

import mpienv  # noqa: E402  (the environment builder shared with site_configs/local.py)
from mpistack import libraries  # noqa: E402

SITES_DIR = HERE / "sites"

# srun --mpi=<plugin> per MPI family, measured with Debian slurm-wlm 22.05 (tests/slurm):
# Debian Open MPI 4.1.4 needs pmix (pmi2 aborts in ext3x_client); PyPI MPICH 5.0.2 needs
# pmi2 (pmix aborts in MPI_Init); Intel MPI 2021.18 works with pmi2 and pmix. Without a
# PMI (none) every library starts N singletons that exit 0: the checks count ranks.
DEFAULT_SRUN_MPI = {"openmpi": "pmix", "mpich": "pmi2", "impi": "pmi2"}

SCHEMA = {
    "system": {"name": True, "descr": False, "hostnames": False, "modules_system": False,
               "prefix": False},
    "slurm": {"scheduler": False, "launcher": False, "partition": False, "account": False,
              "qos": False, "constraint": False, "reservation": False, "time_limit": False,
              "exclusive": False, "options": False, "max_jobs": False},
    "layout": {"descr": False, "tasks_per_node": False, "overcommit": False, "options": False},
    "mpi": {"family": False, "library": False, "from_libraries": False, "modules": False,
            "spack_env": False, "prefix": False, "srun_mpi": False, "pcbench": False,
            "env": False, "prepare_cmds": False},
}
SCHEDULERS = ("squeue", "slurm")
LAUNCHERS = ("srun", "mpirun", "mpiexec")
SRUN_MPI = ("pmix", "pmi2", "none", "cray_shasta", "pmix_v4", "pmix_v3", "pmix_v5")
MODULES_SYSTEMS = ("nomod", "lmod", "tmod", "tmod31", "tmod32", "tmod4", "spack")
NAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]*$")


class SiteConfigError(ValueError):
    """A site file that cannot describe a ReFrame system; the message says how to fix it."""


class _Site:
    def __init__(self, path: Path):
        self.path = Path(path)
        if not self.path.is_file():
            raise SiteConfigError(f"site file {self.path} does not exist (site files live in "
                                  f"{SITES_DIR}; tools/onboard_cluster.py writes one)")
        try:
            with open(self.path, "rb") as handle:
                self.raw = tomllib.load(handle)
        except tomllib.TOMLDecodeError as error:
            raise SiteConfigError(f"{self.path}: not valid TOML: {error}") from None

    def fail(self, where: str, message: str):
        raise SiteConfigError(f"{self.path}: [{where}] {message}")

    def table(self, key: str, kind: str, required: bool = True) -> dict:
        value = self.raw.get(key)
        if value is None:
            if required:
                self.fail(key, f"missing table [{key}] (see {SITES_DIR / 'example.toml'})")
            return {}
        if not isinstance(value, dict):
            self.fail(key, f"must be a table, not {type(value).__name__}")
        self.check_keys(key, value, kind)
        return value

    def check_keys(self, where: str, table: dict, kind: str) -> None:
        allowed = SCHEMA[kind]
        unknown = sorted(set(table) - set(allowed))
        if unknown:
            self.fail(where, f"unknown key(s) {', '.join(unknown)}; allowed: {', '.join(allowed)}")
        missing = [key for key, required in allowed.items() if required and key not in table]
        if missing:
            self.fail(where, f"missing required key(s) {', '.join(missing)}")

    def typed(self, where: str, table: dict, key: str, kind, default=None):
        value = table.get(key, default)
        if value is not None and not isinstance(value, kind):
            names = kind.__name__ if isinstance(kind, type) else "/".join(k.__name__ for k in kind)
            self.fail(where, f"{key} must be {names}, not {type(value).__name__} ({value!r})")
        return value

    def choice(self, where: str, table: dict, key: str, choices, default):
        value = self.typed(where, table, key, str, default)
        if value not in choices:
            self.fail(where, f"{key} = {value!r} is not one of {', '.join(choices)}")
        return value

    def strings(self, where: str, table: dict, key: str) -> list[str]:
        value = table.get(key, [])
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            self.fail(where, f"{key} must be a list of strings, not {value!r}")
        return value


def _sbatch_options(site: _Site, slurm: dict) -> list[str]:
    options = []
    for key, flag in (("partition", "--partition"), ("account", "--account"), ("qos", "--qos"),
                      ("constraint", "--constraint"), ("reservation", "--reservation")):
        value = site.typed("slurm", slurm, key, str)
        if value:
            options.append(f"{flag}={value}")
    if site.typed("slurm", slurm, "exclusive", bool, False):
        # Benchmarks should not share nodes with other jobs.
        options.append("--exclusive")
    return options + site.strings("slurm", slurm, "options")


def _environment(site: _Site, key: str, spec: dict, system: str, families: set[str]) -> dict:
    where = f"mpi.{key}"
    site.check_keys(where, spec, "mpi")
    if not NAME.match(key):
        site.fail(where, f"environment name {key!r} may only use letters, digits, _ . -")
    ways = [w for w in ("from_libraries", "modules", "spack_env", "prefix") if w in spec]
    if len(ways) != 1:
        site.fail(where, "say how this MPI is reached with exactly one of from_libraries, "
                         f"modules, spack_env, prefix (found: {', '.join(ways) or 'none'})")
    env_vars: dict[str, str] = {}
    if "from_libraries" in spec:
        name = site.typed(where, spec, "from_libraries", str)
        try:
            lib = libraries.get(name)
        except libraries.UnknownLibraryError as error:
            site.fail(where, f"from_libraries: {error}")
        family = site.typed(where, spec, "family", str, lib.family)
        environ = mpienv.environment(lib, [system])
        environ["name"] = key
    else:
        family = site.typed(where, spec, "family", str)
        if family is None:
            site.fail(where, f"missing family (one of {', '.join(sorted(families))}): it selects "
                             "the algorithm knobs and the default srun PMI")
        library = site.typed(where, spec, "library", str, key)
        pcbench = site.typed(where, spec, "pcbench", str, str(
            libraries.build_root() / "pipecoll" / library / "pcbench"))
        environ = {"name": key, "target_systems": [system], "features": ["mpi", f"mpi_{family}"],
                   "extras": {"mpi_library": library, "mpi_family": family,
                              "mpi_display": library, "pcbench": pcbench}}
        if "modules" in spec:
            environ["modules"] = site.strings(where, spec, "modules")
        elif "spack_env" in spec:
            senv = site.typed(where, spec, "spack_env", str)
            environ["prepare_cmds"] = [f"spack env activate {senv}"]
        else:
            prefix = Path(site.typed(where, spec, "prefix", str))
            env_vars["PATH"] = f"{prefix / 'bin'}:$PATH"
            env_vars["LD_LIBRARY_PATH"] = f"{prefix / 'lib'}:$LD_LIBRARY_PATH"
            environ["cc"] = str(prefix / "bin" / "mpicc")
    if family not in families:
        site.fail(where, f"unknown MPI family {family!r}; known: {', '.join(sorted(families))} "
                         f"(from {libraries.TABLE.relative_to(REPO_ROOT)})")
    environ["extras"]["mpi_family"] = family
    if "pcbench" in spec:
        environ["extras"]["pcbench"] = site.typed(where, spec, "pcbench", str)
    srun_mpi = site.choice(where, spec, "srun_mpi", SRUN_MPI, DEFAULT_SRUN_MPI.get(family, "pmi2"))
    # srun reads SLURM_MPI_TYPE, so one srun launcher serves every library.
    env_vars["SLURM_MPI_TYPE"] = srun_mpi
    extra = site.typed(where, spec, "env", dict, {})
    for name, value in extra.items():
        if not isinstance(value, (str, int, float)):
            site.fail(where, f"env.{name} must be a string or number, not {value!r}")
        env_vars[name] = str(value)
    environ["env_vars"] = list(environ.get("env_vars", [])) + [[k, v] for k, v in env_vars.items()]
    prepare = site.strings(where, spec, "prepare_cmds")
    if prepare:
        environ["prepare_cmds"] = list(environ.get("prepare_cmds", [])) + prepare
    environ["extras"]["srun_mpi"] = srun_mpi
    return environ


def load(path: Path | str, prefix: str | None = None,
         overrides: dict[str, dict] | None = None) -> tuple[dict, list[dict]]:
    """Validate one site file; return its ReFrame system and environments.

    `overrides` replaces keys of top-level tables ({"slurm": {"scheduler": "slurm"}}), and
    the whole [layouts] table if given, so one file can describe variants of a system.
    """
    site = _Site(Path(path))
    for table, values in (overrides or {}).items():
        if table == "layouts":
            site.raw["layouts"] = dict(values)
        else:
            site.raw.setdefault(table, {}).update(values)
    unknown = sorted(set(site.raw) - {"system", "slurm", "layouts", "mpi"})
    if unknown:
        site.fail(unknown[0], "unknown table; a site file has [system], [slurm], "
                              "[layouts.<name>] and [mpi.<name>]")
    system = site.table("system", "system")
    slurm = site.table("slurm", "slurm", required=False)
    name = site.typed("system", system, "name", str)
    if not NAME.match(name):
        site.fail("system", f"name {name!r} may only use letters, digits, _ . -")

    families = {lib.family for lib in libraries.load().values()}
    mpis = site.raw.get("mpi")
    if not isinstance(mpis, dict) or not mpis:
        site.fail("mpi", "no MPI library: add at least one [mpi.<name>] table")
    environments = [_environment(site, key, spec if isinstance(spec, dict) else
                                 site.fail(f"mpi.{key}", "must be a table"), name, families)
                    for key, spec in mpis.items()]
    # PCREPRO_MPIS narrows every site to the selected libraries, as in local.py.
    if os.environ.get("PCREPRO_MPIS", "").strip():
        wanted = {lib.name for lib in libraries.selected()}
        environments = [env for env in environments if env["extras"]["mpi_library"] in wanted]

    layouts = site.raw.get("layouts")
    if not isinstance(layouts, dict) or not layouts:
        site.fail("layouts", "no layout: add at least one [layouts.<name>] table (e.g. "
                             "[layouts.pernode] tasks_per_node = 1, the paper's layout)")
    scheduler = site.choice("slurm", slurm, "scheduler", SCHEDULERS, "squeue")
    launcher = site.choice("slurm", slurm, "launcher", LAUNCHERS, "srun")
    common = _sbatch_options(site, slurm)
    max_jobs = site.typed("slurm", slurm, "max_jobs", int, 1)
    time_limit = site.typed("slurm", slurm, "time_limit", str)
    partitions = []
    for lname, layout in layouts.items():
        where = f"layouts.{lname}"
        if not isinstance(layout, dict):
            site.fail(where, "must be a table")
        site.check_keys(where, layout, "layout")
        if not NAME.match(lname):
            site.fail(where, f"layout name {lname!r} may only use letters, digits, _ . -")
        options = list(common)
        per_node = site.typed(where, layout, "tasks_per_node", int)
        if per_node is not None:
            if per_node < 1:
                site.fail(where, f"tasks_per_node must be >= 1, not {per_node}")
            # With ReFrame's --ntasks=N this places N ranks on ceil(N/per_node) nodes.
            options.append(f"--ntasks-per-node={per_node}")
        if site.typed(where, layout, "overcommit", bool, False):
            # More ranks than declared CPUs (9 ranks on an 8-CPU node).
            options.append("--overcommit")
        options += site.strings(where, layout, "options")
        partition = {
            "name": lname,
            "descr": site.typed(where, layout, "descr", str, lname),
            "scheduler": scheduler,
            "launcher": launcher,
            "access": options,
            "max_jobs": max_jobs,
            "features": ["mpi"],
            "environs": [env["name"] for env in environments],
            "extras": {"tasks_per_node": per_node or 0},
        }
        if time_limit:
            partition["time_limit"] = time_limit
        partitions.append(partition)

    result = {
        "name": name,
        "descr": site.typed("system", system, "descr", str, f"Slurm site {name}"),
        "hostnames": site.strings("system", system, "hostnames") or [f"^{re.escape(name)}$"],
        "modules_system": site.choice("system", system, "modules_system", MODULES_SYSTEMS, "nomod"),
        "prefix": site.typed("system", system, "prefix", str, prefix or mpienv.run_prefix()),
        "partitions": partitions,
    }
    return result, environments


def site_configuration(paths: list[Path | str | tuple[Path | str, dict]]) -> dict:
    """A complete ReFrame configuration with one system per site file.

    An entry may be (path, overrides) to load a variant of a file (see load()).
    """
    if not paths:
        raise SiteConfigError(f"no site file: put one in {SITES_DIR} "
                              "(tools/onboard_cluster.py writes one) or set PCREPRO_SITES")
    systems, environments, seen = [], [], {}
    for entry in paths:
        path, overrides = entry if isinstance(entry, tuple) else (entry, None)
        system, envs = load(path, overrides=overrides)
        if system["name"] in seen:
            raise SiteConfigError(f"{path}: system name {system['name']!r} already defined in "
                                  f"{seen[system['name']]}")
        seen[system["name"]] = path
        systems.append(system)
        environments += envs
    prefix = mpienv.run_prefix()
    return {
        "systems": systems,
        "environments": environments,
        "logging": mpienv.logging_config(prefix),
        "general": [{"keep_stage_files": True, "report_file": f"{prefix}/report.json"}],
    }


def configuration_or_exit(paths: list) -> dict:
    """site_configuration(), but a bad site file ends ReFrame with the message alone.

    ReFrame prints a traceback for any exception raised while loading a config file; a
    user's typo deserves one line naming the file, the key and the fix instead.
    """
    try:
        return site_configuration(paths)
    except SiteConfigError as error:
        raise SystemExit(f"ERROR: bad Slurm site config: {error}") from None


def site_files() -> list[Path]:
    """PCREPRO_SITES (colon-separated files) if set, else every site_configs/sites/*.toml."""
    chosen = os.environ.get("PCREPRO_SITES", "")
    if chosen.strip():
        return [Path(p) for p in chosen.split(":") if p.strip()]
    return sorted(SITES_DIR.glob("*.toml"))
