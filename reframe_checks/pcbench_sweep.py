"""ReFrame checks behind the paper's micro-benchmark figures (fig1-7, fig11; table1's data).

    reframe -C site_configs/local.py -c reframe_checks -r              # every configured figure
    reframe -C site_configs/local.py -c reframe_checks -r -t '^fig3$'  # one figure
    reframe ... -r -S max_bytes=4M -S iters=3                          # smaller sweep

One test per case of the run configuration (reframe_checks/cases.py): a figure, an MPI
library (any ReFrame environment whose extras say mpi_library=<name>), an algorithm label,
an op and a process count; all of the figure's variants run in one pcbench invocation over
the configured message sizes. The run configuration is config/config.yaml, or the file named
by PCREPRO_CONFIG (the workflow points it at results/<run_id>/config.yaml); process counts
and figures come only from there (they decide which tests exist), the rest can be
overridden per run with -S:

    -S min_bytes=1M -S max_bytes=16M   message sizes (powers of two; K/M/G suffixes)
    -S warmup=1 -S iters=10            untimed and (at most) timed repetitions per size
    -S time_budget=0.5                 seconds per size and variant (0: exactly iters)
    -S dtype=float                     element type
    -S run_id=NAME                     recorded in every row (the workflow sets it)
    -S pcbench=PATH                    another pcbench binary (default: the environment's
                                       extras.pcbench, i.e. build/pipecoll/<library>/pcbench)

The launcher and scheduler come from the site config (mpirun here, srun on a Slurm site);
nothing here names a launcher. Slurm layouts are ReFrame's own variables, e.g.
-S num_tasks_per_node=1 for the paper's one rank per node.

Each test writes pcbench.jsonl (every size, every variant: the full curves) and
provenance.json into its output folder; the perflog gets MB/s and bus bandwidth at the
largest size per variant. Sanity fails unless: exactly one row per variant and size, each
reporting the requested number of ranks, pcbench's own rank-count line agrees, every result
verified (NOOP results cannot be, they are "skipped"), and the algorithm knob was accepted.
"""
import json
import os
import platform
import shlex
import socket
import subprocess
import sys
from pathlib import Path

import reframe as rfm
import reframe.utility.sanity as sn
from reframe.core.builtins import (parameter, run_after, run_before, sanity_function,
                                   variable)

# Append, never insert: ReFrame appends the loaded file's folder to sys.path and then pops
# that position, so an insert would make it drop another entry.
if str(Path(__file__).resolve().parent) not in sys.path:
    sys.path.append(str(Path(__file__).resolve().parent))
import cases as pcases  # noqa: E402

CONFIG = pcases.load_config()
CASES = pcases.cases(CONFIG)
ROWS = "pcbench.jsonl"
PROVENANCE = "provenance.json"


def variant_key(variant: str, segments=None, segment_bytes=None) -> str:
    """Paper notation usable as a perf variable name: BL, NBL, NBLx4, 32MB, 512KB."""
    if variant == "blocking":
        return "BL"
    if variant == "nonblocking":
        return "NBL"
    if variant == "fconc":
        return f"NBLx{int(segments)}"
    if variant == "fsize":
        size = int(segment_bytes)
        for unit, name in ((1 << 30, "GB"), (1 << 20, "MB"), (1 << 10, "KB")):
            if size >= unit and size % unit == 0:
                return f"{size // unit}{name}"
        return f"{size}B"
    raise ValueError(f"unknown variant {variant!r}")


def spec_key(spec: str) -> str:
    """Same key from a catalogue variant: 'fconc:4' -> NBLx4, 'fsize:32M' -> 32MB."""
    kind, _, arg = spec.partition(":")
    if kind == "fconc":
        return variant_key(kind, segments=int(arg))
    if kind == "fsize":
        return variant_key(kind, segment_bytes=pcases.parse_size(arg))
    return variant_key(kind)


def row_key(row: dict) -> str:
    return variant_key(row["variant"], row.get("segments_requested"),
                       row.get("segment_bytes_requested"))


@sn.deferrable
def read_rows(path):
    """pcbench's JSON Lines; a missing or garbled file fails sanity with the reason."""
    rows = []
    with open(path, encoding="utf-8") as handle:
        for number, line in enumerate(handle, start=1):
            if line.strip():
                try:
                    rows.append(json.loads(line))
                except json.JSONDecodeError as error:
                    raise sn.SanityError(f"{path}:{number}: not JSON ({error.msg})") from None
    return rows


@sn.deferrable
def variant_keys(rows):
    return sorted({row_key(row) for row in rows})


@sn.deferrable
def at_largest(rows, key, field):
    matching = [row for row in rows if row_key(row) == key]
    if not matching:
        raise sn.SanityError(f"no row for variant {key}")
    return float(max(matching, key=lambda row: row["bytes"])[field])


def git_revision() -> str:
    try:
        out = subprocess.run(["git", "-C", str(pcases.REPO_ROOT), "describe", "--always",
                              "--dirty", "--abbrev=12"], capture_output=True, text=True, timeout=10)
        return out.stdout.strip() or "unknown"
    except (OSError, subprocess.SubprocessError):
        return "unknown"


@rfm.simple_test
class PcbenchSweep(rfm.RunOnlyRegressionTest):
    descr = "pcbench sweep behind one paper figure (one library, algorithm, op, process count)"
    case = parameter(CASES, fmt=lambda case: case.id)
    valid_systems = ["+mpi"]
    maintainers = ["pipecoll-repro"]

    min_bytes = variable(str, value=str(CONFIG["sizes"]["min_bytes"]))
    max_bytes = variable(str, value=str(CONFIG["sizes"]["max_bytes"]))
    warmup = variable(int, value=CONFIG["measure"]["warmup"])
    iters = variable(int, value=CONFIG["measure"]["iters"])
    time_budget = variable(float, value=float(CONFIG["measure"]["time_budget"]))
    dtype = variable(str, value=CONFIG["measure"]["dtype"])
    run_id = variable(str, value="manual")
    pcbench = variable(str, value="")
    time_limit = CONFIG["reframe"]["time_limit"]
    keep_files = [ROWS, PROVENANCE]

    @run_after("init")
    def set_case(self):
        # Any environment reaching this library qualifies (local shims, Spack, modules).
        self.valid_prog_environs = [f"%mpi_library={self.case.library}"]
        self.num_tasks = self.case.nprocs
        self.tags = {self.case.figure, self.case.library, self.case.collective, "pcbench"}

    def sizes(self) -> list[int]:
        low, high = pcases.parse_size(self.min_bytes), pcases.parse_size(self.max_bytes)
        return [1 << e for e in range(low.bit_length() - 1, high.bit_length())
                if low <= (1 << e) <= high]

    def select_algorithm(self) -> None:
        """The knob settings for this case from mpistack.algorithms (one Selection per kind
        of call the variants make: MPI_<Coll> for blocking, MPI_I<coll> for the others)."""
        from mpistack import algorithms
        extras = self.current_environ.extras
        library = extras["mpi_library"]
        # An environment that brings its own build of the library (Spack, modules) says
        # which version it is (extras.mpi_version); else the set-up's install is asked.
        target = {"library": extras["mpi_family"], "version": extras["mpi_version"]} \
            if extras.get("mpi_version") else {"library": library}
        kinds = sorted({spec == "blocking" for spec in self.case.variants})
        self.selections = [algorithms.select(collective=self.case.collective, blocking=blocking,
                                             label=self.case.algorithm, op=self.case.op, **target)
                           for blocking in kinds]
        self.knobs = {}
        for selection in self.selections:
            self.knobs.update(selection.env)
        self.unset_knobs = sorted({name for selection in self.selections
                                   for name in selection.unset} - set(self.knobs))
        # Judged before the job by the library's own parser (ompi_info, mpivars): a value it
        # does not take fails sanity even when the run itself would silently carry on.
        if extras.get("mpi_version"):
            self.parsed_verdicts = [algorithms.Verdict(
                "unverifiable", "not the set-up's install: only the run's output is judged")]
        else:
            lib = pcases.libraries.get(library)
            self.parsed_verdicts = [algorithms.check_parsed(lib, selection)
                                    for selection in self.selections]
        if self.selections[0].family == "impi":
            # Intel MPI reports a refused I_MPI_ADJUST_* value only at I_MPI_DEBUG >= 6
            # (algorithms.toml, family.impi acceptance); check_output reads that echo.
            self.knobs.setdefault("I_MPI_DEBUG", "6")

    @run_before("run")
    def set_command(self):
        extras = self.current_environ.extras
        self.select_algorithm()
        self.env_vars.update(self.knobs)
        # Knobs that must not leak in from the caller's environment (AUTO means unset).
        self.prerun_cmds = [f"unset {name}" for name in self.unset_knobs]
        self.executable = self.pcbench or extras["pcbench"]
        main = self.selections[-1]  # the non-blocking call's when there are both
        labels = {"figure": self.case.figure, "library": self.case.library,
                  **main.record(), "run_id": self.run_id, "case": self.case.id}
        labels["algorithm_env"] = " ".join(f"{k}={v}" for k, v in sorted(self.knobs.items()))
        self.executable_opts = [
            "--collective", self.case.collective,
            "--variant", ",".join(self.case.variants),
            "--op", self.case.op, "--dtype", self.dtype,
            "--min-bytes", self.min_bytes, "--max-bytes", self.max_bytes,
            "--warmup", str(self.warmup), "--iters", str(self.iters), "--output", ROWS,
        ]
        if self.time_budget > 0:  # 0: no budget, exactly `iters` repetitions
            self.executable_opts += ["--time-budget", str(self.time_budget)]
        for key, value in labels.items():
            # ReFrame pastes the options into a shell script as they are.
            self.executable_opts += ["--label", shlex.quote(f"{key}={value}")]

    # -- sanity ------------------------------------------------------------------------
    @sanity_function
    def validate(self):
        rows = read_rows(os.path.join(self.stagedir, ROWS))
        want_keys = sorted(spec_key(spec) for spec in self.case.variants)
        sizes = self.sizes()
        expected_check = {"pass"} if self.case.op == "sum" else {"pass", "skipped"}
        return sn.all([
            # Most telling first: a refused knob or a broken job explains missing rows.
            self.knob_accepted(),
            # None: the scheduler cannot tell (ReFrame's squeue without accounting).
            sn.assert_in(self.job.exitcode, (0, None),
                         msg="the job exited with status {0} (pcbench's own: 1 a result check "
                             "failed, 2 usage, 3 memory/output, 4 MPI error; else the launcher "
                             "failed): see rfm_job.err"),
            # Exactly one header, from one MPI job of num_tasks ranks: a launcher with the
            # wrong PMI starts num_tasks singletons, each printing "1 ranks".
            sn.assert_eq(sn.extractall(r"(?m)^# MPI version \S+, (\d+) ranks on", self.stdout, 1, int),
                         [self.num_tasks],
                         msg="pcbench's rank-count lines say {0}, expected one saying {1}"),
            sn.assert_eq(sn.len(rows), len(want_keys) * len(sizes),
                         msg=f"expected {len(want_keys)} variants x {len(sizes)} sizes = "
                             f"{len(want_keys) * len(sizes)} rows, got {{0}}"),
            sn.assert_eq(variant_keys(rows), want_keys,
                         msg="pcbench ran variants {0}, the test asked for {1}"),
            sn.all(sn.map(lambda row: sn.assert_eq(
                row["nprocs"], self.num_tasks,
                msg=f"a row reports {{0}} ranks, the test launched {self.num_tasks}"), rows)),
            sn.all(sn.map(lambda row: sn.assert_in(
                row["check"], expected_check,
                msg=f"result verification {{0}} at {row['bytes']} bytes "
                    f"({row_key(row)}): expected one of {sorted(expected_check)}"), rows)),
        ])

    def knob_accepted(self):
        rejected = [verdict.detail for verdict in self.parsed_verdicts + self.output_verdicts
                    if verdict.status == "rejected"]
        return sn.assert_false(rejected, msg="the algorithm knob was not accepted: {0}")

    # -- performance -------------------------------------------------------------------
    @run_before("performance")
    def set_perf_variables(self):
        rows = read_rows(os.path.join(self.stagedir, ROWS))
        self.perf_variables = {}
        for spec in self.case.variants:
            key = spec_key(spec)
            self.perf_variables[f"{key}_mbps"] = sn.make_performance_function(
                at_largest(rows, key, "mbps"), "MB/s")
            self.perf_variables[f"{key}_busbw"] = sn.make_performance_function(
                at_largest(rows, key, "busbw_mbps"), "MB/s")
            self.perf_variables[f"{key}_time"] = sn.make_performance_function(
                at_largest(rows, key, "time_mean_s"), "s")

    # -- provenance --------------------------------------------------------------------
    def judge_output(self):
        """The library's own complaints about the knob in the job's output (check_output)."""
        from mpistack import algorithms
        output = ""
        for name in (self.stdout.evaluate(), self.stderr.evaluate()):
            path = Path(self.stagedir) / name
            if path.exists():
                output += path.read_text(errors="replace")
        self.output_verdicts = [algorithms.check_output(selection, output, self.job.exitcode or 0)
                                for selection in self.selections]

    @run_before("sanity")
    def write_provenance(self):
        self.judge_output()
        try:
            first = read_rows(os.path.join(self.stagedir, ROWS)).evaluate()[0]
        except (OSError, IndexError, sn.SanityError):
            first = {}
        record = {
            "case": self.case.id, "figure": self.case.figure, "library": self.case.library,
            "environment": self.current_environ.name,
            "mpi_library": first.get("mpi_library"), "mpi_version": first.get("mpi_version"),
            "pipecoll_version": first.get("pipecoll_version"),
            "pipecoll_git": git_revision(),
            "collective": self.case.collective, "algorithm": self.case.algorithm,
            "op": self.case.op, "variants": list(self.case.variants),
            "knobs": self.knobs, "unset": self.unset_knobs,
            "algorithm_in_force": self.selections[-1].algorithm,
            "algorithm_note": self.selections[-1].note,
            "knob_verified_how": self.selections[-1].verified,
            "knob_check_before_run": [v.status + ": " + v.detail for v in self.parsed_verdicts],
            "knob_check_output": [v.status + ": " + v.detail for v in self.output_verdicts],
            "nprocs": self.num_tasks,
            "host": socket.gethostname(), "machine": platform.platform(),
            "system": self.current_partition.fullname, "launcher": self.job.launcher.registered_name,
            "command": " ".join([self.executable, *self.executable_opts]),
            "mpi_version_read": self.selections[-1].version,
            "run_id": self.run_id, "reframe_check": f"{self.display_name} /{self.hashcode}",
        }
        path = Path(self.stagedir) / PROVENANCE
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(record, indent=2) + "\n", encoding="utf-8")
        os.replace(tmp, path)
