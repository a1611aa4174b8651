"""The pipecoll library against each MPI library: segmentation rules, and every collective x
plan x datatype x count (x MPI_IN_PLACE, x root) compared bit for bit with the plain
blocking MPI call, at p = 1, 2, 3, 4, 7, 8, 9 (above 2, oversubscribed).

The comparison itself is in pipecoll/tests/test_collectives.c (why floats can be compared
bit for bit is explained there). This file picks, per process count, a matrix that keeps
the whole file within a few minutes on a 2-core machine: the widest matrix at p = 1 and 2,
narrower ones as oversubscription makes every collective slower; large counts only at
small p.
"""
from __future__ import annotations

import pytest

ALL_PLANS = "single,fconc:2,fconc:3,fconc:4,fconc:8,fsize:8,fsize:100,fsize:4K"
SMALL_COUNTS = "0,1,2,3,7,1009"  # 2, 3: fewer elements than segments for fconc:3/4/8

# (nprocs, id, arguments of test_collectives, timeout in seconds)
RUNS = [
    (1, "full", ["--plans", ALL_PLANS, "--counts", SMALL_COUNTS + ",65537"], 120),
    (2, "full", ["--plans", ALL_PLANS, "--counts", SMALL_COUNTS], 180),
    # large counts (2.4 MB of doubles), at small p and with few segments
    (2, "large", ["--plans", "fconc:8,fsize:100K", "--types", "int32,double",
                  "--counts", "65537,300007", "--ops", "sum"], 180),
    # the segment cap: 65537 elements of 8 bytes in 8-byte segments -> 1024 segments
    (2, "cap", ["--colls", "allreduce,allgather,reduce_scatter_block", "--plans", "fsize:8",
                "--types", "int64", "--counts", "65537", "--ops", "sum"], 180),
    (3, "mid", ["--plans", "single,fconc:2,fconc:3,fconc:8,fsize:256",
                "--types", "int32,int64,float,double", "--counts", SMALL_COUNTS,
                "--ops", "sum,user"], 180),
    (4, "mid", ["--plans", "single,fconc:4,fconc:8,fsize:4K", "--types", "int32,double,uint8",
                "--counts", "0,1,3,7,1009", "--ops", "sum,user"], 180),
    (7, "narrow", ["--plans", "single,fconc:3,fconc:8", "--types", "int32,double",
                   "--counts", "0,1,7,1009", "--ops", "sum,user"], 240),
    (8, "narrow", ["--plans", "single,fconc:4,fsize:100", "--types", "int64,float",
                   "--counts", "0,1,7,1009", "--ops", "sum"], 240),
    (9, "narrow", ["--plans", "single,fconc:2,fconc:8", "--types", "int32,double",
                   "--counts", "0,3,1009", "--ops", "sum"], 240),
]


def test_segmentation_rules(mpi_library, mpirun, pipecoll_file):
    exe = pipecoll_file(mpi_library, "tests/test_segments")
    run = mpirun(mpi_library, 1, [exe], timeout=60)
    assert run.returncode == 0, str(run)
    assert "test_segments: all checks passed" in run.stdout, str(run)


@pytest.mark.parametrize("nprocs,matrix,args,timeout", RUNS,
                         ids=[f"p{n}-{name}" for n, name, _, _ in RUNS])
def test_collectives_match_plain_mpi(mpi_library, mpirun, pipecoll_file, nprocs, matrix, args,
                                     timeout):
    exe = pipecoll_file(mpi_library, "tests/test_collectives")
    run = mpirun(mpi_library, nprocs, [exe, *args], timeout=timeout)
    assert run.returncode == 0, str(run)
    assert "FAIL" not in run.stderr, str(run)
    summary = [line for line in run.stdout.splitlines() if line.startswith("test_collectives:")]
    assert summary and summary[-1].startswith(f"test_collectives: p={nprocs},"), str(run)
    assert summary[-1].endswith("all identical to plain MPI"), str(run)
    cases = int(summary[-1].split(",")[1].split()[0])
    assert cases >= 7, str(run)  # the matrix really ran (the smallest, "cap", has 7 cases)


def test_bad_argument_is_a_usage_error(mpi_library, mpirun, pipecoll_file):
    exe = pipecoll_file(mpi_library, "tests/test_collectives")
    run = mpirun(mpi_library, 1, [exe, "--plans", "fconc:0"], timeout=60)
    assert run.returncode != 0, str(run)
    assert "bad plan 'fconc:0'" in run.stderr, str(run)
