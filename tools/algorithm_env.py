#!/usr/bin/env python3
"""Print the environment that makes an MPI library use a paper algorithm (mpistack/algorithms.toml).

    tools/algorithm_env.py openmpi allreduce RNG                  # MPI_Iallreduce, sh exports
    tools/algorithm_env.py mpich allreduce AUTO --op noop --format json
    tools/algorithm_env.py impi allreduce RSA --blocking
    tools/algorithm_env.py mpich allreduce --list                 # labels on offer
    eval "$(tools/algorithm_env.py openmpi bcast CHAIN)"

LIBRARY is a name from mpistack/libraries.toml (its installed version is read), or a family
(openmpi, mpich, impi) together with --version. Exit status 2 on a bad request, with the
reason (valid labels, covered versions) on stderr.
"""
from __future__ import annotations

import argparse
import json
import shlex
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from mpistack import algorithms  # noqa: E402  (path set above: runs without installation)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("library", help="libraries.toml name, or a family with --version")
    parser.add_argument("collective", help=", ".join(algorithms.COLLECTIVES))
    parser.add_argument("label", nargs="?", help="paper label (AUTO, RNG, RSA, ...)")
    parser.add_argument("--blocking", action="store_true",
                        help="MPI_<Coll> (pcbench variant blocking); default MPI_I<coll>")
    parser.add_argument("--op", default="sum", choices=algorithms.OPS)
    parser.add_argument("--version", help="library version or MPI_Get_library_version text")
    parser.add_argument("--np", type=int, dest="nprocs",
                        help="process count (needed where an algorithm keeps user ops only at some p)")
    parser.add_argument("--format", default="sh", choices=("sh", "json"))
    parser.add_argument("--list", action="store_true", help="list the labels offered")
    args = parser.parse_args(argv)
    try:
        if args.list:
            offered = algorithms.labels(args.library, args.collective, args.blocking, args.version)
            print(json.dumps(offered) if args.format == "json" else "\n".join(offered))
            return 0
        if not args.label:
            parser.error("LABEL is required unless --list is given")
        sel = algorithms.select(args.library, args.collective, args.blocking, args.label,
                                args.op, args.version, args.nprocs)
    except algorithms.AlgorithmError as error:
        print(f"algorithm_env: {error}", file=sys.stderr)
        return 2
    if args.format == "json":
        print(json.dumps({"family": sel.family, "version": sel.version,
                          "collective": sel.collective, "blocking": sel.blocking,
                          "label": sel.label, "op": sel.op, "algorithm": sel.algorithm,
                          "env": sel.env, "unset": list(sel.unset), "note": sel.note,
                          "verified": sel.verified}, indent=2))
    else:
        print(f"# {sel.family} {sel.version} {'blocking' if sel.blocking else 'nonblocking'} "
              f"{sel.collective} {sel.label} op={sel.op}: algorithm in force {sel.algorithm}")
        for name in sel.unset:
            print(f"unset {name}")
        for name, value in sel.env.items():
            print(f"export {name}={shlex.quote(value)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
