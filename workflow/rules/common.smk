# Configuration: load, check (a bad value stops here naming the key), resolve the run id.
import json
import os
import platform
import socket
import subprocess
import sys
import datetime
from pathlib import Path

import yaml

REPO = Path(workflow.basedir).parent
sys.path.append(str(REPO / "reframe_checks"))
import cases as pcases  # the run configuration and the cases it asks for (shared with ReFrame)


configfile: str(REPO / "config" / "config.yaml")


try:
    pcases.check_config(config, "config/config.yaml with --configfile/--config applied")
    CASES = pcases.cases(config)  # also proves every figure's algorithms can be listed
except pcases.ConfigError as error:
    raise WorkflowError(str(error)) from None


def resolve_run_id(config):
    """run_id, or for "auto" the run folder of this same configuration (continued), or a
    new <UTC time>-<config hash> when this configuration has not been run yet."""
    if config["run_id"] != "auto":
        return config["run_id"]
    digest = pcases.config_hash(config)
    results = REPO / config["results_dir"]
    earlier = sorted(p.parent.name for p in results.glob(f"*-{digest}/config.yaml"))
    if earlier:
        return earlier[-1]
    # Snakemake parses this file again in the processes that run jobs: pass the new id on
    # through the environment so they all agree on it.
    inherited = os.environ.get("PCREPRO_AUTO_RUN_ID", "")
    if inherited.endswith(f"-{digest}"):
        return inherited
    run_id = datetime.datetime.now(datetime.timezone.utc).strftime("%Y%m%dT%H%M%SZ") + f"-{digest}"
    os.environ["PCREPRO_AUTO_RUN_ID"] = run_id
    return run_id


RUN_ID = resolve_run_id(config)
RUN_DIR = str(REPO / config["results_dir"] / RUN_ID)
RESOLVED = {**config, "run_id": RUN_ID}
GROUPS = pcases.measured_figures(config)
FIGURES = [f for f in config["figures"] if f.startswith("fig")]
TABLES = [f for f in config["figures"] if not f.startswith("fig")]
PYTHON = sys.executable


wildcard_constraints:
    group="|".join(GROUPS),
    figure="|".join(FIGURES) or "no-figure",
    product="|".join(config["figures"]),


onstart:
    print(f"run {RUN_ID}: results in {RUN_DIR}\n"
          f"  measuring {', '.join(GROUPS)} ({len(CASES)} ReFrame checks) "
          f"with {', '.join(config['libraries'])} on {config['site']['system']}", flush=True)


def provenance():
    def command(*argv):
        try:
            return subprocess.run(argv, capture_output=True, text=True, cwd=REPO,
                                  timeout=30).stdout.strip()
        except (OSError, subprocess.SubprocessError):
            return "unknown"

    return {
        "run_id": RUN_ID,
        "started": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "git_revision": command("git", "describe", "--always", "--dirty", "--abbrev=12"),
        "host": socket.gethostname(),
        "machine": platform.platform(),
        "cpus": os.cpu_count(),
        "python": sys.version.split()[0],
        "reframe": command(str(Path(PYTHON).parent / "reframe"), "--version"),
        "snakemake": command(str(Path(PYTHON).parent / "snakemake"), "--version"),
    }


def spack_lock():
    """spack.lock of the Spack environment the software came from (SPACK_ENV, else the
    project's own environment), or None when the software did not come from Spack."""
    env = os.environ.get("SPACK_ENV")
    lock = (Path(env) if env else REPO) / "spack.lock"
    return lock if lock.is_file() else None


# The configuration this run uses, with its run id: ReFrame reads it (PCREPRO_CONFIG), so the
# checks and the workflow agree on what is measured.
rule run_config:
    output:
        config=f"{RUN_DIR}/config.yaml",
        provenance=f"{RUN_DIR}/provenance.json",
    params:
        resolved=RESOLVED,
    run:
        facts = provenance()
        files = [(output.config, yaml.safe_dump(params.resolved, sort_keys=False))]
        lock = spack_lock()
        facts["spack_lock"] = str(lock) if lock else None
        if lock:  # kept whole: the exact specs and hashes of every package measured
            files.append((f"{RUN_DIR}/spack.lock", lock.read_text(encoding="utf-8")))
        files.append((output.provenance, json.dumps(facts, indent=2) + "\n"))
        for path, text in files:
            tmp = Path(path).with_name(f".{Path(path).name}.tmp")
            tmp.write_text(text, encoding="utf-8")
            os.replace(tmp, path)
