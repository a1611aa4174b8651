"""mpistack/algorithms.toml is complete and well formed; select() answers or refuses clearly.

No MPI needed: these read the table only (real-run checks are in test_algorithms_mpi.py)."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from mpistack import algorithms, libraries

TABLE = algorithms.load()
CLI = libraries.REPO_ROOT / "tools" / "algorithm_env.py"
# A version inside each covered series, to address the table without an installed library.
SAMPLE_VERSION = {("openmpi", "4.1"): "4.1.4", ("openmpi", "5.0"): "5.0.11",
                  ("mpich", "4.0"): "4.0.2", ("mpich", "5.0"): "5.0.2",
                  ("impi", "2021"): "2021.18.1"}


def all_cells():
    for family, spec in TABLE.families.items():
        for series in spec["series"]:
            for collective in algorithms.COLLECTIVES:
                for blocking in (False, True):
                    yield family, SAMPLE_VERSION[(family, series)], collective, blocking


def test_every_library_family_is_covered():
    families = {lib.family for lib in libraries.load().values()}
    assert families <= set(TABLE.families), f"families without knobs: {families - set(TABLE.families)}"
    assert set(SAMPLE_VERSION) == {(f, s) for f, spec in TABLE.families.items()
                                   for s in spec["series"]}


def test_every_cell_has_exactly_one_entry():
    for family, version, collective, blocking in all_cells():
        series = algorithms.series_of(family, version)
        hits = [e for e in TABLE.entries if (e.family, e.collective, e.blocking)
                == (family, collective, blocking) and series in e.series]
        assert len(hits) == 1, f"{family} {series} {collective} blocking={blocking}: {len(hits)} entries"


@pytest.mark.parametrize("entry", TABLE.entries,
                         ids=lambda e: f"{e.family}-{'+'.join(e.series)}-{e.call}")
def test_entry_is_well_formed(entry):
    assert entry.family in TABLE.families
    assert set(entry.series) <= set(TABLE.families[entry.family]["series"])
    assert entry.collective in algorithms.COLLECTIVES
    unknown = set(entry.labels) - set(TABLE.labels)
    assert not unknown, f"labels missing from [labels]: {unknown}"
    assert algorithms.AUTO not in entry.labels, "AUTO is implicit"
    assert entry.labels == {} or entry.variable, "labels need a variable"
    assert set(entry.verified) <= {*entry.labels, "*"}
    assert set(entry.label_env) <= set(entry.labels)
    assert set(entry.refuses_user_op) <= set(entry.labels)
    if entry.noop_auto:
        assert entry.noop_auto in entry.labels and entry.noop_auto not in entry.refuses_user_op
    assert all(isinstance(v, str) and v for v in entry.labels.values())
    assert len(set(entry.labels.values())) == len(entry.labels), "two labels, one value"
    if entry.family == "impi":  # Intel silently ignores some bad numbers: the table is the check
        assert all(v.isdigit() and int(v) > 0 for v in entry.labels.values())


def test_every_label_selects_for_every_version_and_op():
    for family, version, collective, blocking in all_cells():
        entry = algorithms.find_entry(family, version, collective, blocking)
        for label in entry.offered():
            for op in algorithms.OPS:
                refused = label in entry.refuses_user_op or (
                    label == "AUTO" and entry.noop_trap and not entry.noop_auto)
                if op == "noop" and refused:
                    with pytest.raises(algorithms.UserOpRefusedError, match="refuses user-defined ops|would not measure"):
                        algorithms.select(family, collective, blocking, label, op, version, 8)
                    continue
                sel = algorithms.select(family, collective, blocking, label, op, version, 8)
                always = TABLE.families[family]["always"]
                assert set(always) <= set(sel.env)  # label_env may override a value
                if sel.algorithm != algorithms.AUTO:
                    assert sel.env[entry.variable] == entry.labels[sel.algorithm]
                    assert entry.with_label.items() <= sel.env.items() or sel.algorithm in entry.label_env
                else:
                    assert entry.variable in sel.env or entry.variable in sel.unset or not entry.variable
                assert sel.verified


def test_unknown_label_lists_the_valid_ones():
    with pytest.raises(algorithms.UnknownLabelError) as info:
        algorithms.select("mpich", "allreduce", False, "FOO", version="5.0.2")
    message = str(info.value)
    assert "'FOO'" in message and "MPI_Iallreduce" in message
    for label in ("AUTO", "RDB", "RNG", "RSA_RECEXCH"):
        assert label in message


def test_label_case_is_forgiven_but_nothing_else():
    assert algorithms.select("openmpi", "bcast", False, "chain", version="4.1.4").env == \
        {"OMPI_MCA_coll_libnbc_ibcast_algorithm": "chain"}
    with pytest.raises(algorithms.UnknownLabelError, match="valid: AUTO"):
        algorithms.select("openmpi", "allreduce", False, "ring", version="4.1.4")


def test_bad_collective_op_family_version():
    with pytest.raises(algorithms.AlgorithmError, match="unknown collective 'alltoall'; use one of allreduce"):
        algorithms.select("openmpi", "alltoall", False, "AUTO", version="4.1.4")
    with pytest.raises(algorithms.AlgorithmError, match="unknown op 'max'"):
        algorithms.select("openmpi", "allreduce", False, "AUTO", op="max", version="4.1.4")
    with pytest.raises(algorithms.AlgorithmError, match="unknown MPI library 'mvapich'"):
        algorithms.select("mvapich", "allreduce", False, "AUTO")
    with pytest.raises(algorithms.UnsupportedVersionError, match=r"covers mpich 4\.0\.x, 5\.0\.x"):
        algorithms.select("mpich", "allreduce", False, "AUTO", version="3.4.3")
    with pytest.raises(algorithms.UnsupportedVersionError, match=r"covers impi 2021\.x"):
        algorithms.select("impi", "allreduce", False, "AUTO", version="2019.12")


@pytest.mark.parametrize("text, family, version", [
    ("Open MPI v4.1.4, package: Debian OpenMPI, ident: 4.1.4, repo rev: v4.1.4, May 26, 2022",
     "openmpi", "4.1.4"),
    ("Open MPI v5.0.11, package: Open MPI conda@x Distribution", "openmpi", "5.0.11"),
    ("MPICH Version:      5.0.2\nMPICH Release date: Fri Sep 25", "mpich", "5.0.2"),
    ("MPICH Version:    \t4.0.2\nMPICH Device:    \tch4:ucx", "mpich", "4.0.2"),
    ("Intel(R) MPI Library 2021.18.1 for Linux* OS\n", "impi", "2021.18.1"),
])
def test_parse_library_version(text, family, version):
    assert algorithms.parse_library_version(text) == (family, version)
    # The whole string also works as `version`, as pcbench reports it in mpi_library.
    assert algorithms.select(family, "allreduce", False, "AUTO", version=text).version == version


def test_parse_library_version_refuses_unknown_text():
    with pytest.raises(algorithms.AlgorithmError, match="cannot tell the MPI library"):
        algorithms.parse_library_version("MVAPICH2 Version 2.3.7")


def test_noop_trap_forces_the_sum_algorithm():
    # MPICH: AUTO would use RDB for a user op; RSA itself refuses user ops.
    sel = algorithms.select("mpich", "allreduce", False, "AUTO", "noop", version="5.0.2")
    assert sel.algorithm == "RSA_RECEXCH"
    assert sel.env["MPIR_CVAR_IALLREDUCE_INTRA_ALGORITHM"] == \
        "tsp_recexch_reduce_scatter_recexch_allgatherv"
    assert sel.env["MPIR_CVAR_COLLECTIVE_FALLBACK"] == "error"
    assert "op=noop" in sel.note and sel.record()["algorithm"] == "RSA_RECEXCH"
    # Intel: Rabenseifner, what AUTO picks for large SUM; preset 2 keeps a user op only at
    # power-of-two p >= 4 (gdb), so the process count is required and checked.
    sel = algorithms.select("impi", "allreduce", False, "AUTO", "noop", version="2021.18.1",
                            nprocs=8)
    assert (sel.algorithm, sel.env) == ("RSA", {"I_MPI_ADJUST_IALLREDUCE": "2"})
    with pytest.raises(algorithms.AlgorithmError, match="give the number of processes"):
        algorithms.select("impi", "allreduce", False, "AUTO", "noop", version="2021.18.1")
    for nprocs in (2, 3, 9):
        with pytest.raises(algorithms.UserOpRefusedError, match=f"at {nprocs} processes"):
            algorithms.select("impi", "allreduce", False, "RSA", "noop", version="2021.18.1",
                              nprocs=nprocs)
    assert algorithms.select("impi", "allreduce", False, "RSA", "sum", version="2021.18.1",
                             nprocs=9).env == {"I_MPI_ADJUST_IALLREDUCE": "2"}
    # SUM keeps the library's own choice; Open MPI has no trap.
    assert algorithms.select("impi", "allreduce", False, "AUTO", "sum",
                             version="2021.18.1").unset == ("I_MPI_ADJUST_IALLREDUCE",)
    assert algorithms.select("openmpi", "allreduce", False, "AUTO", "noop", version="4.1.4").env == \
        {"OMPI_MCA_coll_libnbc_iallreduce_algorithm": "ignore"}
    with pytest.raises(algorithms.UserOpRefusedError, match="sched_reduce_scatter_allgather"):
        algorithms.select("mpich", "allreduce", False, "RSA", "noop", version="5.0.2")
    # MPICH Ireduce: no label matches AUTO's SUM choice for a user op -> refused, not guessed.
    with pytest.raises(algorithms.UserOpRefusedError, match="pick one explicit label"):
        algorithms.select("mpich", "reduce", False, "AUTO", "noop", version="5.0.2")


def test_open_mpi_blocking_needs_dynamic_rules_and_auto_clears_them():
    sel = algorithms.select("openmpi", "allreduce", True, "RNG", version="4.1.4")
    assert sel.env == {"OMPI_MCA_coll_tuned_use_dynamic_rules": "1",
                       "OMPI_MCA_coll_tuned_allreduce_algorithm": "ring"}
    auto = algorithms.select("openmpi", "allreduce", True, "AUTO", version="4.1.4")
    inherited = {"OMPI_MCA_coll_tuned_use_dynamic_rules": "1",
                 "OMPI_MCA_coll_tuned_allreduce_algorithm": "ring", "KEEP": "x"}
    assert auto.apply(inherited) == {"KEEP": "x"}


def run_cli(*args):
    return subprocess.run([sys.executable, str(CLI), *args], capture_output=True, text=True,
                          timeout=60, env={**os.environ, "PYTHONPATH": str(libraries.REPO_ROOT)})


def test_cli_sh_output_is_sourceable():
    done = run_cli("openmpi", "allreduce", "RNG", "--blocking", "--version", "4.1.4")
    assert done.returncode == 0, done.stderr
    shell = subprocess.run(["sh", "-c", done.stdout + "\necho $OMPI_MCA_coll_tuned_allreduce_algorithm"
                            " $OMPI_MCA_coll_tuned_use_dynamic_rules"],
                           capture_output=True, text=True, timeout=30)
    assert shell.stdout.split() == ["ring", "1"]


def test_cli_json_and_list():
    done = run_cli("impi", "allreduce", "AUTO", "--op", "noop", "--np", "8", "--version", "2021.18.1")
    assert done.returncode == 0 and "export I_MPI_ADJUST_IALLREDUCE=2" in done.stdout, done.stderr
    done = run_cli("mpich", "allreduce", "AUTO", "--op", "noop", "--format", "json",
                   "--version", "MPICH Version:      5.0.2")
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)
    assert data["algorithm"] == "RSA_RECEXCH" and data["version"] == "5.0.2"
    done = run_cli("impi", "bcast", "--list", "--version", "2021.18.1", "--format", "json")
    assert json.loads(done.stdout)[0] == "AUTO"


def test_cli_errors_are_clear():
    done = run_cli("impi", "allreduce", "FOO", "--version", "2021.18.1")
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert "label 'FOO' is not available" in done.stderr and "valid: AUTO, RDB, RSA" in done.stderr
    done = run_cli("openmpi", "allreduce", "RNG", "--version", "3.1.6")
    assert done.returncode == 2 and "covers openmpi 4.1.x, 5.0.x" in done.stderr
