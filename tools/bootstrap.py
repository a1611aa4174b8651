#!/usr/bin/env python3
"""Set up everything the project needs on a fresh Debian 12 machine, idempotently.

Steps (each skipped when already done):
  apt       system packages: compilers, CMake, gdb, Slurm (+ slurmdbd, MariaDB) for the
            local cluster, and the Debian-provided MPI libraries
  venv      build/venv: the Python tools (ReFrame, Snakemake, pandas, ...) pinned by
            requirements.txt + requirements.lock, this project installed editable, and
            mpi4py built against Open MPI
  mpi       PyPI-provided MPI libraries in their own venvs, and for every library a shim
            prefix build/mpi/<name>/bin/{mpicc,mpirun} (see mpistack/libraries.toml)
  pipecoll  pipecoll built with CMake against every library: build/pipecoll/<name>

Usage: tools/bootstrap.py [--mpis openmpi,mpich,impi] [--steps apt,venv,mpi,pipecoll]
Standard library only: it runs before any venv exists.
"""
from __future__ import annotations

import argparse
import hashlib
import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO_ROOT))
from mpistack import libraries  # noqa: E402  (needs the path above)
# The local Slurm cluster's packages are defined once, beside the script that runs it.
from slurm_cluster import ACCOUNTING_PACKAGES, DEBIAN_PACKAGES as SLURM_PACKAGES  # noqa: E402

# gdb: the Intel MPI tests prove which algorithm ran with breakpoints on its internal symbols.
BASE_APT = ["build-essential", "cmake", "pkg-config", "python3-venv", "git", "procps", "gdb"]
STEPS = ("apt", "venv", "mpi", "pipecoll")


class SetupError(RuntimeError):
    pass


def say(message: str) -> None:
    print(f"[setup] {message}", flush=True)


def run(cmd: list[str], env: dict | None = None, cwd: Path | None = None, quiet=False) -> None:
    if not quiet:
        say("$ " + shlex.join(map(str, cmd)))
    result = subprocess.run(list(map(str, cmd)), env=env, cwd=cwd)
    if result.returncode != 0:
        raise SetupError(f"command failed with exit code {result.returncode}: {shlex.join(map(str, cmd))}")


# -- apt ---------------------------------------------------------------------------------
def missing_debian_packages(names: list[str]) -> list[str]:
    missing = []
    for name in names:
        probe = subprocess.run(["dpkg-query", "-W", "-f=${Status}", name],
                               capture_output=True, text=True)
        if "install ok installed" not in probe.stdout:
            missing.append(name)
    return missing


def step_apt(selected: list[libraries.MpiLibrary]) -> None:
    wanted = (BASE_APT + SLURM_PACKAGES + ACCOUNTING_PACKAGES
              + [pkg for lib in selected for pkg in lib.apt])
    if shutil.which("dpkg-query") is None:
        say("not a Debian system: install by hand: " + " ".join(wanted))
        return
    missing = missing_debian_packages(wanted)
    if not missing:
        say("apt: all system packages present")
        return
    prefix = [] if os.geteuid() == 0 else ["sudo", "-n"]
    if prefix and shutil.which("sudo") is None:
        raise SetupError("missing Debian packages and not root: run as root, or "
                         "`apt-get install " + " ".join(missing) + "`")
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    run(prefix + ["apt-get", "update", "-qq"], env=env)
    run(prefix + ["apt-get", "install", "-y", "-qq", "--no-install-recommends", *missing], env=env)


# -- Python tools venv -------------------------------------------------------------------
def fingerprint(*paths: Path) -> str:
    digest = hashlib.sha256()
    for path in paths:
        digest.update(path.read_bytes() if path.exists() else b"-")
    return digest.hexdigest()


def make_venv(path: Path) -> Path:
    python = path / "bin" / "python"
    if not python.exists():
        run([sys.executable, "-m", "venv", path])
        run([python, "-m", "pip", "install", "-q", "--upgrade", "pip==24.3.1"])
    return python


def step_venv(selected: list[libraries.MpiLibrary]) -> None:
    venv = libraries.build_root() / "venv"
    inputs = [REPO_ROOT / "requirements.txt", REPO_ROOT / "requirements.lock", REPO_ROOT / "pyproject.toml"]
    stamp = venv / ".pcrepro-stamp"
    want = fingerprint(*inputs)
    if stamp.exists() and stamp.read_text() == want:
        say(f"venv: {venv} up to date")
        return
    python = make_venv(venv)
    constraints = ["-c", REPO_ROOT / "requirements.lock"] if inputs[1].exists() else []
    run([python, "-m", "pip", "install", "-q", "-r", REPO_ROOT / "requirements.txt", *constraints])
    run([python, "-m", "pip", "install", "-q", "--no-deps", "-e", REPO_ROOT])
    # mpi4py from source against Open MPI, so the interposer tests exercise a real
    # unmodified MPI program written in Python (the PyPI wheel would pick its own MPI).
    openmpi = libraries.get("openmpi")
    if openmpi.is_installed():
        env = openmpi.environment()
        env["MPICC"] = str(openmpi.real_mpicc)
        run([python, "-m", "pip", "install", "-q", "--no-binary", "mpi4py", "--no-cache-dir",
             "mpi4py==4.1.2", *constraints], env=env)
    stamp.write_text(want)


# -- MPI libraries and their shims -------------------------------------------------------
SHIM = """#!/bin/sh
# Generated by tools/bootstrap.py from mpistack/libraries.toml ({name}); do not edit.
{exports}exec {real} {args}"$@"
"""


def write_shims(lib: libraries.MpiLibrary) -> None:
    bindir = lib.prefix / "bin"
    bindir.mkdir(parents=True, exist_ok=True)
    exports = "".join(
        f"export {key}=\"{value.replace('$PATH', '${PATH}')}\"\n"
        for key, value in lib.env_overrides().items())
    launch_args = "".join(shlex.quote(a) + " " for a in lib.mpirun_args)
    shims = {"mpicc": (lib.real_mpicc, ""), "mpirun": (lib.real_mpirun, launch_args),
             "mpiexec": (lib.real_mpirun, launch_args)}
    for tool, (real, args) in shims.items():
        path = bindir / tool
        text = SHIM.format(name=lib.name, exports=exports, real=shlex.quote(str(real)), args=args)
        if not path.exists() or path.read_text() != text:
            path.write_text(text)
            path.chmod(0o755)


def step_mpi(selected: list[libraries.MpiLibrary]) -> None:
    for lib in selected:
        if lib.provider == "pypi":
            stamp = lib.venv / ".pcrepro-stamp"
            want = "\n".join(lib.pip)
            if not (stamp.exists() and stamp.read_text() == want):
                python = make_venv(lib.venv)
                run([python, "-m", "pip", "install", "-q", *lib.pip])
                stamp.write_text(want)
        if not lib.is_installed():
            raise SetupError(f"{lib.display}: {lib.real_mpicc} or {lib.real_mpirun} missing after "
                             f"installation; check mpistack/libraries.toml [{lib.name}]")
        write_shims(lib)
        say(f"mpi: {lib.display} reachable through {lib.prefix / 'bin'}")


# -- pipecoll against every library -----------------------------------------------------
def step_pipecoll(selected: list[libraries.MpiLibrary]) -> None:
    source = REPO_ROOT / "pipecoll"
    for lib in selected:
        build = lib.pipecoll_build
        env = lib.environment()
        # Configure unless a previous configure completed (a cache alone may be left by
        # an interrupted one).
        if not (build / "Makefile").exists():
            run(["cmake", "-S", source, "-B", build, "-DCMAKE_BUILD_TYPE=Release",
                 f"-DMPI_C_COMPILER={lib.shim_mpicc}", "-DPIPECOLL_BUILD_TESTS=ON"], env=env)
        run(["cmake", "--build", build, "--parallel", "2"], env=env)
        say(f"pipecoll: built against {lib.display} in {build}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--mpis", default=None,
                        help="comma list of MPI libraries (default: PCREPRO_MPIS or all in "
                             "mpistack/libraries.toml)")
    parser.add_argument("--steps", default=",".join(STEPS),
                        help=f"comma list of steps among {', '.join(STEPS)} (default: all)")
    args = parser.parse_args(argv)
    steps = [s.strip() for s in args.steps.split(",") if s.strip()]
    unknown = [s for s in steps if s not in STEPS]
    if unknown:
        parser.error(f"unknown step(s) {', '.join(unknown)}; choose among {', '.join(STEPS)}")
    try:
        selected = libraries.selected(args.mpis)
        for step in STEPS:
            if step in steps:
                globals()[f"step_{step}"](selected)
    except (SetupError, libraries.UnknownLibraryError) as error:
        print(f"setup failed: {error}", file=sys.stderr)
        return 1
    say("done")
    return 0


if __name__ == "__main__":
    sys.exit(main())
