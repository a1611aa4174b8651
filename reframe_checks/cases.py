"""The run configuration and the benchmark cases it asks for.

One place that turns (run configuration, figure catalogue, algorithm table) into the list of
pcbench runs: the ReFrame checks parametrise over it and the Snakemake workflow uses it to
know the groups (figures) and what each one must have produced.

  run configuration  config/config.yaml (or the file named by PCREPRO_CONFIG), checked
                     against workflow/schemas/config.schema.yaml
  figure catalogue   config/figures.yaml (experiment: collective, libraries, algorithms,
                     variants, ops, scale)
  algorithm table    mpistack.algorithms (labels per library/collective; "all" expands there)

A case is one (figure, library, algorithm, op, nprocs) with all the figure's variants in one
pcbench invocation.
"""
from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import re
import sys
from pathlib import Path

import jsonschema
import yaml

REPO_ROOT = Path(__file__).resolve().parent.parent
if str(REPO_ROOT) not in sys.path:  # ReFrame and Snakemake load this file by path
    sys.path.append(str(REPO_ROOT))

from mpistack import libraries  # noqa: E402

DEFAULT_CONFIG = REPO_ROOT / "config" / "config.yaml"
SCHEMA = REPO_ROOT / "workflow" / "schemas" / "config.schema.yaml"
CATALOGUE = REPO_ROOT / "config" / "figures.yaml"
ENV_CONFIG = "PCREPRO_CONFIG"
_SUFFIX = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30}


class ConfigError(Exception):
    """A bad run configuration: the message names the key and the file."""


# -- sizes -------------------------------------------------------------------------------
def parse_size(value: int | str) -> int:
    """1M -> 1048576 (K/M/G are powers of 1024, as pcbench and config/figures.yaml)."""
    if isinstance(value, int):
        return value
    match = re.fullmatch(r"([0-9]+)([KMG]?)", str(value).strip())
    if not match:
        raise ValueError(f"bad size {value!r}: expected an integer with optional K/M/G suffix")
    return int(match.group(1)) * _SUFFIX[match.group(2)]


# -- loading and checking the run configuration ----------------------------------------------
def _key_path(error: jsonschema.ValidationError) -> str:
    path = ""
    for part in error.absolute_path:
        path += f"[{part}]" if isinstance(part, int) else (f".{part}" if path else str(part))
    return path or "(top level)"


def _schema_message(error: jsonschema.ValidationError) -> str:
    if error.validator == "additionalProperties":
        return error.message + " (check the spelling; allowed keys are in the schema)"
    if error.validator == "oneOf" and _key_path(error).startswith("sizes"):
        return f"{error.instance!r} is not a size: use bytes or a K/M/G suffix, e.g. 1M"
    description = error.schema.get("description")
    return error.message + (f" ({description})" if description else "")


def check_config(config: dict, source: str = "the configuration") -> None:
    """Raise ConfigError listing every problem, each naming its key, or return quietly."""
    schema = yaml.safe_load(SCHEMA.read_text(encoding="utf-8"))
    validator = jsonschema.Draft202012Validator(schema)
    problems = [f"config key '{_key_path(e)}': {_schema_message(e)}"
                for e in sorted(validator.iter_errors(config), key=lambda e: list(e.absolute_path))]
    if not problems:
        problems = _semantic_problems(config)
    if problems:
        raise ConfigError(f"invalid run configuration ({source}):\n  " + "\n  ".join(problems)
                          + f"\n(schema: {SCHEMA.relative_to(REPO_ROOT)})")


def _semantic_problems(config: dict) -> list[str]:
    problems = []
    low, high = parse_size(config["sizes"]["min_bytes"]), parse_size(config["sizes"]["max_bytes"])
    for key, value in (("min_bytes", low), ("max_bytes", high)):
        if value & (value - 1):
            problems.append(f"config key 'sizes.{key}': {value} is not a power of two "
                            "(the figures' x axis is log2 of the message size)")
    if low > high:
        problems.append(f"config key 'sizes.min_bytes': {low} is larger than sizes.max_bytes ({high})")
    catalogue = load_catalogue()
    known_libraries = set(libraries.load())
    for index, name in enumerate(config["libraries"]):
        if name not in known_libraries:
            problems.append(f"config key 'libraries[{index}]': unknown MPI library {name!r}; "
                            f"known: {', '.join(sorted(known_libraries))}")
    for index, figure in enumerate(config["figures"]):
        entry = catalogue.get(figure)
        if entry is None:
            problems.append(f"config key 'figures[{index}]': {figure!r} is not in "
                            f"config/figures.yaml (known: {', '.join(catalogue)})")
        elif "experiment" in entry:
            wanted = entry["experiment"]["libraries"]
            if not set(wanted) & set(config["libraries"]):
                problems.append(f"config key 'figures[{index}]': {figure} measures "
                                f"{', '.join(wanted)}, none of which is in config key 'libraries'")
    site = REPO_ROOT / config["site"]["config"]
    if not site.is_file():
        problems.append(f"config key 'site.config': {config['site']['config']} does not exist "
                        "(ReFrame site configs are in site_configs/)")
    return problems


def load_config(path: str | os.PathLike | None = None) -> dict:
    """The run configuration at `path` (default: PCREPRO_CONFIG, else config/config.yaml)."""
    path = Path(path or os.environ.get(ENV_CONFIG) or DEFAULT_CONFIG)
    if not path.is_file():
        raise ConfigError(f"run configuration {path} does not exist"
                          + (f" (named by {ENV_CONFIG})" if os.environ.get(ENV_CONFIG) else ""))
    try:
        config = yaml.safe_load(path.read_text(encoding="utf-8"))
    except yaml.YAMLError as error:
        raise ConfigError(f"run configuration {path} is not valid YAML: {error}") from None
    if not isinstance(config, dict):
        raise ConfigError(f"run configuration {path} must be a mapping of keys to values")
    check_config(config, str(path))
    return config


def config_hash(config: dict) -> str:
    """Stable short hash of everything that defines the measurements (not the run id)."""
    relevant = {key: value for key, value in config.items() if key not in ("run_id", "results_dir")}
    return hashlib.sha256(json.dumps(relevant, sort_keys=True).encode()).hexdigest()[:10]


def load_catalogue(path: Path = CATALOGUE) -> dict:
    return yaml.safe_load(path.read_text(encoding="utf-8"))


# -- cases ---------------------------------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class Case:
    figure: str
    library: str
    collective: str
    algorithm: str
    op: str
    nprocs: int
    variants: tuple[str, ...]

    @property
    def id(self) -> str:
        """Unique within a run; also the file name of its rows (<id>.jsonl)."""
        return f"{self.figure}_{self.library}_{self.algorithm}_{self.op}_p{self.nprocs}"


def measured_figures(config: dict, catalogue: dict | None = None) -> list[str]:
    """Figures whose experiments run: those asked for, plus what asked-for tables derive from."""
    catalogue = catalogue or load_catalogue()
    wanted: list[str] = []
    for figure in config["figures"]:
        entry = catalogue[figure]
        for name in ([figure] if "experiment" in entry else entry.get("derived_from", [])):
            if name not in wanted:
                wanted.append(name)
    return wanted


def _algorithm_labels(figure: str, library: str, collective: str, spec) -> list[str]:
    from mpistack import algorithms  # the algorithm table (mpistack/algorithms.toml)
    if spec != "all":
        return list(spec)
    try:  # what the library offers depends on its version, read from the installed library
        labels = list(algorithms.labels(library, collective))
    except algorithms.AlgorithmError as error:
        raise ConfigError(f"cannot list the {collective} algorithms of {library} for {figure}: "
                          f"{error}\n(set the library up with `make setup`, or remove it "
                          "from config key 'libraries')") from None
    return labels if "AUTO" in labels else ["AUTO", *labels]


def cases(config: dict, figures: list[str] | None = None, catalogue: dict | None = None) -> list[Case]:
    """Every pcbench run the configuration asks for (optionally only for `figures`)."""
    catalogue = catalogue or load_catalogue()
    result = []
    for figure in figures or measured_figures(config, catalogue):
        experiment = catalogue[figure]["experiment"]
        for library in experiment["libraries"]:
            if library not in config["libraries"]:
                continue
            labels = _algorithm_labels(figure, library, experiment["collective"],
                                       experiment["algorithms"][library])
            for algorithm in labels:
                for op in experiment["ops"]:
                    for nprocs in config["nprocs"][experiment["scale"]]:
                        result.append(Case(figure, library, experiment["collective"], algorithm,
                                           op, int(nprocs), tuple(experiment["variants"])))
    return result
