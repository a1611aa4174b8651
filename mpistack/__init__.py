"""Facts about the MPI libraries this project measures.

`mpistack.libraries` says how to reach each library (libraries.toml); `mpistack.algorithms`
maps the paper's algorithm labels to each library's knobs (algorithms.toml). Both are the
single source of truth: the set-up, tests, ReFrame checks and analysis read them from here.
Standard library only, so the set-up can use it before any venv exists.
"""
