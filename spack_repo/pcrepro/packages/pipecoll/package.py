# pipecoll: pipelined non-blocking MPI collectives (this project's library).
import os

from spack_repo.builtin.build_systems.cmake import CMakePackage

from spack.package import *


class Pipecoll(CMakePackage):
    """Pipelined MPI collectives after Castello et al. 2021 ("Accelerating distributed deep
    neural network training with pipelined MPI allreduce"): MPI_Iallreduce and friends split
    into concurrent segments, a PMPI interposer that swaps them in under an unmodified
    application (Horovod), and pcbench, the benchmark driver of the reproduction."""

    # The project is not published: its source is the checkout of pipecoll-repro, built
    # through `develop:` in the project's spack.yaml (path: pipecoll). Outside that
    # environment: `spack develop --path <checkout>/pipecoll pipecoll@=develop` in any env.
    # No homepage/git/url until it has a public home (a made-up one would be fetched).

    # Only `develop` until the project tags a release; a release is added here as
    # version("X.Y.Z", tag="vX.Y.Z", commit="<full sha>") together with `git = "<url>"`.
    version("develop")

    variant("preload", default=True, description="Build libpipecoll_preload.so, the PMPI interposer")
    variant("bench", default=True, description="Build pcbench, the benchmark driver")
    variant("tests", default=False, description="Build the MPI correctness tests and register them with CTest")

    depends_on("c", type="build")
    depends_on("cmake@3.18:", type="build")
    depends_on("mpi")

    def cmake_args(self):
        # `spack install --test=root pipecoll` runs `make test` (ctest) after the build:
        # the tests must then be built even without +tests.
        build_tests = self.spec.satisfies("+tests") or self.run_tests
        return [
            self.define_from_variant("PIPECOLL_BUILD_PRELOAD", "preload"),
            self.define_from_variant("PIPECOLL_BUILD_BENCH", "bench"),
            self.define("PIPECOLL_BUILD_TESTS", build_tests),
            # The MPI the spec depends on, not whatever mpicc FindMPI meets first on PATH
            # (on Debian /usr/bin/mpicc is whichever library `alternatives` points at).
            self.define("MPI_C_COMPILER", self.spec["mpi"].mpicc),
        ]

    def setup_build_environment(self, env):
        # The CTest tests launch MPI ranks. Open MPI refuses to start as root (containers,
        # CI) unless both variables are set, and needs --oversubscribe-like permission when
        # the tests ask for more ranks than the build host has cores.
        if self.run_tests and os.geteuid() == 0:
            env.set("OMPI_ALLOW_RUN_AS_ROOT", "1")
            env.set("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
        if self.run_tests:
            env.set("OMPI_MCA_rmaps_base_oversubscribe", "1")
