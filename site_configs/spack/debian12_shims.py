#!/usr/bin/env python3
"""Make the per-library prefixes that debian12-local.yaml declares as Spack externals.

    python3 site_configs/spack/debian12_shims.py           # create (idempotent) and check
    python3 site_configs/spack/debian12_shims.py --check   # only check, change nothing

Debian installs Open MPI and MPICH side by side under /usr; /usr/bin/mpicc is whichever one
`update-alternatives` selects. Spack's recipes use <prefix>/bin/mpicc, so each library
gets its own prefix here: bin/ with its suffixed wrappers (mpicc.mpich ...), include/ and
lib/ with its own headers and libmpi.so. The prefixes are read from debian12-local.yaml
(the one place they are written). Needs write access to their parent (root, or a
pre-created directory). Standard library only: runs before any venv exists.
"""
from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
from pathlib import Path

SITE_FILE = Path(__file__).resolve().parent / "debian12-local.yaml"
ARCH_LIB = Path("/usr/lib/x86_64-linux-gnu")

# What each Debian library's prefix holds: name -> target. Wrappers are symlinks (they
# find their library by absolute paths compiled in); the MPICH launchers are scripts,
# because hydra looks for hydra_pmi_proxy beside argv[0], which a symlink would move.
LAYOUT = {
    "openmpi": {
        "suffix": "openmpi",
        "links": {
            "bin/mpicc": "/usr/bin/mpicc.openmpi",
            "bin/mpicxx": "/usr/bin/mpicxx.openmpi",
            "bin/mpic++": "/usr/bin/mpic++.openmpi",
            "bin/mpif77": "/usr/bin/mpif77.openmpi",
            "bin/mpif90": "/usr/bin/mpif90.openmpi",
            "bin/mpifort": "/usr/bin/mpifort.openmpi",
            "bin/mpirun": "/usr/bin/mpirun.openmpi",
            "bin/mpiexec": "/usr/bin/mpiexec.openmpi",
            "include": str(ARCH_LIB / "openmpi/include"),
            "lib": str(ARCH_LIB / "openmpi/lib"),
        },
        "scripts": {},
    },
    "mpich": {
        "suffix": "mpich",
        "links": {
            "bin/mpicc": "/usr/bin/mpicc.mpich",
            "bin/mpicxx": "/usr/bin/mpicxx.mpich",
            "bin/mpif77": "/usr/bin/mpif77.mpich",
            "bin/mpif90": "/usr/bin/mpif90.mpich",
            "bin/mpifort": "/usr/bin/mpifort.mpich",
            "bin/mpichversion": "/usr/bin/mpichversion",
            "include": "/usr/include/x86_64-linux-gnu/mpich",
            # Debian names MPICH's library libmpich.so; libmpi.so in /usr is the alternatives' pick.
            "lib/libmpi.so": str(ARCH_LIB / "libmpich.so"),
            "lib/libmpich.so": str(ARCH_LIB / "libmpich.so"),
            "lib/libmpicxx.so": str(ARCH_LIB / "libmpichcxx.so"),
            "lib/libmpifort.so": str(ARCH_LIB / "libmpichfort.so"),
        },
        "scripts": {
            "bin/mpiexec": "/usr/bin/mpiexec.mpich",
            "bin/mpirun": "/usr/bin/mpirun.mpich",
        },
    },
}


class ShimError(RuntimeError):
    """A prefix that cannot be made or is wrong; the message says what to do."""


def declared_prefixes(site_file: Path = SITE_FILE) -> dict[str, Path]:
    """{package: prefix} of the MPI externals in the site file (no YAML library needed:
    the file's `- spec: <pkg>@<ver>` / `prefix: <path>` pairs are read line by line)."""
    prefixes: dict[str, Path] = {}
    package = None
    for line in site_file.read_text().splitlines():
        spec = re.match(r"\s*- spec:\s*([A-Za-z0-9_-]+)@", line)
        if spec:
            package = spec.group(1)
            continue
        prefix = re.match(r"\s*prefix:\s*(\S+)", line)
        if prefix and package in LAYOUT:
            prefixes[package] = Path(prefix.group(1))
        package = None if prefix else package
    missing = set(LAYOUT) - set(prefixes)
    if missing:
        raise ShimError(f"{site_file}: no external prefix for {', '.join(sorted(missing))}")
    return prefixes


def _script(target: str) -> str:
    return f'#!/bin/sh\n# Made by {Path(__file__).name}: a script, not a symlink (see there).\nexec {target} "$@"\n'


def problems(package: str, prefix: Path) -> list[str]:
    """What is missing or wrong in one prefix (empty: it is right)."""
    layout = LAYOUT[package]
    found = []
    for rel, target in layout["links"].items():
        path = prefix / rel
        if not Path(target).exists():
            found.append(f"{target} does not exist (is Debian's {package} installed? "
                         f"apt-get install {'openmpi-bin libopenmpi-dev' if package == 'openmpi' else 'mpich libmpich-dev'})")
        elif not path.is_symlink() or os.readlink(path) != target:
            found.append(f"{path} should be a symlink to {target}")
    for rel, target in layout["scripts"].items():
        path = prefix / rel
        if not path.is_file() or path.read_text() != _script(target) or not os.access(path, os.X_OK):
            found.append(f"{path} should be an executable script running {target}")
    return found


def make(package: str, prefix: Path) -> None:
    layout = LAYOUT[package]
    for rel, target in layout["links"].items():
        if not Path(target).exists():
            continue  # reported by problems()
        path = prefix / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        if path.is_symlink() or path.exists():
            if path.is_symlink() and os.readlink(path) == target:
                continue
            path.unlink()
        path.symlink_to(target)
    for rel, target in layout["scripts"].items():
        path = prefix / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(path.name + ".tmp")
        tmp.write_text(_script(target))
        tmp.chmod(0o755)
        tmp.replace(path)


def wrapper_library(prefix: Path) -> str:
    """Which library <prefix>/bin/mpicc really compiles against: 'openmpi' or 'mpich'."""
    shown = subprocess.run([str(prefix / "bin/mpicc"), "-show"], capture_output=True,
                           text=True, timeout=60)
    text = shown.stdout + shown.stderr
    # MPICH's -show names .../mpich include dirs and -lmpich; Open MPI's .../openmpi ones.
    if "mpich" in text:
        return "mpich"
    if "openmpi" in text:
        return "openmpi"
    return f"unknown ({text.strip()[:200]})"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="only check, change nothing")
    args = parser.parse_args(argv)
    try:
        prefixes = declared_prefixes()
        status = 0
        for package, prefix in prefixes.items():
            if not args.check:
                try:
                    make(package, prefix)
                except PermissionError as err:
                    raise ShimError(f"cannot write {prefix} ({err.strerror}): run as root, or "
                                    f"create {prefix.parent} writable for you first") from None
            found = problems(package, prefix)
            if not found and wrapper_library(prefix) != package:
                found.append(f"{prefix}/bin/mpicc compiles against {wrapper_library(prefix)}, "
                             f"not {package}")
            for problem in found:
                print(f"{package}: {problem}", file=sys.stderr)
            print(f"{package}: {prefix} {'ok' if not found else 'NOT ready'}")
            status |= bool(found)
        return status
    except ShimError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
