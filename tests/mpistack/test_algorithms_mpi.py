"""The algorithm knobs against the real, installed MPI libraries.

Per library: the version string a real MPI_Get_library_version returns parses and resolves to
a table entry; every label's value is parsed by the library as the table says (Open MPI
ompi_info, MPICH mpivars, Intel I_MPI_DEBUG echo); a bad value is caught; and where this machine
can observe it, the knob changes what the library does (Open MPI traffic monitor, MPICH
FALLBACK=error abort)."""
from __future__ import annotations

import dataclasses
import re
import subprocess
from pathlib import Path

import pytest

from mpistack import algorithms, libraries

PROBE_SOURCE = Path(__file__).with_name("coll_probe.c")
COUNT = "262144"  # doubles: 2 MiB, large enough that AUTO uses its large-message algorithms


@pytest.fixture(scope="session")
def probe_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("coll_probe")


def _compile(library: libraries.MpiLibrary, directory: Path) -> Path:
    exe = directory / f"coll_probe_{library.name}"
    if exe.exists():
        return exe
    done = subprocess.run([str(library.shim_mpicc), "-O1", "-o", str(exe), str(PROBE_SOURCE)],
                          env=library.environment(), capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, f"{library.name}: compiling the probe failed:\n{done.stderr}"
    return exe


def run(library, nprocs, args, env, probe_dir, timeout=60):
    exe = _compile(library, probe_dir)
    try:
        done = subprocess.run(library.launch_command(nprocs, [exe, *args]), env=env,
                              capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired as error:
        pytest.fail(f"{library.name}: {' '.join(map(str, args))} timed out after {timeout}s "
                    f"(output so far: {error.stdout!r})")
    return done.returncode, done.stdout + done.stderr


def test_version_from_a_real_run_resolves(mpi_library, probe_dir):
    rc, out = run(mpi_library, 1, [], mpi_library.environment(), probe_dir)
    assert rc == 0, out
    family, version = algorithms.parse_library_version(out)
    assert family == mpi_library.family
    assert (family, version) == algorithms.installed_version(mpi_library)
    # pcbench's mpi_library field is this string: it must select without any other help.
    sel = algorithms.select(family, "allreduce", False, "AUTO", version=out)
    assert sel.version == version
    assert algorithms.labels(mpi_library.name, "allreduce")[0] == "AUTO"


def _all_selections(library):
    for collective in algorithms.COLLECTIVES:
        for blocking in (False, True):
            for label in algorithms.labels(library.name, collective, blocking):
                yield algorithms.select(library.name, collective, blocking, label)


def _packed(selections):
    """Merge selections whose environments do not conflict (different collectives have
    different variables), so one ompi_info/mpivars call checks several labels at once."""
    groups: list[tuple[dict, set, list]] = []
    for sel in selections:
        for env, unset, members in groups:
            clash = any(env.get(k, v) != v for k, v in sel.env.items()) \
                or set(sel.env) & unset or set(sel.unset) & set(env)
            if not clash:
                env.update(sel.env)
                unset.update(sel.unset)
                members.append(sel)
                break
        else:
            groups.append((dict(sel.env), set(sel.unset), [sel]))
    for env, unset, members in groups:
        yield dataclasses.replace(members[0], env=env, unset=tuple(sorted(unset))), members


def test_every_label_is_parsed_as_the_table_says(mpi_library, probe_dir):
    if mpi_library.family == "impi":
        # No tool reports a parsed value: run once per label slot with every I_MPI_ADJUST_* of
        # that slot set, and require each to be echoed without "Incorrect algorithm".
        by_slot: dict[int, dict] = {}
        for collective in algorithms.COLLECTIVES:
            for blocking in (False, True):
                for slot, label in enumerate(algorithms.labels(mpi_library.name, collective, blocking)[1:]):
                    sel = algorithms.select(mpi_library.name, collective, blocking, label)
                    by_slot.setdefault(slot, {}).update(sel.env)
        for env in by_slot.values():
            rc, out = run(mpi_library, 1, [], {**mpi_library.environment(), **env,
                                               "I_MPI_DEBUG": "6"}, probe_dir)
            assert rc == 0, out
            assert "Incorrect" not in out, out
            for name, value in env.items():
                assert f"{name}={value}" in out, f"{name}={value} not echoed"
        return
    failures = []
    for merged, members in _packed(_all_selections(mpi_library)):
        verdict = algorithms.check_parsed(mpi_library, merged)
        if not verdict:
            names = ", ".join(f"{s.collective}/{'B' if s.blocking else 'NB'}/{s.label}" for s in members)
            failures.append(f"{names}: {verdict.detail}")
    assert not failures, "\n".join(failures)


def test_a_bad_value_is_reported(mpi_library, probe_dir):
    sel = algorithms.select(mpi_library.name, "allreduce", False, "RDB")
    bad = dataclasses.replace(sel, env={**sel.env, sel.variable: "99" if
                                        mpi_library.family == "impi" else "bogus"})
    env = bad.apply(mpi_library.environment())
    if mpi_library.family == "impi":
        env["I_MPI_DEBUG"] = "6"
    else:
        assert algorithms.check_parsed(mpi_library, bad).status == "rejected"
    rc, out = run(mpi_library, 2, ["allreduce", "0", "1024", "sum"], env, probe_dir)
    verdict = algorithms.check_output(bad, out, rc)
    assert verdict.status == "rejected", (verdict, out[-2000:])
    # Open MPI and Intel MPI carry on with their default (exit 0): only the output tells.
    assert (rc != 0) == (mpi_library.family == "mpich"), out[-2000:]


def _senders(output: str) -> set[tuple[int, int]]:
    """(rank, peer) pairs with collective bytes, from Open MPI's pml monitoring output."""
    pairs = set()
    for line in output.splitlines():
        fields = line.split("\t")
        if fields[0] == "I" and len(fields) > 3 and int(fields[3].split()[0]) > 0:
            pairs.add((int(fields[1]), int(fields[2])))
    return pairs


RING4 = {(0, 1), (1, 2), (2, 3), (3, 0)}
HALVING4 = {(r, r ^ 1) for r in range(4)} | {(r, r ^ 2) for r in range(4)}


def test_open_mpi_knob_changes_the_traffic(probe_dir):
    lib = libraries.get("openmpi")
    if not lib.shim_mpirun.exists():
        pytest.skip(f"Open MPI not set up: run `make setup` (no {lib.shim_mpirun})")
    monitor = {"OMPI_MCA_pml_monitoring_enable": "2", "OMPI_MCA_pml_monitoring_enable_output": "1"}

    def senders(blocking, label, drop=(), collective="allreduce"):
        sel = algorithms.select("openmpi", collective, blocking, label)
        env = {**sel.apply(lib.environment()), **monitor}
        for name in drop:
            env.pop(name)
        rc, out = run(lib, 4, [collective, str(int(blocking)), COUNT, "sum"], env, probe_dir)
        assert rc == 0, out
        pairs = _senders(out)
        assert pairs, f"no monitoring output:\n{out[-2000:]}"
        return pairs

    assert senders(False, "RNG") == RING4
    assert senders(False, "RSA") == HALVING4
    assert senders(True, "RNG") == RING4
    # The table's with_label matters: without dynamic rules tuned ignores the forced ring.
    assert senders(True, "RNG", drop=["OMPI_MCA_coll_tuned_use_dynamic_rules"]) != RING4
    # The labels of fig5 (Iallgather LIN), fig6 (Ibcast CHAIN), and Ireduce CHAIN.
    assert senders(False, "LIN", collective="allgather") == \
        {(r, q) for r in range(4) for q in range(4) if r != q}
    assert senders(False, "CHAIN", collective="bcast") == {(0, 1), (1, 2), (2, 3)}
    assert senders(False, "CHAIN", collective="reduce") == {(1, 0), (2, 1), (3, 2)}


def test_mpich_inapplicable_algorithm_fails_loudly(probe_dir):
    lib = libraries.get("mpich")
    if not lib.shim_mpirun.exists():
        pytest.skip(f"MPICH not set up: run `make setup` (no {lib.shim_mpirun})")
    # What select() refuses (RSA with a user op), forced by hand: FALLBACK=error aborts the call.
    entry = algorithms.find_entry("mpich", algorithms.installed_version(lib)[1], "allreduce", False)
    forced = algorithms.select("mpich", "allreduce", False, "RSA")
    rc, out = run(lib, 4, ["allreduce", "0", COUNT, "noop"], forced.apply(lib.environment()), probe_dir)
    assert rc != 0 and "not usable" in out, out[-2000:]
    assert algorithms.check_output(forced, out, rc).status == "rejected"
    assert "RSA" in entry.refuses_user_op
    # The NOOP twin select() gives instead runs under the same FALLBACK=error.
    twin = algorithms.select("mpich", "allreduce", False, "AUTO", op="noop")
    rc, out = run(lib, 4, ["allreduce", "0", COUNT, "noop"], twin.apply(lib.environment()), probe_dir)
    assert rc == 0 and algorithms.check_output(twin, out, rc).status != "rejected", out[-2000:]
    # Blocking RSA: MPI_Init's own 1-element allreduce cannot use it; the table's "print"
    # keeps init alive and the check tolerates exactly that one report.
    blocking = algorithms.select("mpich", "allreduce", True, "RSA")
    rc, out = run(lib, 4, ["allreduce", "1", COUNT, "sum"], blocking.apply(lib.environment()), probe_dir)
    assert rc == 0, out[-2000:]
    assert algorithms.check_output(blocking, out, rc).status == "unverifiable"
    strict = {**blocking.apply(lib.environment()), "MPIR_CVAR_COLLECTIVE_FALLBACK": "error"}
    rc, out = run(lib, 4, ["allreduce", "1", COUNT, "sum"], strict, probe_dir)
    assert rc != 0 and re.search(r"internal_Init|MPI_Init", out), out[-2000:]


def _intel_iallreduce_algorithms(lib, env, op, probe_dir, nprocs=4):
    """Internal MPIR_Iallreduce_intra_* functions the ranks enter (gdb breakpoints)."""
    functions = [f"MPIR_Iallreduce_intra_{kind}_{name}" for kind in ("sched", "nbc") for name in
                 ("naive", "nreduce", "rabenseifner", "recursive_doubling",
                  "reduce_scatter_allgather", "ring", "knomial")]
    gdb = ["gdb", "-q", "-batch", "-ex", "set pagination off", "-ex", "break main", "-ex", "run"]
    for function in functions:
        gdb += ["-ex", f"break {function}"]
    gdb += ["-ex", "continue", "-ex", "bt 1", "--args"]
    exe = _compile(lib, probe_dir)
    args = [str(exe), "allreduce", "0", COUNT, op, "1"]
    # Only rank 0 under gdb (hydra MPMD syntax): loading libmpi's symbols is the slow part.
    command = [*lib.launch_command(1, [*gdb, *args]), ":", "-np", str(nprocs - 1), *args]
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=120)
    return set(re.findall(r"^#0 .* in (MPIR_Iallreduce_intra_\w+)", done.stdout, re.M))


def test_intel_noop_twin_runs_sum_algorithm(probe_dir):
    lib = libraries.get("impi")
    if not lib.shim_mpirun.exists():
        pytest.skip(f"Intel MPI not set up: run `make setup` (no {lib.shim_mpirun})")
    if subprocess.run(["sh", "-c", "command -v gdb"], capture_output=True).returncode:
        pytest.skip("gdb not installed: Intel's algorithm choice is only observable with it")

    def ran(label, op, nprocs=4):
        sel = algorithms.select("impi", "allreduce", False, label, op=op, nprocs=nprocs)
        return _intel_iallreduce_algorithms(lib, sel.apply(lib.environment()), op, probe_dir)

    # The trap: AUTO switches to recursive doubling for a user op...
    assert ran("AUTO", "sum") == {"MPIR_Iallreduce_intra_sched_rabenseifner"}
    raw = algorithms.select("impi", "allreduce", False, "AUTO").apply(lib.environment())
    assert _intel_iallreduce_algorithms(lib, raw, "noop", probe_dir) == \
        {"MPIR_Iallreduce_intra_sched_recursive_doubling"}
    # ...and select()'s NOOP twin keeps Rabenseifner (the nbc implementation) at p=4.
    assert ran("AUTO", "noop") == {"MPIR_Iallreduce_intra_nbc_rabenseifner"}
    assert ran("RNG", "noop") == {"MPIR_Iallreduce_intra_nbc_ring"}


def test_intel_debug_output_judges_the_knob(probe_dir):
    lib = libraries.get("impi")
    if not lib.shim_mpirun.exists():
        pytest.skip(f"Intel MPI not set up: run `make setup` (no {lib.shim_mpirun})")
    sel = algorithms.select("impi", "allreduce", False, "RNG", op="noop")
    env = {**sel.apply(lib.environment()), "I_MPI_DEBUG": "6"}
    rc, out = run(lib, 2, ["allreduce", "0", COUNT, "noop"], env, probe_dir)
    assert rc == 0, out[-2000:]
    assert "I_MPI_ADJUST_IALLREDUCE=4" in out
    verdict = algorithms.check_output(sel, out, rc)
    assert verdict.status == "unverifiable" and "not observable" in verdict.detail
