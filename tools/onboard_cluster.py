#!/usr/bin/env python3
"""Write a starting Slurm site file for a new cluster from what Slurm and the machine report.

Run it on the cluster's login node (Slurm clients on PATH, SLURM_CONF as for your jobs):

    build/venv/bin/python tools/onboard_cluster.py                      # -> site_configs/sites/<cluster>.toml
    build/venv/bin/python tools/onboard_cluster.py --partition compute --account proj123
    build/venv/bin/python tools/onboard_cluster.py --output my.toml --force

It reads `scontrol show config` (cluster name), `scontrol -o show partition` / `node`
(nodes, CPUs per node, features), `srun --mpi=list` (PMI plugins), and looks for MPI
libraries: this project's own set-up (mpistack/libraries.toml, build/mpi/<name>), environment
modules (`module -t avail`) and mpirun on PATH. It writes the file, loads it back with
site_configs/slurmsite.py (so what it writes is valid), and prints what to check by hand:
account/QOS, the module names, the PMI choice. Then:

    reframe -C site_configs/slurm_site.py --system <cluster>:pernode -c reframe_checks -r
"""
from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
for entry in (str(REPO_ROOT), str(REPO_ROOT / "site_configs")):
    if entry not in sys.path:
        sys.path.append(entry)

import slurmsite  # noqa: E402
from mpistack import libraries  # noqa: E402

MODULE_PATTERNS = {  # module name -> MPI family
    "openmpi": re.compile(r"^(open-?mpi|ompi)\b", re.I),
    "mpich": re.compile(r"^(mpich|cray-mpich|mvapich2?)\b", re.I),
    "impi": re.compile(r"^(impi|intel-?mpi|intel-oneapi-mpi)\b", re.I),
}


class OnboardError(RuntimeError):
    pass


def run(cmd: list[str], timeout: float = 30) -> subprocess.CompletedProcess:
    try:
        return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    except FileNotFoundError:
        raise OnboardError(f"`{cmd[0]}` not found: run this on a node with the Slurm client "
                           "commands (sinfo, scontrol, srun) on PATH") from None
    except subprocess.TimeoutExpired:
        raise OnboardError(f"`{' '.join(cmd)}` did not answer within {timeout:.0f} s: is "
                           "slurmctld reachable (SLURM_CONF)?") from None


def parse_records(text: str) -> list[dict[str, str]]:
    """`scontrol -o show ...` lines of Key=Value pairs (values without spaces)."""
    records = []
    for line in text.splitlines():
        if line.strip():
            records.append(dict(item.split("=", 1) for item in line.split() if "=" in item))
    return records


def slurm_facts(partition: str | None) -> dict:
    config = run(["scontrol", "show", "config"])
    if config.returncode != 0:
        raise OnboardError(f"`scontrol show config` failed: {config.stderr.strip()} "
                           "(is Slurm running and SLURM_CONF right?)")
    cluster = re.search(r"^ClusterName\s*=\s*(\S+)", config.stdout, re.M)
    version = re.search(r"^SLURM_VERSION\s*=\s*(\S+)", config.stdout, re.M)
    partitions = parse_records(run(["scontrol", "-o", "show", "partition"]).stdout)
    if not partitions:
        raise OnboardError("Slurm reports no partition (`scontrol -o show partition` is empty)")
    names = [p["PartitionName"] for p in partitions]
    if partition is None:
        default = [p for p in partitions if p.get("Default") == "YES"]
        chosen = (default or partitions)[0]
    elif partition in names:
        chosen = partitions[names.index(partition)]
    else:
        raise OnboardError(f"no partition {partition!r}; Slurm has: {', '.join(names)}")
    nodes = [n for n in parse_records(run(["scontrol", "-o", "show", "node"]).stdout)
             if chosen["PartitionName"] in n.get("Partitions", "").split(",")]
    cpus = sorted({int(n.get("CPUTot", 0)) for n in nodes}) or [0]
    features = sorted({f for n in nodes for f in n.get("AvailableFeatures", "").split(",")
                       if f and f != "(null)"})
    listing = run(["srun", "--mpi=list"])
    plugins = re.findall(r"^\s*(?:srun: )?(\w+)\s*$", listing.stdout + listing.stderr, re.M)
    plugins = [p for p in plugins if p not in ("MPI", "types")]
    return {"cluster": cluster.group(1) if cluster else "cluster",
            "version": version.group(1) if version else "?",
            "partition": chosen["PartitionName"], "all_partitions": names,
            "nodes": int(chosen.get("TotalNodes", len(nodes)) or len(nodes)),
            "cpus_per_node": cpus, "features": features, "pmi_plugins": plugins}


def mpirun_family(mpirun: str) -> str | None:
    text = run([mpirun, "--version"], timeout=20)
    out = text.stdout + text.stderr
    if "Open MPI" in out or "OpenRTE" in out:
        return "openmpi"
    if "Intel(R) MPI" in out:
        return "impi"
    if "HYDRA" in out or "MPICH" in out or "MVAPICH" in out:
        return "mpich"
    return None


def find_mpis() -> list[dict]:
    """Candidate ways to reach each MPI family, best first (set-up, modules, PATH)."""
    found = []
    for lib in libraries.load().values():
        if lib.shim_mpirun.exists():
            found.append({"key": lib.name, "family": lib.family, "from_libraries": lib.name,
                          "why": f"this project's set-up ({lib.display}, {lib.prefix})"})
    if shutil.which("bash"):
        avail = subprocess.run(["bash", "-lc", "module -t avail 2>&1"], capture_output=True,
                               text=True, timeout=60).stdout
        for line in avail.splitlines():
            name = line.strip().rstrip("/")
            for family, pattern in MODULE_PATTERNS.items():
                if name and not name.endswith(":") and pattern.match(name):
                    found.append({"key": family, "family": family, "modules": [name],
                                  "why": f"environment module {name}"})
    mpirun = shutil.which("mpirun")
    if mpirun:
        family = mpirun_family(mpirun)
        if family:
            prefix = str(Path(os.path.realpath(mpirun)).parent.parent)
            found.append({"key": family, "family": family, "prefix": prefix,
                          "why": f"mpirun on PATH ({mpirun})"})
    return found


def toml(value) -> str:
    """A TOML literal for str/int/bool/list of str (JSON strings are valid TOML strings)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(toml(v) for v in value) + "]"
    return json.dumps(value) if isinstance(value, str) else str(value)


def render(facts: dict, mpis: list[dict], name: str, account: str | None, qos: str | None) -> str:
    cpus = facts["cpus_per_node"]
    plugins = facts["pmi_plugins"]
    lines = [
        f"# Written by tools/onboard_cluster.py from Slurm {facts['version']} on cluster "
        f"{facts['cluster']!r}.",
        "# A STARTING POINT: check every line marked CHECK, then run",
        f"#   reframe -C site_configs/slurm_site.py --system {name}:pernode -c reframe_checks -r",
        "# All keys are documented in site_configs/sites/example.toml.",
        "",
        "[system]",
        f"name = {toml(name)}",
        "descr = " + toml(f"{facts['cluster']}: partition {facts['partition']}, "
                          f"{facts['nodes']} nodes, {cpus[0]} CPUs per node"),
        "modules_system = " + toml("lmod" if any("modules" in m for m in mpis) else "nomod") +
        "   # CHECK: lmod | tmod4 | nomod ...",
        "",
        "[slurm]",
        'scheduler = "squeue"       # "slurm" if sacct works here (ReFrame then reads exit codes)',
        'launcher = "srun"',
        f"partition = {toml(facts['partition'])}   # Slurm has: {', '.join(facts['all_partitions'])}",
    ]
    lines.append(f"account = {toml(account)}" if account else
                 '# account = "..."          # CHECK: sbatch --account, if the site needs one')
    lines.append(f"qos = {toml(qos)}" if qos else '# qos = "..."')
    if facts["features"]:
        lines.append(f"# constraint = {toml(facts['features'][0])}   # node features: "
                     f"{', '.join(facts['features'])}")
    lines += [
        "exclusive = true           # whole nodes: benchmarks must not share them",
        "max_jobs = 4",
        "",
        "[layouts.pernode]",
        'descr = "The paper\'s layout: one rank per node"',
        "tasks_per_node = 1",
    ]
    if facts["nodes"] < 9:
        lines.append(f"# NOTE: partition {facts['partition']} has {facts['nodes']} node(s); the "
                     "paper used 8 and 9")
    lines += [
        "",
        "[layouts.packed]",
        "descr = " + toml(f"All ranks packed, up to {cpus[0]} per node"),
        f"tasks_per_node = {max(cpus[0], 1)}",
    ]
    if cpus[0] < 9:
        lines.append("overcommit = true          # fewer CPUs per node than the paper's 9 ranks")
    seen, alternatives = set(), []
    for mpi in mpis:
        if mpi["key"] in seen:
            way = next(f"{w} = {toml(mpi[w])}" for w in ("modules", "prefix", "from_libraries")
                       if w in mpi)
            alternatives.append(f"#   [mpi.{mpi['key']}] {way}   ({mpi['why']})")
            continue
        seen.add(mpi["key"])
        pmi = slurmsite.DEFAULT_SRUN_MPI[mpi["family"]]
        lines += ["", f"[mpi.{mpi['key']}]", f"# found: {mpi['why']}"]
        if "from_libraries" in mpi:
            lines.append(f"from_libraries = {toml(mpi['from_libraries'])}")
        else:
            lines.append(f"family = {toml(mpi['family'])}")
            for way in ("modules", "prefix"):
                if way in mpi:
                    lines.append(f"{way} = {toml(mpi[way])}   # CHECK")
            lines.append(f"# pcbench = \"...\"        # default build/pipecoll/{mpi['key']}/pcbench")
        if pmi in plugins or not plugins:
            lines.append(f"srun_mpi = {toml(pmi)}")
        else:
            lines.append(f"srun_mpi = {toml(pmi)}   # CHECK: srun here offers only "
                         f"{', '.join(plugins)}; {pmi} is what this MPI needs under srun")
    if alternatives:
        lines += ["", "# Other ways found to reach these MPIs (swap one in if you prefer it):",
                  *alternatives]
    if not seen:
        lines += ["", "# No MPI library found: add one [mpi.<name>] table (see sites/example.toml)."]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--name", help="system name for --system (default: Slurm's ClusterName)")
    parser.add_argument("--partition", help="Slurm partition (default: the default partition)")
    parser.add_argument("--account")
    parser.add_argument("--qos")
    parser.add_argument("--output", type=Path, help="default site_configs/sites/<name>.toml")
    parser.add_argument("--force", action="store_true", help="overwrite an existing file")
    args = parser.parse_args(argv)
    try:
        facts = slurm_facts(args.partition)
        name = args.name or re.sub(r"[^A-Za-z0-9_.-]", "-", facts["cluster"])
        output = args.output or slurmsite.SITES_DIR / f"{name}.toml"
        if output.exists() and not args.force:
            raise OnboardError(f"{output} exists; edit it, or pass --force to overwrite it")
        mpis = find_mpis()
        text = render(facts, mpis, name, args.account, args.qos)
        output.parent.mkdir(parents=True, exist_ok=True)
        tmp = output.with_suffix(".tmp")
        tmp.write_text(text)
        try:
            system, environments = slurmsite.load(tmp)
        except slurmsite.SiteConfigError as error:
            raise OnboardError(f"the generated file does not load (kept at {tmp}): {error}") from None
        tmp.replace(output)
    except OnboardError as error:
        print(f"onboard_cluster: error: {error}", file=sys.stderr)
        return 2
    print(f"wrote {output}: system {system['name']}, layouts "
          f"{', '.join(p['name'] for p in system['partitions'])}, MPI environments "
          f"{', '.join(e['name'] for e in environments) or 'none'}")
    print("edit the lines marked CHECK, then:")
    sites = "" if output.parent == slurmsite.SITES_DIR else f"PCREPRO_SITES={output} "
    print(f"  {sites}reframe -C site_configs/slurm_site.py --system {system['name']}:pernode "
          "-c reframe_checks -r")
    return 0


if __name__ == "__main__":
    sys.exit(main())
