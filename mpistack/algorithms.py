"""Paper algorithm labels -> the environment that makes an MPI library use that algorithm.

Reads algorithms.toml (beside this file; the single source of truth). Standard library only.

    >>> from mpistack import algorithms
    >>> sel = algorithms.select("openmpi", "allreduce", blocking=False, label="RNG")
    >>> sel.env
    {'OMPI_MCA_coll_libnbc_iallreduce_algorithm': 'ring'}

`select` takes a library name from libraries.toml (its version is then read from the installed
library), or a family plus a version (string "4.1.4" or an MPI_Get_library_version text).
`labels()` lists what a library offers; `parse_library_version()` turns an
MPI_Get_library_version string into (family, version); `check_acceptance()` tells from a real
run's output (or ompi_info / mpivars run with the env) whether the knob was accepted.
"""
from __future__ import annotations

import dataclasses
import functools
import os
import re
import subprocess
import tomllib
from pathlib import Path

TABLE = Path(__file__).resolve().parent / "algorithms.toml"
COLLECTIVES = ("allreduce", "bcast", "reduce", "allgather", "reduce_scatter_block")
OPS = ("sum", "noop")
# The label that means "the library decides"; every entry offers it.
AUTO = "AUTO"


class AlgorithmError(ValueError):
    """A request the table cannot answer: the message says what is wrong and what is valid."""


class UnknownLabelError(AlgorithmError):
    pass


class UnsupportedVersionError(AlgorithmError):
    pass


class UserOpRefusedError(AlgorithmError):
    pass


# --------------------------------------------------------------------------------------------
# The table

@dataclasses.dataclass(frozen=True)
class Entry:
    family: str
    series: tuple[str, ...]
    collective: str
    blocking: bool
    variable: str
    labels: dict
    auto: str | None = None
    with_label: dict = dataclasses.field(default_factory=dict)
    label_env: dict = dataclasses.field(default_factory=dict)
    auto_picks: str = ""
    noop_auto: str | None = None
    noop_trap: str = ""
    user_op_pof2: tuple[str, ...] = ()
    refuses_user_op: tuple[str, ...] = ()
    verified: dict = dataclasses.field(default_factory=dict)

    @property
    def call(self) -> str:
        """The MPI call this entry governs, e.g. MPI_Iallreduce."""
        name = self.collective.capitalize()
        return f"MPI_{name}" if self.blocking else f"MPI_I{self.collective}"

    def offered(self) -> list[str]:
        return [AUTO, *self.labels]

    def how_verified(self, label: str) -> str:
        return self.verified.get(label, self.verified.get("*", "not verified"))


@dataclasses.dataclass(frozen=True)
class Table:
    labels: dict            # vocabulary: label -> description
    families: dict          # family -> {series, always, acceptance}
    entries: tuple[Entry, ...]


@functools.lru_cache(maxsize=None)
def load(path: Path = TABLE) -> Table:
    with open(path, "rb") as handle:
        raw = tomllib.load(handle)
    entries = []
    for fields in raw.get("entry", []):
        fields = dict(fields)
        fields["series"] = tuple(fields["series"])
        fields["refuses_user_op"] = tuple(fields.get("refuses_user_op", ()))
        fields["user_op_pof2"] = tuple(fields.get("user_op_pof2", ()))
        entries.append(Entry(**fields))
    return Table(labels=raw["labels"], families=raw["family"], entries=tuple(entries))


# --------------------------------------------------------------------------------------------
# Versions

_VERSION_PATTERNS = (
    # "Open MPI v4.1.4, package: Debian OpenMPI, ..."
    ("openmpi", re.compile(r"Open MPI v?(\d+\.\d+(?:\.\d+)?)")),
    # "Intel(R) MPI Library 2021.18.1 for Linux* OS" (checked before MPICH: Intel is MPICH-based)
    ("impi", re.compile(r"Intel\(R\) MPI Library (\d+(?:\.\d+)*)")),
    # "MPICH Version:      5.0.2" (also "MPICH Version:\t4.0.2" from mpichversion)
    ("mpich", re.compile(r"MPICH Version:\s*(\d+\.\d+(?:\.\d+)?)")),
)


def parse_library_version(text: str) -> tuple[str, str]:
    """(family, version) from an MPI_Get_library_version string or a launcher's --version."""
    for family, pattern in _VERSION_PATTERNS:
        match = pattern.search(text)
        if match:
            return family, match.group(1)
    raise AlgorithmError(
        f"cannot tell the MPI library from {text[:120]!r}: expected 'Open MPI vX.Y.Z', "
        "'MPICH Version: X.Y.Z' or 'Intel(R) MPI Library YYYY.N'")


def series_of(family: str, version: str) -> str:
    """The table series a version belongs to: "4.1.4" -> "4.1"; Intel "2021.18.1" -> "2021"."""
    parts = version.split(".")
    if family == "impi":
        return parts[0]
    if len(parts) < 2:
        raise AlgorithmError(f"{family} version {version!r}: expected MAJOR.MINOR[.PATCH]")
    return ".".join(parts[:2])


def installed_version(library) -> tuple[str, str]:
    """(family, version) of an installed library (an mpistack.libraries.MpiLibrary), read from
    the library itself: ompi_info --version, mpichversion, Intel's mpi.h / mpiexec --version."""
    env = library.environment()
    family = library.family
    if family == "openmpi":
        ompi_info = Path(library.real_mpirun).with_name("ompi_info")
        tool = [str(ompi_info if ompi_info.exists() else "ompi_info"), "--version"]
    elif family == "mpich":
        tool = [str(Path(library.real_mpicc).with_name("mpichversion"))]
    elif family == "impi":
        return _impi_version(library, env)
    else:
        raise AlgorithmError(f"{library.name}: family {family!r} has no version reader")
    text = _run(tool, env)
    found_family, version = parse_library_version(text)
    if found_family != family:
        raise AlgorithmError(f"{library.name}: {tool[0]} reports {found_family}, "
                             f"but libraries.toml says family {family}")
    return family, version


def _impi_version(library, env) -> tuple[str, str]:
    # The installed headers state it without starting anything (mpi.h: I_MPI_VERSION);
    # `mpiexec --version` ("... Version 2021.18.1 Build ...") is the fallback.
    header = Path(library.real_mpicc).parent.parent / "include" / "mpi.h"
    if header.exists():
        match = re.search(r'#define I_MPI_VERSION "([\d.]+)"', header.read_text(errors="replace"))
        if match:
            return "impi", match.group(1)
    text = _run([str(library.real_mpirun), "--version"], env)
    match = re.search(r"Version (\d+(?:\.\d+)*)", text)
    if not match:
        raise AlgorithmError(f"{library.name}: no version in `mpiexec --version` output")
    return "impi", match.group(1)


def _run(argv: list[str], env: dict) -> str:
    try:
        done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired) as error:
        raise AlgorithmError(f"cannot run {' '.join(argv)}: {error}") from error
    return done.stdout + done.stderr


# --------------------------------------------------------------------------------------------
# Selection

@dataclasses.dataclass(frozen=True)
class Selection:
    """What to set for one run, and what it means (record `algorithm` with the results)."""
    family: str
    version: str
    collective: str
    blocking: bool
    label: str              # as asked
    op: str
    algorithm: str          # label in force: AUTO, or the label forced (NOOP trap)
    env: dict               # variables to set
    unset: tuple[str, ...]  # variables that must NOT be inherited from the caller's environment
    note: str               # what AUTO picks / why a label was substituted
    verified: str           # how this knob was checked (from the table)
    variable: str

    def apply(self, base: dict | None = None) -> dict:
        """A copy of `base` (default os.environ) with this selection applied."""
        result = dict(os.environ if base is None else base)
        for name in self.unset:
            result.pop(name, None)
        result.update(self.env)
        return result

    def record(self) -> dict:
        """Flat key/value pairs for pcbench --label and result provenance."""
        return {"algorithm": self.algorithm, "algorithm_label": self.label,
                "algorithm_env": " ".join(f"{k}={v}" for k, v in sorted(self.env.items()))}


def _resolve_target(library: str, version: str | None) -> tuple[str, str]:
    """(family, version) from a library name of libraries.toml, or a family + version."""
    table = load()
    if library in table.families and version is not None:
        if "MPI" in version or "Version" in version:
            family, version = parse_library_version(version)
            if family != library:
                raise AlgorithmError(f"version text names {family}, not {library}")
        return library, version
    from mpistack import libraries  # local: libraries is only needed for named libraries
    try:
        lib = libraries.get(library)
    except libraries.UnknownLibraryError as error:
        raise AlgorithmError(
            f"{error}; or give a family ({', '.join(table.families)}) and a version") from None
    if version is not None:
        return lib.family, version
    return installed_version(lib)


def find_entry(family: str, version: str, collective: str, blocking: bool) -> Entry:
    table = load()
    if family not in table.families:
        raise AlgorithmError(f"unknown MPI family {family!r}; the table covers "
                             f"{', '.join(table.families)}")
    if collective not in COLLECTIVES:
        raise AlgorithmError(f"unknown collective {collective!r}; use one of "
                             f"{', '.join(COLLECTIVES)}")
    covered = table.families[family]["series"]
    series = series_of(family, version)
    if series not in covered:
        raise UnsupportedVersionError(
            f"{family} {version} is not in {TABLE.name}: it covers {family} "
            f"{', '.join(s + '.x' for s in covered)}; add a series after checking the knobs")
    for entry in table.entries:
        if (entry.family, entry.collective, entry.blocking) == (family, collective, blocking) \
                and series in entry.series:
            return entry
    kind = "blocking" if blocking else "nonblocking"
    raise AlgorithmError(f"{TABLE.name} has no {kind} {collective} entry for {family} {series}")


def labels(library: str, collective: str, blocking: bool = False,
           version: str | None = None) -> list[str]:
    """Labels a library offers for a collective, AUTO first (fig1: every algorithm + AUTO)."""
    family, version = _resolve_target(library, version)
    return find_entry(family, version, collective, blocking).offered()


def select(library: str, collective: str, blocking: bool, label: str, op: str = "sum",
           version: str | None = None, nprocs: int | None = None) -> Selection:
    """The environment for (library, collective, blocking?, label, op).

    `library`: a name from libraries.toml (version read from the installed library unless
    `version` is given) or a family (openmpi, mpich, impi) with `version`. `nprocs` is only
    needed where the table says a label holds for a user op at some process counts only."""
    if op not in OPS:
        raise AlgorithmError(f"unknown op {op!r}; use one of {', '.join(OPS)}")
    family, version = _resolve_target(library, version)
    entry = find_entry(family, version, collective, blocking)
    table = load()
    label = label.upper()
    if label != AUTO and label not in entry.labels:
        raise UnknownLabelError(
            f"label {label!r} is not available for {family} {version} {entry.call}; "
            f"valid: {', '.join(entry.offered())}")
    note = f"AUTO picks: {entry.auto_picks}" if entry.auto_picks else ""
    algorithm = label
    if label == AUTO and op == "noop" and entry.noop_auto:
        # NOOP trap: a user op changes what AUTO picks, so force what AUTO uses for SUM.
        algorithm = entry.noop_auto
        note = (f"op=noop: AUTO would switch algorithm for a user op, so {algorithm} "
                f"({entry.variable}={entry.labels[algorithm]}) is forced; {note}")
    elif label == AUTO and op == "noop" and entry.noop_trap:
        raise UserOpRefusedError(f"{family} {version} {entry.call}: AUTO with --op noop would "
                                 f"not measure SUM's algorithm. {entry.noop_trap}")
    if op == "noop" and algorithm in entry.refuses_user_op:
        alternatives = [l for l in entry.offered() if l not in entry.refuses_user_op]
        raise UserOpRefusedError(
            f"{family} {version} {entry.call} algorithm {algorithm} "
            f"({entry.variable}={entry.labels[algorithm]}) refuses user-defined ops such as "
            f"--op noop; use one of {', '.join(alternatives)}")

    if op == "noop" and algorithm in entry.user_op_pof2:
        where = (f"{family} {version} {entry.call} {algorithm} "
                 f"({entry.variable}={entry.labels[algorithm]})")
        if nprocs is None:
            raise AlgorithmError(f"{where} keeps a user op only at power-of-two process counts "
                                 ">= 4: give the number of processes (nprocs / --np)")
        if nprocs < 4 or nprocs & (nprocs - 1):
            raise UserOpRefusedError(
                f"{where} silently becomes recursive doubling for a user op at {nprocs} "
                f"processes (holds only at 4, 8, 16, ...): no NOOP twin exists here; "
                f"compare SUM and NOOP with one explicit label that keeps user ops, e.g. "
                f"{', '.join(l for l in entry.labels if l not in entry.refuses_user_op and l not in entry.user_op_pof2)}")
    env = dict(table.families[family].get("always", {}))
    unset = []
    if algorithm == AUTO:
        if entry.variable:
            if entry.auto is not None:
                env[entry.variable] = entry.auto
            else:
                unset.append(entry.variable)
        unset.extend(name for name in entry.with_label if name not in env)
    else:
        env.update(entry.with_label)
        env[entry.variable] = entry.labels[algorithm]
        env.update(entry.label_env.get(algorithm, {}))
    return Selection(family=family, version=version, collective=collective, blocking=blocking,
                     label=label, op=op, algorithm=algorithm, env=env, unset=tuple(unset),
                     note=note, verified=entry.how_verified(algorithm),
                     variable=entry.variable)


# --------------------------------------------------------------------------------------------
# Was the knob accepted?

@dataclasses.dataclass(frozen=True)
class Verdict:
    status: str   # "accepted", "rejected" or "unverifiable"
    detail: str

    def __bool__(self) -> bool:  # only a positive check counts as a pass
        return self.status == "accepted"


_OMPI_INVALID = "An invalid value was supplied for an enum variable"
_MPICH_FALLBACK = re.compile(r"User set collective algorithm is not usable|cannot be applied")
_IMPI_INCORRECT = re.compile(r"Incorrect (?:algorithm|adjust value): ?([A-Z_]+)=(\S+)")


def check_output(selection: Selection, output: str, returncode: int = 0) -> Verdict:
    """Judge a finished run's stdout+stderr for signs that the knob was refused.

    Open MPI prints an invalid-enum warning; MPICH with FALLBACK=error aborts (print: a
    "cannot be applied" message); Intel MPI (run with I_MPI_DEBUG>=6) prints "Incorrect
    algorithm". Silence is not proof of use: see `check_parsed` for a positive check."""
    if selection.family == "openmpi":
        if _OMPI_INVALID in output:
            return Verdict("rejected", "Open MPI warned: " + _OMPI_INVALID)
        return Verdict("unverifiable", "no Open MPI warning; use check_parsed (ompi_info)")
    if selection.family == "mpich":
        applied = len(re.findall(r"cannot be applied", output))
        if selection.env.get("MPIR_CVAR_COLLECTIVE_FALLBACK") == "print":
            # Only labels whose algorithm MPI_Init's own 1-element call cannot use get "print";
            # that call reports once, so a second report is a fallback in the measured calls.
            if applied > 1:
                return Verdict("rejected", f"MPICH fell back {applied - 1} time(s) after MPI_Init")
            if returncode == 0:
                return Verdict("unverifiable", "FALLBACK=print: no fallback after MPI_Init's "
                               "expected one; parsed value: use check_parsed (mpivars)")
        elif _MPICH_FALLBACK.search(output):
            return Verdict("rejected", "MPICH reported the algorithm unusable: "
                           + _MPICH_FALLBACK.search(output).group(0))
        if "Fatal error in internal_Init" in output:
            return Verdict("rejected", "MPICH aborted in MPI_Init (unknown CVAR value?)")
        if returncode != 0:
            return Verdict("unverifiable", f"run failed (exit {returncode}) without a fallback message")
        return Verdict("unverifiable", "no fallback reported; use check_parsed (mpivars)")
    if selection.family == "impi":
        match = _IMPI_INCORRECT.search(output)
        if match:
            return Verdict("rejected", f"Intel MPI ignored {match.group(1)}={match.group(2)}")
        if selection.variable not in selection.env:
            return Verdict("unverifiable", "AUTO: nothing forced, the library's own choice")
        if f"{selection.variable}=" not in output:
            return Verdict("unverifiable", "no I_MPI_DEBUG>=6 startup echo in the output")
        return Verdict("unverifiable", "Intel MPI echoed the knob without complaint; which "
                       "algorithm ran is not observable (range checked by the table)")
    return Verdict("unverifiable", f"no mechanism for family {selection.family}")


def check_parsed(library, selection: Selection) -> Verdict:
    """Positive check without an MPI job: ask the library's own tool, run with the selection's
    environment, how it parsed the knob. Open MPI: ompi_info; MPICH: mpivars; Intel: none
    (a 1-rank I_MPI_DEBUG=6 run echoes but does not confirm: see check_output)."""
    env = selection.apply(library.environment())
    if selection.family == "openmpi":
        return _check_ompi_info(library, selection, env)
    if selection.family == "mpich":
        return _check_mpivars(library, selection, env)
    return Verdict("unverifiable", f"{selection.family}: the library has no tool that reports "
                   "a parsed algorithm; run with I_MPI_DEBUG=6 and use check_output")


def _check_ompi_info(library, selection: Selection, env: dict) -> Verdict:
    expected = dict(selection.env)
    if not expected and not selection.unset:
        return Verdict("accepted", "nothing to set (the library has no knob for this call)")
    ompi_info = Path(library.real_mpirun).with_name("ompi_info")
    values = {}
    # OMPI_MCA_coll_<component>_<param>: ask only the components the selection touches.
    components = sorted({name.split("_")[3] for name in [*expected, *selection.unset]})
    for component in components:
        out = _run([str(ompi_info), "--param", "coll", component, "--level", "9",
                    "--parsable"], env)
        if _OMPI_INVALID in out:
            return Verdict("rejected", "ompi_info: " + _OMPI_INVALID)
        for line in out.splitlines():
            match = re.match(r"mca:coll:\w+:param:(\w+):value:(.*)$", line)
            if match:
                values["OMPI_MCA_" + match.group(1)] = match.group(2)
    bools = {"1": "true", "0": "false"}
    for name, value in expected.items():
        if name not in values:
            return Verdict("rejected", f"ompi_info does not know {name}")
        if values[name] not in (value, bools.get(value)):
            return Verdict("rejected", f"{name}: ompi_info parsed {values[name]!r}, wanted {value!r}")
    return Verdict("accepted", "ompi_info parsed " + ", ".join(
        f"{k}={values[k]}" for k in sorted(expected)))


def _check_mpivars(library, selection: Selection, env: dict) -> Verdict:
    mpivars = Path(library.real_mpicc).with_name("mpivars")
    try:
        done = subprocess.run([str(mpivars)], env=env, capture_output=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired) as error:
        return Verdict("unverifiable", f"cannot run {mpivars}: {error}")
    out = (done.stdout + done.stderr).decode(errors="replace")
    if done.returncode != 0:
        first = out.strip().splitlines()[0] if out.strip() else ""
        return Verdict("rejected", f"mpivars failed with the env (exit {done.returncode}): {first}")
    unchecked = []
    for name, value in selection.env.items():
        index, choices = _mpivars_enum(out, name)
        if index is None:
            return Verdict("rejected", f"mpivars does not list {name}")
        if choices:
            if value not in choices or choices.index(value) != index:
                return Verdict("rejected", f"{name}={value}: mpivars parsed index {index} "
                               f"({choices[index] if index < len(choices) else '?'})")
        elif value.lstrip("-").isdigit():
            if str(index) != value:
                return Verdict("rejected", f"{name}: mpivars parsed {index}, wanted {value}")
        else:
            # MPICH 4.0's mpivars glues the enum list into one line; an unknown name would have
            # aborted mpivars' MPI_Init above, so the name is known but its index unchecked.
            unchecked.append(f"{name}={value} (index {index})")
    detail = "mpivars parsed " + ", ".join(f"{k}={v}" for k, v in sorted(selection.env.items()))
    if unchecked:
        detail += "; known names, enum index not listed by this mpivars: " + ", ".join(unchecked)
    return Verdict("accepted", detail)


def _mpivars_enum(out: str, name: str) -> tuple[int | None, list[str]]:
    """(parsed integer value, enum choices in order) of one CVAR in mpivars output."""
    match = re.search(rf"^\s*{name}\s*=(-?\d+)\t[^\n]*\n((?:[^\t\n][^\n]*\n)*)", out, re.M)
    if not match:
        return None, []
    choices = []
    for line in match.group(2).splitlines():
        word = re.match(r"(\S+)\s+-\s", line)
        if word:
            choices.append(word.group(1))
    return int(match.group(1)), choices
