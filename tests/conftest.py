"""Shared test helpers: the MPI libraries this machine has (from mpistack/libraries.toml)."""
from __future__ import annotations

import pytest

from mpistack import libraries


def installed_libraries() -> list[libraries.MpiLibrary]:
    """Libraries selected (PCREPRO_MPIS, default all) whose shims `make setup` wrote."""
    return [lib for lib in libraries.selected() if lib.shim_mpirun.exists()]


def pytest_generate_tests(metafunc):
    # Any test taking `mpi_library` runs once per installed library; a library that is
    # selected but not set up is reported as a skip with the reason, not silently dropped.
    if "mpi_library" in metafunc.fixturenames:
        params = []
        for lib in libraries.selected():
            marks = [] if lib.shim_mpirun.exists() else [pytest.mark.skip(
                reason=f"{lib.display} not set up: run `make setup` (no {lib.shim_mpirun})")]
            params.append(pytest.param(lib, id=lib.name, marks=marks))
        metafunc.parametrize("mpi_library", params)
