"""pcbench, the benchmark driver: arguments, rows, result checks, output and memory guards.

Every test runs the real pcbench built against a real MPI library (build/pipecoll/<name>)
through that library's launcher. Performance is never asserted; correctness of what pcbench
reports (rows valid against the schema, parameters carried, checks that can fail) is.
"""
from __future__ import annotations

import json
import math
import os
import signal
import subprocess
import threading
from datetime import datetime
from pathlib import Path

import jsonschema
import pytest

from mpistack import libraries

REPO = Path(__file__).resolve().parents[2]
SCHEMA = json.loads((REPO / "pipecoll/bench/pcbench-row.schema.json").read_text())
VALIDATOR = jsonschema.Draft202012Validator(SCHEMA)
ELEMENT_SIZE = {"int8": 1, "uint8": 1, "int32": 4, "float": 4, "int64": 8, "double": 8}
LIBRARY_NAME_PREFIX = {"openmpi": "Open MPI", "mpich": "MPICH", "impi": "Intel(R) MPI"}
LAUNCH_TIMEOUT = 120  # seconds; a hang is a failure, never a stuck suite


def pcbench(lib: libraries.MpiLibrary) -> Path:
    exe = lib.pipecoll_build / "pcbench"
    if not exe.exists():
        pytest.skip(f"pcbench not built against {lib.display}: run "
                    f"`python3 tools/bootstrap.py --steps pipecoll` (no {exe})")
    return exe


def first_installed() -> libraries.MpiLibrary:
    """One library for the tests whose subject does not depend on MPI (argument parsing,
    output files): MPICH when set up, as hydra starts jobs fastest (Open MPI's mpirun takes
    ~2 s here), else the first library set up."""
    installed = [lib for lib in libraries.selected() if lib.shim_mpirun.exists()]
    if not installed:
        pytest.skip("no MPI library set up: run `make setup`")
    return next((lib for lib in installed if lib.family == "mpich"), installed[0])


class Run:
    def __init__(self, proc: subprocess.CompletedProcess):
        self.returncode = proc.returncode
        self.stdout = proc.stdout
        self.stderr = proc.stderr

    def __repr__(self) -> str:  # shown by pytest when an assertion fails
        return f"<pcbench rc={self.returncode}\nstdout:\n{self.stdout}\nstderr:\n{self.stderr}>"


def launch(lib, nprocs, args, env_extra=None):
    """Start pcbench in its own session so a hang can be killed with all its ranks."""
    env = lib.environment()
    env.pop("PCBENCH_CORRUPT_FOR_TEST", None)
    env.update(env_extra or {})
    return subprocess.Popen(lib.launch_command(nprocs, [pcbench(lib), *map(str, args)]),
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)


def stop(proc: subprocess.Popen) -> None:
    """Ask the launcher to end the job (it forwards the signal), then make sure."""
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            pass
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    proc.wait()


def run(lib, nprocs, args, env_extra=None) -> Run:
    proc = launch(lib, nprocs, args, env_extra)
    try:
        out, err = proc.communicate(timeout=LAUNCH_TIMEOUT)
    except subprocess.TimeoutExpired:
        stop(proc)
        pytest.fail(f"pcbench {' '.join(map(str, args))} under {lib.display} hung "
                    f"(> {LAUNCH_TIMEOUT} s)")
    return Run(subprocess.CompletedProcess(proc.args, proc.returncode, out, err))


def read_rows(path: Path) -> list[dict]:
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    for row in rows:
        errors = sorted(VALIDATOR.iter_errors(row), key=str)
        assert not errors, f"row does not match the schema: {errors[0].message}\n{row}"
    return rows


def table_lines(stdout: str) -> list[str]:
    return [line for line in stdout.splitlines() if line.strip() and not line.startswith("#")]


# ---- argument errors ---------------------------------------------------------------------
BAD_ARGUMENTS = [
    (["--collective", "alltoall"], "--collective 'alltoall'"),
    (["--variant", "fconc:0"], "--variant 'fconc:0'"),
    (["--variant", "blocking,fsize:12Q"], "--variant 'fsize:12Q'"),
    (["--variant", "pipelined"], "--variant 'pipelined'"),
    (["--variant", "blocking", "--variant", "blocking"], "--variant 'blocking': given twice"),
    (["--min-bytes", "1000"], "--min-bytes '1000'"),
    (["--max-bytes", "2G"], "--max-bytes '2G'"),
    (["--min-bytes", "1M", "--max-bytes", "1K"], "--min-bytes 1048576 is larger than --max-bytes"),
    (["--op", "max"], "--op 'max'"),
    (["--dtype", "complex"], "--dtype 'complex'"),
    (["--iters", "0"], "--iters '0'"),
    (["--warmup", "-1"], "--warmup '-1'"),
    (["--time-budget", "0"], "--time-budget '0'"),
    (["--collective", "bcast", "--root", "2"], "--root 2"),
    (["--collective", "bcast", "--in-place"], "--in-place"),
    (["--collective", "allgather", "--dtype", "double", "--min-bytes", "8"], "--min-bytes 8"),
    (["--label", "novalue"], "--label 'novalue'"),
    (["--label", "k=1", "--label", "k=2"], "key 'k' given twice"),
    (["--mem-limit", "lots"], "--mem-limit 'lots'"),
    (["--append"], "--append: needs --output"),
    (["--output", "/nonexistent-dir/rows.jsonl"], "directory '/nonexistent-dir' does not exist"),
    (["--bogus"], "--bogus: unknown option"),
    (["--iters"], "--iters: needs a value"),
    (["stray"], "'stray': unexpected argument"),
]


@pytest.mark.parametrize("args,named", BAD_ARGUMENTS, ids=[" ".join(a) for a, _ in BAD_ARGUMENTS])
def test_bad_argument_is_named_once_and_exits_2(args, named):
    result = run(first_installed(), 2, args)
    assert result.returncode == 2, result
    assert named in result.stderr, result
    assert result.stderr.count("pcbench: error:") == 1, result  # rank 0 only
    assert table_lines(result.stdout) == [], result


def test_bad_argument_exits_cleanly_under_every_library(mpi_library):
    # The exit path (every rank finalizes, none aborts) is the library-dependent part.
    result = run(mpi_library, 3, ["--variant", "fconc:x", "--max-bytes", "1K"])
    assert result.returncode == 2, result
    assert result.stderr.count("--variant 'fconc:x'") == 1, result
    assert "MPI_Abort" not in result.stderr and "MPI_ABORT" not in result.stderr, result


def test_corrupt_hook_value_is_checked():
    result = run(first_installed(), 2, ["--max-bytes", "64"],
                 {"PCBENCH_CORRUPT_FOR_TEST": "yes"})
    assert result.returncode == 2, result
    assert "PCBENCH_CORRUPT_FOR_TEST='yes'" in result.stderr, result


def test_help_exits_0():
    result = run(first_installed(), 2, ["--help"])
    assert result.returncode == 0, result
    assert result.stdout.count("Usage: pcbench") == 1, result


# ---- rows: schema, parameters, checks ----------------------------------------------------
# (collective, dtype, in_place, root): every collective and every datatype at least once.
CASES = [
    ("allreduce", "float", False, 0),
    ("allreduce", "int32", True, 0),
    ("bcast", "int8", False, 2),
    ("reduce", "int64", True, 1),
    ("allgather", "uint8", True, 0),
    ("reduce_scatter_block", "double", False, 0),
]
VARIANTS = "blocking,nonblocking,fconc:2,fconc:3,fsize:100,fsize:1K"
NPROCS = 3  # odd on purpose: uneven splits of blocks and segments


@pytest.mark.parametrize("collective,dtype,in_place,root", CASES,
                         ids=[f"{c}-{d}{'-inplace' if i else ''}" for c, d, i, _ in CASES])
def test_rows_valid_and_checks_pass(mpi_library, tmp_path, collective, dtype, in_place, root):
    output = tmp_path / "rows.jsonl"
    args = ["--collective", collective, "--dtype", dtype, "--root", root, "--variant", VARIANTS,
            "--min-bytes", 64, "--max-bytes", "16K", "--warmup", 1, "--iters", 2,
            "--output", output, "--label", "algorithm=AUTO", "--label", "run=test 1"]
    if in_place:
        args.append("--in-place")
    result = run(mpi_library, NPROCS, args)
    assert result.returncode == 0, result
    rows = read_rows(output)

    sizes = [64 << k for k in range(9)]  # 64 B .. 16 KiB
    variants = VARIANTS.split(",")
    assert len(rows) == len(sizes) * len(variants), result
    es = ELEMENT_SIZE[dtype]
    for index, row in enumerate(rows):
        size, variant = sizes[index // len(variants)], variants[index % len(variants)]
        per_rank_split = collective in ("allgather", "reduce_scatter_block")
        count = size // (es * NPROCS) if per_rank_split else size // es
        assert row["count"] == count
        assert row["bytes"] == count * es * (NPROCS if per_rank_split else 1)
        kind, _, value = variant.partition(":")
        assert row["variant"] == kind
        assert row["segments_requested"] == (int(value) if kind == "fconc" else None)
        assert row["segment_bytes_requested"] == (
            {"100": 100, "1K": 1024}[value] if kind == "fsize" else None)
        if kind in ("blocking", "nonblocking"):
            assert row["segments"] == 1
        elif kind == "fconc":
            assert row["segments"] == min(int(value), count)
        assert (row["collective"], row["dtype"], row["op"]) == (collective, dtype, "sum")
        assert (row["nprocs"], row["root"], row["in_place"]) == (NPROCS, root, in_place)
        assert (row["warmup"], row["iters"]) == (1, 2)
        assert row["labels"] == {"algorithm": "AUTO", "run": "test 1"}
        assert row["check"] == "pass", row
        assert row["mpi_library"].startswith(LIBRARY_NAME_PREFIX[mpi_library.family])
        assert row["pipecoll_version"].startswith("0.1.0+")
        datetime.fromisoformat(row["timestamp"].replace("Z", "+00:00"))
        # the metrics are what the schema says they are
        assert row["time_min_s"] <= row["time_median_s"] <= row["time_max_s"]
        assert row["time_min_s"] <= row["time_mean_s"] <= row["time_max_s"]
        assert math.isclose(row["mbps"], row["bytes"] / 1e6 / row["time_mean_s"], rel_tol=1e-6)
        factor = {"allreduce": 2 * (NPROCS - 1) / NPROCS, "allgather": (NPROCS - 1) / NPROCS,
                  "reduce_scatter_block": (NPROCS - 1) / NPROCS}.get(collective, 1.0)
        assert math.isclose(row["busbw_mbps"], row["mbps"] * factor, rel_tol=1e-6)

    # the human table: provenance header, one line per row, same library string
    assert result.stdout.startswith("# pcbench "), result
    assert f"# MPI library: {rows[0]['mpi_library']}\n" in result.stdout, result
    assert f"{NPROCS} ranks" in result.stdout
    lines = table_lines(result.stdout)
    assert len(lines) == len(rows)
    assert all(line.split()[-1] == "pass" for line in lines)


def test_noop_rows_are_not_checked(mpi_library, tmp_path):
    output = tmp_path / "noop.jsonl"
    result = run(mpi_library, 2, ["--op", "noop", "--variant", "blocking,nonblocking,fconc:2",
                                  "--min-bytes", "1K", "--max-bytes", "4K", "--iters", 2,
                                  "--output", output])
    assert result.returncode == 0, result
    rows = read_rows(output)
    assert len(rows) == 9
    assert {(row["op"], row["check"]) for row in rows} == {("noop", "skipped")}


def test_no_check_gives_skipped(tmp_path):
    output = tmp_path / "nocheck.jsonl"
    result = run(first_installed(), 2, ["--no-check", "--variant", "fconc:2", "--max-bytes", "1K",
                                        "--min-bytes", "1K", "--iters", 1, "--output", output])
    assert result.returncode == 0, result
    assert [row["check"] for row in read_rows(output)] == ["skipped"]


# ---- the check can fail --------------------------------------------------------------------
def test_wrong_result_is_detected(mpi_library, tmp_path):
    output = tmp_path / "corrupt.jsonl"
    result = run(mpi_library, 2, ["--variant", "nonblocking,fconc:2", "--min-bytes", "64",
                                  "--max-bytes", "128", "--iters", 1, "--output", output],
                 {"PCBENCH_CORRUPT_FOR_TEST": "1"})
    assert result.returncode == 1, result
    assert "CHECK FAILED on rank 1: allreduce fconc:2, 128 B, float: element 31 is -1" \
        in result.stderr, result
    rows = read_rows(output)  # rows are still written, marked
    assert [row["check"] for row in rows] == ["fail"] * 4


@pytest.mark.parametrize("collective", ["bcast", "reduce", "allgather", "reduce_scatter_block"])
def test_wrong_result_is_detected_for_every_collective(collective, tmp_path):
    output = tmp_path / "corrupt.jsonl"
    result = run(first_installed(), 3, ["--collective", collective, "--variant", "fconc:2",
                                        "--min-bytes", "128", "--max-bytes", "128", "--iters", 1,
                                        "--output", output], {"PCBENCH_CORRUPT_FOR_TEST": "1"})
    assert result.returncode == 1, result
    assert result.stderr.count("CHECK FAILED on rank") == 1, result
    assert [row["check"] for row in read_rows(output)] == ["fail"]


# ---- iterations and time budget ------------------------------------------------------------
def test_time_budget_and_iteration_limit(tmp_path):
    lib = first_installed()
    budget = tmp_path / "budget.jsonl"
    result = run(lib, 2, ["--time-budget", "0.3", "--max-bytes", "8", "--warmup", 0,
                          "--output", budget])
    assert result.returncode == 0, result
    (row,) = read_rows(budget)
    # ranks agreed on the count (else the run would hang) and the budget allowed many
    assert row["iters"] > 10
    assert "time budget 0.3 s" in result.stdout

    capped = tmp_path / "capped.jsonl"
    result = run(lib, 2, ["--time-budget", "100", "--iters", 3, "--max-bytes", "8",
                          "--output", capped])
    assert result.returncode == 0, result
    assert [row["iters"] for row in read_rows(capped)] == [3]


# ---- output file -------------------------------------------------------------------------
def test_append_keeps_earlier_rows(tmp_path):
    lib = first_installed()
    output = tmp_path / "rows.jsonl"
    for run_id in ("1", "2"):
        result = run(lib, 2, ["--max-bytes", "16", "--iters", 1, "--output", output, "--append",
                              "--label", f"run={run_id}"])
        assert result.returncode == 0, result
    rows = read_rows(output)
    assert [(row["labels"]["run"], row["bytes"]) for row in rows] == \
        [("1", 8), ("1", 16), ("2", 8), ("2", 16)]


def test_killed_run_leaves_no_partial_output(tmp_path):
    lib = first_installed()
    output = tmp_path / "rows.jsonl"
    output.write_text("earlier content\n")
    # Many sizes at one second each: the run is far from done when the first line appears.
    proc = launch(lib, 2, ["--time-budget", "1", "--min-bytes", "8", "--max-bytes", "1M",
                           "--output", output])
    watchdog = threading.Timer(LAUNCH_TIMEOUT, stop, [proc])  # no line ever: do not hang
    watchdog.start()
    try:
        for line in proc.stdout:
            if line.strip() and not line.startswith("#"):
                break  # one size measured, its row held in memory
    finally:
        watchdog.cancel()
        stop(proc)
    assert output.read_text() == "earlier content\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["rows.jsonl"]


# ---- memory guard --------------------------------------------------------------------------
def test_not_enough_memory_is_refused_before_allocating(tmp_path):
    output = tmp_path / "rows.jsonl"
    result = run(first_installed(), 2, ["--max-bytes", "1G", "--mem-limit", "64M",
                                        "--output", output])
    assert result.returncode == 3, result
    assert "not enough memory for --max-bytes 1G" in result.stderr, result
    assert "Lower --max-bytes to 8M or less" in result.stderr, result
    assert not output.exists()


def test_memory_guard_reads_meminfo():
    # 1 GiB allreduce on 8 ranks needs ~24 GiB (two buffers and an MPI temporary each):
    # more than this machine has, so the real MemAvailable path must refuse it.
    meminfo = Path("/proc/meminfo").read_text()
    available = int(next(l for l in meminfo.splitlines() if l.startswith("MemAvailable"))
                    .split()[1]) * 1024
    if available > 24 * 2**30:
        pytest.skip(f"this host has {available >> 30} GiB available: 1G x 8 ranks would fit")
    result = run(first_installed(), 8, ["--max-bytes", "1G", "--min-bytes", "1G"])
    assert result.returncode == 3, result
    assert "MemAvailable in /proc/meminfo" in result.stderr, result
    assert "Even --min-bytes does not fit" in result.stderr or "Lower --max-bytes" in result.stderr
