"""The ReFrame checks (reframe_checks/pcbench_sweep.py) on the local site, for real.

Each test runs ReFrame with site_configs/local.py on a tiny run configuration (sizes of a
few KB, p = 2 or 3) against pcbench built by `make setup`, then reads what ReFrame left:
its JSON report, the check's output folder (rows, provenance) and the perflog. The
negative tests break a run on purpose (a corrupted result, ranks that do not form one MPI
job) and require sanity to fail.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
REFRAME = Path(sys.executable).parent / "reframe"
CHECKS = REPO / "reframe_checks" / "pcbench_sweep.py"
SITE = REPO / "site_configs" / "local.py"
sys.path.append(str(REPO / "reframe_checks"))
import cases as pcases  # noqa: E402

SIZES = {"min_bytes": "4K", "max_bytes": "16K"}  # 3 sizes


def tiny_config(library: str, nprocs: list[int], figure: str = "fig1") -> dict:
    config = pcases.load_config(pcases.DEFAULT_CONFIG)
    config.update(libraries=[library], figures=[figure],
                  nprocs={"allreduce": nprocs, "others": nprocs}, sizes=dict(SIZES),
                  measure={"warmup": 1, "iters": 3, "time_budget": 0.2, "dtype": "float"})
    config["reframe"] = {"time_limit": "2m", "extra_args": []}
    return config


def run_reframe(tmp_path: Path, config: dict, case_id: str, extra_env=None, extra_args=()):
    """ReFrame on exactly one case; returns (completed process, that case's report entry)."""
    config_file = tmp_path / "config.yaml"
    config_file.write_text(yaml.safe_dump(config))
    prefix = tmp_path / "rfm"
    env = dict(os.environ, PCREPRO_CONFIG=str(config_file), PCREPRO_RFM_PREFIX=str(prefix),
               **(extra_env or {}))
    report = prefix / "report.json"
    proc = subprocess.run(
        [str(REFRAME), "-C", str(SITE), "--system", "local", "-c", str(CHECKS),
         "-n", f"%case={case_id}$", "-S", "run_id=pytest", "--report-file", str(report),
         *extra_args, "-r"],
        env=env, cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert report.exists(), f"ReFrame wrote no report:\n{proc.stdout}\n{proc.stderr}"
    cases = [t for run in json.loads(report.read_text())["runs"] for t in run["testcases"]]
    assert len(cases) == 1, f"expected exactly the case {case_id}, ReFrame ran " \
                            f"{[c['display_name'] for c in cases]}\n{proc.stdout}"
    return proc, cases[0]


def require_pcbench(lib) -> Path:
    pcbench = lib.pipecoll_build / "pcbench"
    if not pcbench.exists():
        pytest.skip(f"pcbench not built against {lib.display}: run `make setup` (no {pcbench})")
    return pcbench


def test_check_runs_and_records(mpi_library, tmp_path):
    require_pcbench(mpi_library)
    config = tiny_config(mpi_library.name, [2])
    case_id = f"fig1_{mpi_library.name}_AUTO_sum_p2"
    proc, case = run_reframe(tmp_path, config, case_id)
    assert proc.returncode == 0 and case["result"] == "pass", \
        f"{case.get('fail_phase')}: {case.get('fail_reason')}\n{proc.stdout[-3000:]}"

    output = Path(case["outputdir"])
    rows = [json.loads(line) for line in (output / "pcbench.jsonl").read_text().splitlines()]
    assert [row["bytes"] for row in rows] == [4096, 8192, 16384]
    for row in rows:
        assert row["nprocs"] == 2 and row["check"] == "pass" and row["variant"] == "nonblocking"
        assert row["labels"]["library"] == mpi_library.name
        assert row["labels"]["algorithm"] == "AUTO" and row["labels"]["run_id"] == "pytest"
        assert row["labels"]["figure"] == "fig1" and row["labels"]["case"] == case_id

    provenance = json.loads((output / "provenance.json").read_text())
    assert provenance["nprocs"] == 2 and provenance["library"] == mpi_library.name
    assert provenance["mpi_library"] == rows[0]["mpi_library"]  # read at run time by pcbench
    assert provenance["pipecoll_git"] not in ("", "unknown")
    assert isinstance(provenance["knobs"], dict)

    # The perflog has the performance variables with units, from this very run.
    perflogs = list((tmp_path / "rfm" / "perflogs").rglob("*.log"))
    assert len(perflogs) == 1
    header, *lines = perflogs[0].read_text().splitlines()
    assert lines, "perflog has no entry"
    fields = dict(zip(header.split("|"), lines[-1].split("|")))
    assert fields["NBL_mbps_unit"] == "MB/s" and fields["NBL_busbw_unit"] == "MB/s"
    largest = rows[-1]
    assert float(fields["NBL_mbps_value"]) == pytest.approx(largest["mbps"], rel=1e-9)
    assert float(fields["NBL_busbw_value"]) == pytest.approx(largest["busbw_mbps"], rel=1e-9)
    assert fields["num_tasks"] == "2" and fields["result"] == "pass"


def test_three_ranks_with_pipelined_variants(tmp_path):
    lib = pcases.libraries.get("openmpi")
    require_pcbench(lib)
    config = tiny_config("openmpi", [3], figure="fig3")
    proc, case = run_reframe(tmp_path, config, "fig3_openmpi_RNG_sum_p3")
    assert case["result"] == "pass", f"{case.get('fail_reason')}\n{proc.stdout[-3000:]}"
    rows = [json.loads(line) for line in
            (Path(case["outputdir"]) / "pcbench.jsonl").read_text().splitlines()]
    # 5 variants (NBL, NBLx2..x16) x 3 sizes, all at 3 ranks, all verified.
    assert len(rows) == 15 and {row["nprocs"] for row in rows} == {3}
    assert {row["check"] for row in rows} == {"pass"}
    assert {row["segments_requested"] for row in rows if row["variant"] == "fconc"} == {2, 4, 8, 16}
    knobs = json.loads((Path(case["outputdir"]) / "provenance.json").read_text())["knobs"]
    assert knobs, "RNG must set Open MPI's ring algorithm knob"


def test_sanity_fails_on_a_corrupted_result(tmp_path):
    lib = pcases.libraries.get("openmpi")
    require_pcbench(lib)
    config = tiny_config("openmpi", [2])
    proc, case = run_reframe(tmp_path, config, "fig1_openmpi_AUTO_sum_p2",
                             extra_env={"PCBENCH_CORRUPT_FOR_TEST": "1"})
    assert proc.returncode != 0
    assert case["result"] == "fail" and case["fail_phase"] == "sanity"
    assert "verification" in case["fail_reason"] or "exited with status 1" in case["fail_reason"]


def test_sanity_fails_when_ranks_are_not_one_job(tmp_path):
    """A launcher with the wrong PMI starts N singletons that all succeed: caught by counting."""
    lib = pcases.libraries.get("openmpi")
    pcbench = require_pcbench(lib)
    singleton = tmp_path / "singleton-pcbench"
    singleton.write_text(
        "#!/bin/sh\n# Forget the launcher's wiring: each rank becomes an MPI job of its own.\n"
        "for v in $(env | grep -E '^(OMPI_|PMIX_)' | cut -d= -f1); do unset $v; done\n"
        f"exec {pcbench} \"$@\"\n")
    singleton.chmod(0o755)
    config = tiny_config("openmpi", [2])
    proc, case = run_reframe(tmp_path, config, "fig1_openmpi_AUTO_sum_p2",
                             extra_args=["-S", f"pcbench={singleton}"])
    assert proc.returncode != 0
    assert case["result"] == "fail" and case["fail_phase"] == "sanity"
    assert "rank-count lines say [1, 1]" in case["fail_reason"], case["fail_reason"]


def test_cases_follow_the_configuration():
    """The default configuration's cases: every figure's libraries, scales and ops."""
    config = pcases.load_config(pcases.DEFAULT_CONFIG)
    all_cases = pcases.cases(config)
    by_figure = {}
    for case in all_cases:
        by_figure.setdefault(case.figure, []).append(case)
    assert set(by_figure) == set(pcases.measured_figures(config))
    assert {c.nprocs for c in by_figure["fig3"]} == set(config["nprocs"]["allreduce"])
    assert {c.nprocs for c in by_figure["fig5"]} == set(config["nprocs"]["others"])
    assert {c.op for c in by_figure["fig4"]} == {"sum", "noop"}
    assert {c.library for c in by_figure["fig1"]} == set(config["libraries"])
    assert len({c.id for c in all_cases}) == len(all_cases), "case ids must be unique"


def test_sanity_fails_when_the_algorithm_cannot_apply(tmp_path):
    """MPICH's Rabenseifner cannot reduce 1 element over 3 ranks; with the table's
    MPIR_CVAR_COLLECTIVE_FALLBACK=error it refuses instead of silently using another one."""
    lib = pcases.libraries.get("mpich")
    require_pcbench(lib)
    config = tiny_config("mpich", [3])
    proc, case = run_reframe(tmp_path, config, "fig1_mpich_RSA_sum_p3",
                             extra_args=["-S", "min_bytes=4", "-S", "max_bytes=4"])
    assert proc.returncode != 0
    assert case["result"] == "fail" and case["fail_phase"] == "sanity"
    assert "knob was not accepted" in case["fail_reason"], case["fail_reason"]
