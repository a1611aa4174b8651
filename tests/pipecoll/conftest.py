"""Helpers shared by the pipecoll tests: launching a program on N ranks of one MPI library
with a hard timeout (a hang must fail the test, never stall the suite)."""
from __future__ import annotations

import dataclasses
import os
import signal
import subprocess
from pathlib import Path

import pytest

from mpistack import libraries


@dataclasses.dataclass
class MpiRun:
    command: list[str]
    returncode: int
    stdout: str
    stderr: str

    def __repr__(self) -> str:  # what pytest shows when an assertion on a run fails
        return (f"{' '.join(self.command)}\nexit code {self.returncode}\n"
                f"--- stdout ---\n{self.stdout[-6000:]}\n--- stderr ---\n{self.stderr[-6000:]}")


def built(lib: libraries.MpiLibrary, relative: str) -> Path:
    """A file of the pipecoll build against `lib`; skips the test if it was not built."""
    path = lib.pipecoll_build / relative
    if not path.exists():
        pytest.skip(f"{path} not built against {lib.display}: run "
                    f"`python3 tools/bootstrap.py --steps pipecoll`")
    return path


def mpi_run(lib: libraries.MpiLibrary, nprocs: int, argv: list, *, timeout: float,
            env_extra: dict | None = None) -> MpiRun:
    """Runs argv on nprocs ranks through the library's launcher, in its own session so that
    on timeout the launcher and all ranks are killed; a timeout fails the test."""
    env = lib.environment()
    env.update(env_extra or {})
    command = lib.launch_command(nprocs, [str(a) for a in argv])
    proc = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, start_new_session=True)
    try:
        stdout, stderr = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            stdout, stderr = proc.communicate(timeout=10)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            stdout, stderr = proc.communicate()
        pytest.fail(f"timed out after {timeout} s:\n"
                    f"{MpiRun(command, -1, stdout or '', stderr or '')}")
    finally:
        try:
            os.killpg(proc.pid, signal.SIGKILL)  # stray ranks, if the launcher left any
        except (ProcessLookupError, PermissionError):
            pass
    return MpiRun(command, proc.returncode, stdout, stderr)


@pytest.fixture
def mpirun():
    """mpirun(lib, nprocs, argv, timeout=..., env_extra=...) -> MpiRun (see mpi_run)."""
    return mpi_run


@pytest.fixture
def pipecoll_file():
    """pipecoll_file(lib, "tests/test_collectives") -> Path, or skip if not built."""
    return built
