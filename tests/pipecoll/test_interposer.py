"""libpipecoll_preload.so under unmodified programs, in every mode, against each MPI library.

The C program (pipecoll/tests/plain_mpi.c, linked to MPI only) and an mpi4py script are run
without the interposer and then with it in each mode; every result digest must be identical
to the run without it. The trace the interposer writes must account for exactly the calls
the program says it made (calls per collective, (bytes, datatype) histogram, and how each
call was routed: pipelined, or passed through and why). A bad environment value must stop
the job at MPI_Init, non-zero, with one message naming the variable.
"""
from __future__ import annotations

import collections
import json
from pathlib import Path

import pytest

NPROCS = 3  # odd and oversubscribed: uneven segments, ranks that share a core
TIMEOUT = 120
COLLECTIVES = ("allreduce", "bcast", "reduce", "allgather", "reduce_scatter_block")
REPO = Path(__file__).resolve().parents[2]

# id -> environment. Each mode runs with a trace; "threshold" and "override" also check
# the size threshold and the per-collective variables.
MODES = {
    "bl": {"PIPECOLL_MODE": "bl"},
    "nbl": {"PIPECOLL_MODE": "nbl"},
    "fconc4": {"PIPECOLL_MODE": "fconc:4"},
    "fsize1K": {"PIPECOLL_MODE": "fsize:1K", "PIPECOLL_VERBOSE": "1"},
    "threshold": {"PIPECOLL_MODE": "fconc:3", "PIPECOLL_THRESHOLD_BYTES": "4K"},
    "override": {"PIPECOLL_MODE": "nbl", "PIPECOLL_MODE_ALLREDUCE": "fsize:100",
                 "PIPECOLL_MODE_REDUCE_SCATTER_BLOCK": "bl", "PIPECOLL_MODE_BCAST": "fconc:8"},
}


def mode_of(env: dict, collective: str) -> str:
    return env.get(f"PIPECOLL_MODE_{collective.upper()}", env.get("PIPECOLL_MODE", "bl"))


def threshold_of(env: dict) -> int:
    text = env.get("PIPECOLL_THRESHOLD_BYTES", "0")
    scale = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}.get(text[-1], 1)
    return int(text.rstrip("KMG")) * scale


def parse_output(stdout: str):
    """RESULT lines -> {call: digests}; EXPECT lines -> list of (coll, bytes, dtype, kind, n)."""
    results, expects = {}, []
    for line in stdout.splitlines():
        words = line.split()
        if words and words[0] == "RESULT":
            results[words[1]] = words[2:]
        elif words and words[0] == "EXPECT":
            expects.append((words[1], int(words[2]), words[3], words[4], int(words[5])))
    return results, expects


def expected_trace(expects, env: dict):
    """What the trace must say, from what the program did and the routing rules
    (pipecoll/README.md): mode bl -> mode_bl; below the threshold -> below_threshold;
    derived non-contiguous datatype -> noncontiguous_datatype; intercommunicator ->
    intercommunicator; otherwise pipelined (nbl, fconc, fsize)."""
    threshold = threshold_of(env)
    calls = collections.Counter()
    routes = collections.defaultdict(collections.Counter)
    sizes = collections.defaultdict(collections.Counter)
    for coll, nbytes, dtype, kind, n in expects:
        calls[coll] += n
        sizes[coll][(nbytes, dtype)] += n
        if mode_of(env, coll) == "bl":
            route = "mode_bl"
        elif nbytes < threshold:
            route = "below_threshold"
        elif kind == "derived":
            route = "noncontiguous_datatype"
        elif kind == "intercomm":
            route = "intercommunicator"
        else:
            route = "pipelined"
        routes[coll][route] += n
    return calls, routes, sizes


def check_trace(trace: dict, expects, env: dict, nprocs: int, rank: int = 0):
    calls, routes, sizes = expected_trace(expects, env)
    assert trace["format"] == "pipecoll-trace/1"
    assert trace["rank"] == rank and trace["nprocs"] == nprocs
    assert trace["threshold_bytes"] == threshold_of(env)
    assert trace["mpi_library_version"]
    assert set(trace["collectives"]) == set(COLLECTIVES)
    for coll in COLLECTIVES:
        got = trace["collectives"][coll]
        assert got["mode"] == mode_of(env, coll), coll
        assert got["calls"] == calls[coll], coll
        assert got["bytes"] == sum(b * n for (b, _), n in sizes[coll].items()), coll
        assert {k: v for k, v in got["routes"].items() if v} == dict(routes[coll]), coll
        histogram = {(row["bytes"], row["datatype"]): row["calls"] for row in got["sizes"]}
        assert histogram == dict(sizes[coll]), coll


def preload(lib, pipecoll_file) -> Path:
    return pipecoll_file(lib, "libpipecoll_preload.so")


_baselines: dict = {}


def baseline(lib, mpirun, program: list, key: str):
    """The program's output without the interposer (once per library and program)."""
    if (lib.name, key) not in _baselines:
        run = mpirun(lib, NPROCS, program, timeout=TIMEOUT)
        assert run.returncode == 0, str(run)
        _baselines[(lib.name, key)] = parse_output(run.stdout)
    return _baselines[(lib.name, key)]


@pytest.mark.parametrize("mode", list(MODES))
def test_c_program_same_results_and_exact_trace(mpi_library, mpirun, pipecoll_file, tmp_path,
                                                mode):
    program = [pipecoll_file(mpi_library, "tests/plain_mpi")]
    so = preload(mpi_library, pipecoll_file)
    want_results, expects = baseline(mpi_library, mpirun, program, "c")
    assert len(want_results) >= 20 and expects  # the program really ran its calls

    env = dict(MODES[mode])
    trace_path = tmp_path / "trace.json"
    run = mpirun(mpi_library, NPROCS, program, timeout=TIMEOUT,
                 env_extra={**env, "LD_PRELOAD": str(so), "PIPECOLL_TRACE": str(trace_path)})
    assert run.returncode == 0, str(run)
    results, expects_here = parse_output(run.stdout)
    assert results == want_results, str(run)
    assert expects_here == expects, str(run)
    check_trace(json.loads(trace_path.read_text()), expects, env, NPROCS)
    if env.get("PIPECOLL_VERBOSE") == "1":
        assert "interposer: allreduce=fsize:1K" in run.stderr, str(run)
        assert "pipecoll: rank 0 allreduce:" in run.stderr, str(run)


def test_trace_per_rank_files(mpi_library, mpirun, pipecoll_file, tmp_path):
    """"%r" in PIPECOLL_TRACE: every rank writes its own file, nothing else is left behind."""
    program = [pipecoll_file(mpi_library, "tests/plain_mpi")]
    _, expects = baseline(mpi_library, mpirun, program, "c")
    env = {"PIPECOLL_MODE": "fconc:2"}
    run = mpirun(mpi_library, NPROCS, program, timeout=TIMEOUT,
                 env_extra={**env, "LD_PRELOAD": str(preload(mpi_library, pipecoll_file)),
                            "PIPECOLL_TRACE": str(tmp_path / "trace-%r.json")})
    assert run.returncode == 0, str(run)
    assert sorted(p.name for p in tmp_path.iterdir()) == [f"trace-{r}.json"
                                                           for r in range(NPROCS)]
    for rank in range(NPROCS):
        trace = json.loads((tmp_path / f"trace-{rank}.json").read_text())
        check_trace(trace, expects, env, NPROCS, rank=rank)


BAD_ENV = {
    "mode": ({"PIPECOLL_MODE": "fconc:0"}, "PIPECOLL_MODE='fconc:0' is not valid"),
    "mode-word": ({"PIPECOLL_MODE": "pipelined"}, "PIPECOLL_MODE='pipelined' is not valid"),
    "override": ({"PIPECOLL_MODE_BCAST": "fsize:1T"}, "PIPECOLL_MODE_BCAST='fsize:1T' is not"),
    "threshold": ({"PIPECOLL_THRESHOLD_BYTES": "-5"}, "PIPECOLL_THRESHOLD_BYTES='-5' is not"),
    "verbose": ({"PIPECOLL_VERBOSE": "yes"}, "PIPECOLL_VERBOSE='yes' is not valid; use 0 or 1"),
    "trace": ({"PIPECOLL_TRACE": "/nonexistent-dir/t.json"}, "PIPECOLL_TRACE='/nonexistent-dir"),
}


@pytest.mark.parametrize("case", list(BAD_ENV))
def test_bad_environment_stops_at_init(mpi_library, mpirun, pipecoll_file, case):
    env, message = BAD_ENV[case]
    run = mpirun(mpi_library, 2, [pipecoll_file(mpi_library, "tests/plain_mpi")],
                 timeout=TIMEOUT,
                 env_extra={**env, "LD_PRELOAD": str(preload(mpi_library, pipecoll_file))})
    assert run.returncode != 0, str(run)
    assert run.stderr.count(message) == 1, str(run)  # said once, not by every rank
    if case.startswith("mode") or case == "override":
        assert "fconc:N" in run.stderr and "fsize:BYTES" in run.stderr, str(run)  # the valid forms
    assert "RESULT" not in run.stdout, str(run)  # stopped before the program's collectives


# ---- mpi4py -------------------------------------------------------------------------------
MPI4PY_PROGRAM = r'''
"""An unmodified mpi4py program: buffer-based collectives, digests and what it called."""
import hashlib
import numpy as np
from mpi4py import MPI

comm = MPI.COMM_WORLD
rank, size = comm.Get_rank(), comm.Get_size()
digests, expects = [], []

def record(name, array, coll, count, dtype):
    digests.append((name, hashlib.sha256(array.tobytes()).hexdigest()[:16]))
    expects.append((coll, count * array.itemsize, dtype))

def ints(n, salt):  # small integers: any summation order gives the same bits
    return ((np.arange(n, dtype=np.int64) * 7 + rank * 13 + salt) % 57 - 28)

a = ints(100003, 1).astype(np.int32); b = np.empty_like(a)
comm.Allreduce(a, b, op=MPI.SUM); record("allreduce_int32", b, "allreduce", a.size, "MPI_INT")
c = ints(50001, 2).astype(np.float64)
comm.Allreduce(MPI.IN_PLACE, c, op=MPI.SUM)
record("allreduce_inplace_double", c, "allreduce", c.size, "MPI_DOUBLE")
f = ints(4099, 3).astype(np.float32); g = np.empty_like(f)
comm.Allreduce(f, g, op=MPI.MAX); record("allreduce_max_float", g, "allreduce", f.size, "MPI_FLOAT")
z = np.zeros(0, dtype=np.float64); comm.Allreduce(MPI.IN_PLACE, z, op=MPI.SUM)
record("allreduce_zero", z, "allreduce", 0, "MPI_DOUBLE")
d = ints(77777, 4).astype(np.float64) if rank == size - 1 else np.zeros(77777)
comm.Bcast(d, root=size - 1); record("bcast_double", d, "bcast", d.size, "MPI_DOUBLE")
e = ints(1009, 5).astype(np.int64); h = np.empty(1009 * size, dtype=np.int64)
comm.Allgather(e, h); record("allgather_int64", h, "allgather", e.size, "MPI_LONG")
s = ints(2048 * size, 6).astype(np.float64); r = np.empty(2048, dtype=np.float64)
comm.Reduce_scatter_block(s, r, op=MPI.SUM)
record("rsb_double", r, "reduce_scatter_block", r.size, "MPI_DOUBLE")
every = comm.gather(digests, root=0)  # MPI_Gather: not a wrapped call
if rank == 0:
    for i, (name, _) in enumerate(digests):
        print("RESULT", name, *[ranks[i][1] for ranks in every])
    for coll, nbytes, dtype in expects:
        print("EXPECT", coll, nbytes, dtype, "plain", 1)
'''

MPI4PY_MODES = ["bl", "nbl", "fconc4", "fsize1K", "threshold"]


@pytest.mark.parametrize("mode", MPI4PY_MODES)
def test_mpi4py_same_results_and_exact_trace(mpi_library, mpirun, pipecoll_file, tmp_path, mode):
    if mpi_library.family != "openmpi":
        pytest.skip(f"build/venv's mpi4py is built against Open MPI only; it cannot run "
                    f"under {mpi_library.display}")
    python = REPO / "build" / "venv" / "bin" / "python"
    if not python.exists():
        pytest.skip("build/venv missing: run `make setup`")
    script = tmp_path / "program.py"
    script.write_text(MPI4PY_PROGRAM)
    program = [python, script]
    want_results, expects = baseline(mpi_library, mpirun, program, "mpi4py")
    assert len(want_results) == 7, want_results

    env = dict(MODES[mode])
    env.pop("PIPECOLL_VERBOSE", None)
    trace_path = tmp_path / "trace.json"
    run = mpirun(mpi_library, NPROCS, program, timeout=TIMEOUT,
                 env_extra={**env, "LD_PRELOAD": str(preload(mpi_library, pipecoll_file)),
                            "PIPECOLL_TRACE": str(trace_path)})
    assert run.returncode == 0, str(run)
    results, _ = parse_output(run.stdout)
    assert results == want_results, str(run)
    check_trace(json.loads(trace_path.read_text()), expects, env, NPROCS)
