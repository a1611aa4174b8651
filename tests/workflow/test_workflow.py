"""The whole Snakemake workflow, for real: ReFrame checks -> tidy table -> figures -> report.

A tiny configuration (Open MPI, p = 2, sizes to 1 MB) keeps it to about a minute. Every
run goes to its own working directory (--directory) and results folder, so the tests never
touch the project's results/ or .snakemake/.
"""
from __future__ import annotations

import csv
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
SNAKEMAKE = Path(sys.executable).parent / "snakemake"
sys.path.append(str(REPO / "reframe_checks"))
import cases as pcases  # noqa: E402

OPENMPI = pcases.libraries.get("openmpi")


def tiny_config(results: Path, figures: list[str]) -> dict:
    config = pcases.load_config(pcases.DEFAULT_CONFIG)
    config.update(results_dir=str(results), libraries=["openmpi"], figures=figures,
                  nprocs={"allreduce": [2], "others": [2]},
                  sizes={"min_bytes": "256K", "max_bytes": "1M"},
                  measure={"warmup": 1, "iters": 3, "time_budget": 0.2, "dtype": "float"})
    config["reframe"] = {"time_limit": "3m", "extra_args": []}
    return config


def snakemake(workdir: Path, config: dict | None, *args, env=None, timeout=600):
    argv = [str(SNAKEMAKE), "--snakefile", str(REPO / "workflow" / "Snakefile"),
            "--directory", str(workdir), "--cores", "2"]
    if config is not None:
        path = workdir / "run.yaml"
        path.write_text(yaml.safe_dump(config))
        argv += ["--configfile", str(path)]
    return subprocess.run([*argv, *args], capture_output=True, text=True, timeout=timeout,
                          env=dict(os.environ, **(env or {})))


def only_run_dir(results: Path) -> Path:
    runs = [p for p in results.iterdir() if p.is_dir()]
    assert len(runs) == 1, f"expected one run folder, found {runs}"
    return runs[0]


@pytest.fixture
def openmpi_pcbench():
    if not (OPENMPI.pipecoll_build / "pcbench").exists():
        pytest.skip(f"pcbench not built against Open MPI: run `make setup` "
                    f"(no {OPENMPI.pipecoll_build / 'pcbench'})")


def test_end_to_end_then_nothing_to_do(tmp_path, openmpi_pcbench):
    results = tmp_path / "results"
    config = tiny_config(results, ["fig3"])
    proc = snakemake(tmp_path, config)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-4000:]
    run = only_run_dir(results)
    run_id = run.name

    # The tidy table has every measured row: 2 algorithms x 5 variants x 3 sizes at p=2.
    with open(run / "tables" / "measurements.csv", newline="") as handle:
        rows = list(csv.DictReader(handle))
    assert len(rows) == 2 * 5 * 3
    assert {r["run_id"] for r in rows} == {run_id} and {r["nprocs"] for r in rows} == {"2"}
    assert {r["algorithm"] for r in rows} == {"AUTO", "RNG"}
    assert {r["check"] for r in rows} == {"pass"}
    # ... and they are the rows pcbench wrote in the ReFrame checks' output folders.
    jsonl = [json.loads(line) for f in sorted((run / "data" / "fig3").glob("*.jsonl"))
             for line in f.read_text().splitlines()]
    assert sorted(r["mbps"] for r in jsonl) == pytest.approx(sorted(float(r["mbps"]) for r in rows))

    for suffix in ("png", "pdf"):
        assert (run / "figures" / f"fig3.{suffix}").stat().st_size > 1000
    report = (run / "report.md").read_text()
    assert run_id in report and "fig3" in report
    assert (run / "report.html").exists()
    assert json.loads((run / "reframe" / "fig3" / "complete.json").read_text())["group"] == "fig3"
    provenance = json.loads((run / "provenance.json").read_text())
    assert provenance["run_id"] == run_id and provenance["git_revision"]

    # Same configuration again: the same run, nothing to do.
    again = snakemake(tmp_path, config, "--dry-run")
    assert again.returncode == 0, again.stderr
    assert "Nothing to be done" in again.stdout + again.stderr, again.stdout
    assert only_run_dir(results) == run


def test_rerun_after_failure_redoes_only_what_failed(tmp_path, openmpi_pcbench):
    # fig4 has SUM and NOOP checks; a corrupted result fails only the SUM ones (NOOP results
    # cannot be verified), so the first run is a partial failure.
    results = tmp_path / "results"
    config = tiny_config(results, ["fig4"])
    config["run_id"] = "retry"
    first = snakemake(tmp_path, config, env={"PCBENCH_CORRUPT_FOR_TEST": "1"})
    assert first.returncode != 0
    run = results / "retry"
    assert "did not pass" in first.stdout + first.stderr
    assert not (run / "reframe" / "fig4" / "complete.json").exists()
    assert not (run / "report.md").exists()
    kept = sorted(p.name for p in (run / "data" / "fig4").glob("*.jsonl"))
    assert kept == ["fig4_openmpi_RNG_noop_p2.jsonl"]
    kept_bytes = (run / "data" / "fig4" / kept[0]).read_bytes()

    second = snakemake(tmp_path, config)
    assert second.returncode == 0, second.stdout[-4000:] + second.stderr[-4000:]
    report = json.loads((run / "reframe" / "fig4" / "attempt-2" / "report.json").read_text())
    rerun = [t["display_name"] for r in report["runs"] for t in r["testcases"]]
    assert rerun == ["PcbenchSweep %case=fig4_openmpi_RNG_sum_p2"]
    assert (run / "data" / "fig4" / kept[0]).read_bytes() == kept_bytes  # not overwritten
    assert (run / "attempt-1").exists() is False  # attempts live under reframe/<group>/
    assert (run / "reframe" / "fig4" / "attempt-1" / "report.json").exists()
    assert (run / "report.md").exists() and (run / "figures" / "fig4.pdf").exists()


@pytest.mark.parametrize("change, key", [
    ({"measure": {"warmup": 1, "iters": 0, "time_budget": 0.2, "dtype": "float"}}, "measure.iters"),
    ({"nprocs": {"allreduce": [2, "four"], "others": [2]}}, "nprocs.allreduce[1]"),
    ({"sizes": {"min_bytes": "3M", "max_bytes": "16M"}}, "sizes.min_bytes"),
    ({"figures": ["fig3", "fig99"]}, "figures[1]"),
    ({"libraries": ["openmpi", "lam"]}, "libraries[1]"),
    ({"nproc": {"allreduce": [2]}}, "(top level)"),
])
def test_bad_configuration_names_the_key(tmp_path, change, key):
    config = tiny_config(tmp_path / "results", ["fig3"])
    config.update(change)
    proc = snakemake(tmp_path, config, "--dry-run", timeout=120)
    output = proc.stdout + proc.stderr
    assert proc.returncode != 0
    assert f"config key '{key}'" in output, output
    assert "Traceback" not in output, output
    assert not (tmp_path / "results").exists()


def test_spack_lock_kept_with_the_run(tmp_path):
    # A run whose software came from a Spack environment keeps that environment's spack.lock.
    spack_env = tmp_path / "spack-env"
    spack_env.mkdir()
    lock_text = '{"_meta": {"lockfile-version": 6}, "roots": [{"spec": "pipecoll@develop"}]}\n'
    (spack_env / "spack.lock").write_text(lock_text)
    config = tiny_config(tmp_path / "results", ["fig3"])
    config["run_id"] = "with-spack"
    run_dir = tmp_path / "results" / "with-spack"
    # --nolock ends --configfile's list of files, so the target is read as a target.
    proc = snakemake(tmp_path, config, "--nolock", str(run_dir / "provenance.json"),
                     env={"SPACK_ENV": str(spack_env)}, timeout=180)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert (run_dir / "spack.lock").read_text() == lock_text
    facts = json.loads((run_dir / "provenance.json").read_text())
    assert facts["spack_lock"] == str(spack_env / "spack.lock")
