"""The per-site Spack files (site_configs/spack/<site>.yaml) and the Debian shim prefixes."""
from __future__ import annotations

import importlib.util
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

MPI_PROVIDERS = {"openmpi", "mpich", "intel-oneapi-mpi", "mvapich", "cray-mpich", "mpt"}
# Spack configuration sections a site file may set (spack.config.SECTION_SCHEMAS).
SECTIONS = {"packages", "definitions", "config", "compilers", "concretizer", "mirrors",
            "modules", "upstreams", "toolchains", "env_vars"}


def test_site_file_structure(sp, site_file):
    data = sp.load_yaml(site_file)
    assert set(data) <= SECTIONS, f"{site_file.name}: unknown sections {set(data) - SECTIONS}"
    packages = data.get("packages", {})
    # The FACTS trap: `mpi: buildable: false` (what `external find --not-buildable` writes)
    # forbids building any MPI, also the paper's versions of spack.yaml.
    assert packages.get("mpi", {}).get("buildable", True) is not False, (
        f"{site_file.name}: mpi must stay buildable (spack.yaml builds the paper's MPIs)")
    for name, settings in packages.items():
        for external in settings.get("externals", []):
            assert re.match(rf"{re.escape(name)}@[\w.]+", external["spec"]), (
                f"{site_file.name}: external {external['spec']!r} must be {name}@<version>")
            assert ("prefix" in external) != ("modules" in external), external
            if "prefix" in external:
                assert os.path.isabs(external["prefix"]), f"{external['prefix']} not absolute"
            if name in MPI_PROVIDERS and "prefix" in external:
                # /usr holds every distribution MPI behind `alternatives`: Spack would use
                # whichever /usr/bin/mpicc is selected (debian12-local.yaml explains).
                assert external["prefix"] not in ("/usr", "/usr/local"), (
                    f"{site_file.name}: {name} with prefix {external['prefix']}: give each "
                    "MPI its own prefix")
    # Site MPIs that join the matrix are declared as externals (else Spack builds them).
    declared = {ext["spec"].split()[0] for name, settings in packages.items()
                if name in MPI_PROVIDERS for ext in settings.get("externals", [])}
    for entry in data.get("definitions", []):
        for spec in entry.get("mpis_site", []):
            assert spec in declared, f"{site_file.name}: mpis_site {spec} has no external"


def _shims():
    path = Path(__file__).resolve().parents[2] / "site_configs/spack/debian12_shims.py"
    spec = importlib.util.spec_from_file_location("pcrepro_debian12_shims", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_shim_prefixes_are_the_declared_ones(sp):
    shims = _shims()
    prefixes = shims.declared_prefixes()
    data = sp.load_yaml(shims.SITE_FILE)
    for package, prefix in prefixes.items():
        (external,) = data["packages"][package]["externals"]
        assert Path(external["prefix"]) == prefix


@pytest.mark.parametrize("package", ["openmpi", "mpich"])
def test_debian_shim_reaches_its_own_library(package, tmp_path):
    """A shim prefix made in tmp: its mpicc compiles against its library, whatever
    /usr/bin/mpicc is, and its launcher runs ranks."""
    shims = _shims()
    wrapper = shims.LAYOUT[package]["links"]["bin/mpicc"]
    if not Path(wrapper).exists():
        pytest.skip(f"Debian's {package} is not installed ({wrapper} missing)")
    prefix = tmp_path / package
    shims.make(package, prefix)
    assert shims.problems(package, prefix) == []
    assert shims.wrapper_library(prefix) == package
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
               OMPI_MCA_rmaps_base_oversubscribe="1")
    hello = tmp_path / "hello.c"
    hello.write_text('#include <mpi.h>\n#include <stdio.h>\nint main(int c, char **v) {\n'
                     '  char lib[MPI_MAX_LIBRARY_VERSION_STRING]; int n, r;\n'
                     '  MPI_Init(&c, &v); MPI_Comm_size(MPI_COMM_WORLD, &n);\n'
                     '  MPI_Comm_rank(MPI_COMM_WORLD, &r); MPI_Get_library_version(lib, &n);\n'
                     '  if (r == 0) printf("%s\\n", lib); MPI_Finalize(); return 0; }\n')
    subprocess.run([str(prefix / "bin/mpicc"), str(hello), "-o", str(tmp_path / "hello")],
                   check=True, timeout=120, env=env)
    ran = subprocess.run([str(prefix / "bin/mpiexec"), "-n", "2", str(tmp_path / "hello")],
                         capture_output=True, text=True, timeout=120, env=env)
    assert ran.returncode == 0, ran.stderr
    assert ("Open MPI" if package == "openmpi" else "MPICH") in ran.stdout, ran.stdout


def test_shim_check_reports_wrong_links(tmp_path):
    shims = _shims()
    prefix = tmp_path / "mpich"
    (prefix / "bin").mkdir(parents=True)
    (prefix / "bin/mpicc").symlink_to("/usr/bin/mpicc.openmpi")
    found = shims.problems("mpich", prefix)
    assert any("bin/mpicc should be a symlink to /usr/bin/mpicc.mpich" in p for p in found)
