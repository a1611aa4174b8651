"""A REAL short pcbench sweep (Open MPI, p=2, 64 KB..1 MB) shared by the analysis tests.

The rows the analysis is tested on come from this run, not from invented numbers. Needs
`make setup` (pcbench built against Open MPI); PCREPRO_PCBENCH may name another pcbench
binary (e.g. a build in progress). Algorithm knobs and labels come from mpistack.algorithms.
Tests of a rule use these rows with the times set per case (and relabelled where needed).
"""
from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

import pytest

from mpistack import libraries

SIZES = ("64K", "1M")          # 5 sizes: 64K, 128K, 256K, 512K, 1M
NPROCS = 2
FIG1_ALGORITHMS = ("AUTO", "RNG", "RSA", "RDB", "BIN")


def _knobs():
    """(labels offered for Open MPI Iallreduce, f(env, alg, op) -> (env, labels))."""
    from mpistack import algorithms
    offered = set(algorithms.labels("openmpi", "allreduce")) | {"AUTO"}
    labels = tuple(a for a in FIG1_ALGORITHMS if a in offered)

    def apply(env, alg, op):
        selection = algorithms.select("openmpi", "allreduce", False, alg, op)
        return selection.apply(env), selection.record()
    return labels, apply


@pytest.fixture(scope="session")
def real_run(tmp_path_factory) -> dict:
    lib = libraries.get("openmpi")
    if not lib.shim_mpirun.exists():
        pytest.skip(f"Open MPI not set up: run `make setup` (no {lib.shim_mpirun})")
    pcbench = Path(os.environ.get("PCREPRO_PCBENCH", lib.pipecoll_build / "pcbench"))
    if not pcbench.exists():
        pytest.skip(f"pcbench not built: run `python3 tools/bootstrap.py --steps pipecoll` "
                    f"(no {pcbench})")
    algs, knob = _knobs()
    jobs = [("fig1", alg, "sum", "nonblocking") for alg in algs]
    jobs += [("fig3", alg, "sum", "nonblocking,fconc:2,fconc:4")
             for alg in ("AUTO", "RNG") if alg in algs]
    if "RNG" in algs:
        jobs += [("fig4", "RNG", op, "nonblocking,fconc:4") for op in ("sum", "noop")]
    out = tmp_path_factory.mktemp("pcbench-rows")
    run_id = time.strftime("pytest-%Y%m%dT%H%M%S")
    for i, (fig, alg, op, variants) in enumerate(jobs):
        env, labels = knob(lib.environment(), alg, op)
        argv = [pcbench, "--collective", "allreduce", "--variant", variants, "--op", op,
                "--min-bytes", SIZES[0], "--max-bytes", SIZES[1], "--warmup", "2",
                "--iters", "10", "--quiet", "--output", out / f"{i:02d}-{fig}-{alg}-{op}.jsonl",
                "--label", f"figure={fig}", "--label", "library=openmpi",
                "--label", f"run_id={run_id}"]
        for key, value in labels.items():
            argv += ["--label", f"{key}={value}"]
        done = subprocess.run(["timeout", "120", *lib.launch_command(NPROCS, argv)], env=env,
                              capture_output=True, text=True)
        assert done.returncode == 0, f"pcbench {fig} {alg} {op} failed:\n{done.stderr[-2000:]}"
    return {"dir": out, "run_id": run_id, "algorithms": algs, "jobs": jobs,
            "files": sorted(out.glob("*.jsonl"))}


@pytest.fixture(scope="session")
def real_frame(real_run):
    from analysis import tidy
    return tidy.load([real_run["dir"]])


@pytest.fixture(scope="session")
def real_records(real_run) -> list[dict]:
    """The measured rows as parsed JSON (each with its own labels dict)."""
    import json
    rows = []
    for path in real_run["files"]:
        rows += [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return rows


@pytest.fixture
def frame_from():
    """Build a tidy frame from (copies of) measured rows, optionally relabelled/retimed."""
    import copy

    from analysis import tidy

    def build(records, **labels):
        rows = []
        for i, row in enumerate(copy.deepcopy(records)):
            row["labels"].update(labels)
            row["source"] = f"test:{i + 1}"
            row.update(row.pop("labels"))
            rows.append(row)
        return tidy.to_frame(rows)
    return build
