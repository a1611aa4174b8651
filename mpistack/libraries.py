"""How to reach each MPI library on a machine prepared by `make setup`.

Reads libraries.toml (beside this file). Every consumer (set-up, tests, ReFrame site
configs, Spack externals) goes through `load()` / `get()` so no launch recipe is written twice.
"""
from __future__ import annotations

import dataclasses
import os
import tomllib
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
TABLE = Path(__file__).resolve().parent / "libraries.toml"


class UnknownLibraryError(KeyError):
    """A library name that libraries.toml does not list."""

    def __str__(self) -> str:  # KeyError would print the repr with quotes
        return self.args[0]


def build_root() -> Path:
    """Where the set-up puts venvs, MPI shims and pipecoll builds (override: PCREPRO_BUILD)."""
    return Path(os.environ.get("PCREPRO_BUILD", REPO_ROOT / "build")).resolve()


@dataclasses.dataclass(frozen=True)
class MpiLibrary:
    name: str
    display: str
    family: str
    provider: str
    mpicc: str
    mpirun: str
    mpirun_args: tuple[str, ...] = ()
    env: dict = dataclasses.field(default_factory=dict)
    apt: tuple[str, ...] = ()
    pip: tuple[str, ...] = ()

    # -- where things live -------------------------------------------------------------
    @property
    def prefix(self) -> Path:
        """Shim prefix: prefix/bin/mpicc and prefix/bin/mpirun exec the real wrappers."""
        return build_root() / "mpi" / self.name

    @property
    def venv(self) -> Path | None:
        return self.prefix / "venv" if self.provider == "pypi" else None

    @property
    def pipecoll_build(self) -> Path:
        """CMake build directory of pipecoll against this library."""
        return build_root() / "pipecoll" / self.name

    def _resolve(self, tool: str) -> Path:
        path = Path(tool)
        if path.is_absolute():
            return path
        if self.venv is None:
            raise ValueError(f"{self.name}: relative tool path {tool!r} needs provider 'pypi'")
        return self.venv / "bin" / tool

    @property
    def real_mpicc(self) -> Path:
        return self._resolve(self.mpicc)

    @property
    def real_mpirun(self) -> Path:
        return self._resolve(self.mpirun)

    @property
    def shim_mpicc(self) -> Path:
        return self.prefix / "bin" / "mpicc"

    @property
    def shim_mpirun(self) -> Path:
        return self.prefix / "bin" / "mpirun"

    # -- using it ----------------------------------------------------------------------
    def environment(self, base: dict | None = None) -> dict[str, str]:
        """`base` (default os.environ) plus what this library needs to compile and run."""
        result = dict(os.environ if base is None else base)
        values = {"venv": str(self.venv or ""), "PATH": result.get("PATH", "")}
        for key, template in self.env.items():
            result[key] = template.format(**values)
        return result

    def env_overrides(self) -> dict[str, str]:
        """Only the variables this library sets ({PATH} kept as a literal $PATH)."""
        values = {"venv": str(self.venv or ""), "PATH": "$PATH"}
        return {key: template.format(**values) for key, template in self.env.items()}

    def launch_command(self, nprocs: int, argv: list[str]) -> list[str]:
        """Command that runs `argv` on `nprocs` local ranks through the shim launcher."""
        return [str(self.shim_mpirun), "-np", str(nprocs), *map(str, argv)]

    def is_installed(self) -> bool:
        return self.real_mpicc.exists() and self.real_mpirun.exists()


def load(table: Path = TABLE) -> dict[str, MpiLibrary]:
    with open(table, "rb") as handle:
        raw = tomllib.load(handle)
    libraries = {}
    for name, fields in raw.items():
        fields = dict(fields)
        for key in ("mpirun_args", "apt", "pip"):
            fields[key] = tuple(fields.get(key, ()))
        libraries[name] = MpiLibrary(name=name, **fields)
    return libraries


def get(name: str) -> MpiLibrary:
    libraries = load()
    if name not in libraries:
        raise UnknownLibraryError(
            f"unknown MPI library {name!r}; known: {', '.join(sorted(libraries))} "
            f"(defined in {TABLE.relative_to(REPO_ROOT)})"
        )
    return libraries[name]


def selected(names: str | None = None) -> list[MpiLibrary]:
    """Libraries named in a comma list (default: PCREPRO_MPIS, else all of them)."""
    names = names if names is not None else os.environ.get("PCREPRO_MPIS", "")
    if not names.strip():
        return list(load().values())
    return [get(name.strip()) for name in names.split(",") if name.strip()]
