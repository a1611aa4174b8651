"""Shared pieces of the analysis: user-facing errors, atomic writes, sizes, the catalogue."""
from __future__ import annotations

import contextlib
import os
import re
import tempfile
from pathlib import Path

import yaml

REPO_ROOT = Path(__file__).resolve().parent.parent
CATALOGUE = REPO_ROOT / "config" / "figures.yaml"
PAPER_REFERENCE = Path(__file__).resolve().parent / "paper_reference.yaml"


class AnalysisError(Exception):
    """A problem with the user's input (file, option, data): printed without a traceback."""


# -- atomic output ---------------------------------------------------------------------------
@contextlib.contextmanager
def atomic_path(target: str | os.PathLike):
    """Yield a temporary path beside `target`; rename it onto `target` only on success.

    A reader (or Snakemake) never sees a half-written result: either the old file or the
    complete new one.
    """
    target = Path(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    handle, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp" + target.suffix,
                                   dir=target.parent)
    os.close(handle)
    try:
        yield Path(tmp)
        os.chmod(tmp, 0o644)
        os.replace(tmp, target)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def write_text_atomic(target: str | os.PathLike, text: str) -> None:
    with atomic_path(target) as tmp:
        tmp.write_text(text, encoding="utf-8")


# -- sizes -----------------------------------------------------------------------------------
_UNITS = [(1 << 30, "GB"), (1 << 20, "MB"), (1 << 10, "KB")]
_SUFFIX = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30}


def size_label(nbytes: int) -> str:
    """Paper-style size label with powers of 1024: 1048576 -> '1MB', 1536 -> '1.5KB'."""
    nbytes = int(nbytes)
    for unit, name in _UNITS:
        if nbytes >= unit:
            value = nbytes / unit
            return f"{value:g}{name}"
    return f"{nbytes}B"


def parse_size(text: str | int) -> int:
    """'32M' -> 33554432 (K/M/G are powers of 1024, as in config/figures.yaml)."""
    if isinstance(text, int):
        return text
    match = re.fullmatch(r"\s*(\d+)\s*([KMG]?)B?\s*", str(text), flags=re.IGNORECASE)
    if not match:
        raise AnalysisError(f"bad size {text!r}: expected an integer with optional K/M/G suffix")
    return int(match.group(1)) * _SUFFIX[match.group(2).upper()]


# -- the figure catalogue --------------------------------------------------------------------
def load_yaml(path: str | os.PathLike, what: str) -> dict:
    path = Path(path)
    if not path.is_file():
        raise AnalysisError(f"{what} {path} does not exist")
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except yaml.YAMLError as exc:
        raise AnalysisError(f"{what} {path} is not valid YAML: {exc}") from None
    if not isinstance(data, dict):
        raise AnalysisError(f"{what} {path}: expected a mapping at the top level")
    return data


def load_catalogue(path: str | os.PathLike = CATALOGUE) -> dict:
    """The figure catalogue, checked for the fields analysis uses."""
    catalogue = load_yaml(path, "figure catalogue")
    for fig_id, entry in catalogue.items():
        where = f"{path}: {fig_id}"
        if not isinstance(entry, dict) or "plot" not in entry:
            raise AnalysisError(f"{where}: missing 'plot'")
        plot = entry["plot"]
        if not isinstance(plot.get("panels"), list) or not isinstance(plot.get("series"), str):
            raise AnalysisError(f"{where}.plot: needs 'panels' (a list) and 'series' (a string)")
        if "experiment" not in entry and "derived_from" not in entry:
            raise AnalysisError(f"{where}: needs 'experiment' or 'derived_from'")
    return catalogue
