"""ReFrame 4 performance logs (filelog handler) -> a long table, one row per performance
variable of each logged test run.

The perflog is delimiter-separated with a header line naming the columns (ReFrame writes it
when it creates the file; site_configs/mpienv.py sets the format). Performance variables
appear as column pairs NAME_value / NAME_unit. Test parameters in the display name
("PcbenchSweep %case=fig3_openmpi_AUTO_sum_p2") become columns (case=...). Output columns:
the header's other columns (names made identifier-like), the parameters, perf_var, value,
unit and source (file:line). The per-size curves are in the pcbench rows (the tidy command);
the perflog carries what ReFrame checked, per test.
"""
from __future__ import annotations

import re
from pathlib import Path

import pandas as pd

from .common import AnalysisError


def _column(name: str) -> str:
    return re.sub(r"[^0-9A-Za-z]+", "_", name.strip()).strip("_").lower()


def _looks_like_perflog(path: Path, sep: str) -> bool:
    with open(path, encoding="utf-8", errors="replace") as handle:
        first = handle.readline()
    return sep in first and "_value" in first


def expand(inputs, sep: str = "|") -> list[Path]:
    """Files as given; in directories, the *.log files whose header names perf values
    (ReFrame's own reframe.log lives beside the perflogs and is skipped)."""
    files = []
    for item in inputs:
        path = Path(item)
        if path.is_dir():
            files += [f for f in sorted(path.rglob("*.log")) if _looks_like_perflog(f, sep)]
        elif path.is_file():
            files.append(path)
        else:
            raise AnalysisError(f"perflog {path} does not exist")
    if not files:
        raise AnalysisError("no perflog files found in " + ", ".join(map(str, inputs)))
    return files


def read(inputs, sep: str = "|") -> pd.DataFrame:
    records = []
    for path in expand(inputs, sep):
        header = None
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if not line.strip():
                continue
            fields = line.split(sep)
            # A header: the first line, or a line naming the same first column again.
            if header is None or fields[0] == header[0]:
                header = fields
                continue
            if len(fields) != len(header):
                raise AnalysisError(f"{path}:{number}: {len(fields)} fields, the header has "
                                    f"{len(header)} (is the delimiter {sep!r} right?)")
            row = dict(zip(header, fields))
            fixed = {_column(k): v for k, v in row.items()
                     if not (k.endswith("_value") or k.endswith("_unit"))}
            for key, value in re.findall(r"%(\w+)=(\S+)", row.get("display_name", "")):
                fixed[key] = value
            perfvars = [k[:-len("_value")] for k in header if k.endswith("_value")]
            if not perfvars:
                raise AnalysisError(f"{path}:{number}: no NAME_value columns in the header; "
                                    "not a perflog with performance variables")
            for name in perfvars:
                raw = row[f"{name}_value"]
                if raw in ("None", ""):   # ReFrame logs None when the test failed early
                    raw = "nan"
                try:
                    value = float(raw)
                except ValueError:
                    raise AnalysisError(f"{path}:{number}: {name}_value {raw!r} is not a "
                                        "number") from None
                records.append({**fixed, "perf_var": name, "value": value,
                                "unit": row.get(f"{name}_unit", ""),
                                "source": f"{path}:{number}"})
    return pd.DataFrame.from_records(records)
