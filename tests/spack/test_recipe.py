"""The pipecoll recipe (spack_repo/pcrepro/packages/pipecoll/package.py) without Spack: its
structure, that its variants drive real options of pipecoll/CMakeLists.txt, and the CMake
build of pipecoll against each MPI library with exactly the arguments the recipe gives."""
from __future__ import annotations

import ast
import os
import re
import subprocess

import pytest

VARIANT_OPTION = {"preload": "PIPECOLL_BUILD_PRELOAD", "bench": "PIPECOLL_BUILD_BENCH",
                  "tests": "PIPECOLL_BUILD_TESTS"}


def calls(tree: ast.Module, name: str) -> list[ast.Call]:
    return [node for node in ast.walk(tree) if isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name) and node.func.id == name]


def literal_args(call: ast.Call) -> tuple[list, dict]:
    return ([ast.literal_eval(a) for a in call.args],
            {k.arg: ast.literal_eval(k.value) for k in call.keywords})


def test_recipe_class(sp):
    tree = sp.recipe_tree()
    classes = [n for n in tree.body if isinstance(n, ast.ClassDef)]
    assert [c.name for c in classes] == ["Pipecoll"], "Spack maps pipecoll -> class Pipecoll"
    assert [b.id for b in classes[0].bases] == ["CMakePackage"]
    imports = {(n.module, a.name) for n in tree.body if isinstance(n, ast.ImportFrom)
               for a in n.names}
    # Spack 1.x: build systems live in the builtin repository.
    assert ("spack_repo.builtin.build_systems.cmake", "CMakePackage") in imports
    assert ("spack.package", "*") in imports


def test_dependencies_and_versions(sp):
    tree = sp.recipe_tree()
    deps = {literal_args(c)[0][0]: literal_args(c)[1] for c in calls(tree, "depends_on")}
    assert "mpi" in deps and deps["mpi"] == {}, "pipecoll links MPI (link+build dependency)"
    cmake = [d for d in deps if d.startswith("cmake@")]
    assert cmake and deps[cmake[0]] == {"type": "build"}
    # The same minimum as pipecoll/CMakeLists.txt's cmake_minimum_required.
    wanted = re.search(r"cmake_minimum_required\(VERSION ([\d.]+)\)",
                       (sp.PIPECOLL / "CMakeLists.txt").read_text()).group(1)
    assert cmake[0] == f"cmake@{wanted}:"
    versions = [literal_args(c) for c in calls(tree, "version")]
    assert versions and all(not kw.get("sha256") for _, kw in versions), (
        "no checksums until releases exist (a made-up sha256 would be fetched and fail)")
    assert ["develop"] in [args for args, _ in versions]


def test_variants_map_to_cmake_options(sp):
    options = sp.cmake_options()
    _, directives = sp.load_recipe()
    variants = {args[0]: kwargs["default"] for args, kwargs in directives["variant"]}
    assert set(variants) == set(VARIANT_OPTION)
    for variant, option in VARIANT_OPTION.items():
        assert option in options, f"{option} is not an option() of pipecoll/CMakeLists.txt"
        # Same defaults: a Spack build and a plain CMake build give the same artefacts.
        assert variants[variant] == options[option], f"+{variant} default differs from {option}"


@pytest.mark.parametrize("variants,run_tests,expected", [
    ({"preload": True, "bench": True, "tests": False}, False,
     {"PIPECOLL_BUILD_PRELOAD": "ON", "PIPECOLL_BUILD_BENCH": "ON", "PIPECOLL_BUILD_TESTS": "OFF"}),
    ({"preload": False, "bench": False, "tests": True}, False,
     {"PIPECOLL_BUILD_PRELOAD": "OFF", "PIPECOLL_BUILD_BENCH": "OFF", "PIPECOLL_BUILD_TESTS": "ON"}),
    # spack install --test=root: the tests are built (and `make test` runs them).
    ({"preload": True, "bench": True, "tests": False}, True,
     {"PIPECOLL_BUILD_PRELOAD": "ON", "PIPECOLL_BUILD_BENCH": "ON", "PIPECOLL_BUILD_TESTS": "ON"}),
])
def test_cmake_args(sp, variants, run_tests, expected):
    args = sp.recipe_cmake_args(variants, "/some/mpi/bin/mpicc", run_tests)
    parsed = dict(re.fullmatch(r"-D(\w+):\w+=(.*)", a).groups() for a in args)
    assert parsed == {**expected, "MPI_C_COMPILER": "/some/mpi/bin/mpicc"}


def _missing_sources(sp) -> list[str]:
    text = (sp.PIPECOLL / "CMakeLists.txt").read_text()
    sources = set(re.findall(r"\b((?:src|bench)/[\w.]+\.c)\b", text)) | {"tests/CMakeLists.txt"}
    return sorted(s for s in sources if not (sp.PIPECOLL / s).exists())


def test_cmake_build_like_the_recipe(sp, mpi_library, tmp_path):
    """Configure + build pipecoll against `mpi_library` with the recipe's cmake_args
    (all variants on, tests built), as `spack install pipecoll+tests ^<mpi>` would."""
    missing = _missing_sources(sp)
    if missing:
        pytest.skip(f"pipecoll sources not there yet: {', '.join(missing)}")
    # The shim prefix plays the role of the MPI's Spack prefix: spec["mpi"].mpicc is
    # <prefix>/bin/mpicc there too.
    args = sp.recipe_cmake_args({"preload": True, "bench": True, "tests": True},
                                str(mpi_library.shim_mpicc))
    env = mpi_library.environment()
    build = tmp_path / "build"
    for cmd in (["cmake", "-S", str(sp.PIPECOLL), "-B", str(build),
                 "-DCMAKE_BUILD_TYPE=Release", f"-DCMAKE_INSTALL_PREFIX={tmp_path / 'prefix'}",
                 *args],
                ["cmake", "--build", str(build), "-j2"],
                ["cmake", "--install", str(build)]):
        done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, f"{' '.join(cmd)}:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    cache = (build / "CMakeCache.txt").read_text()
    # The recipe's define() makes it a STRING entry, as in a real Spack build.
    assert re.search(rf"^MPI_C_COMPILER:\w+={re.escape(str(mpi_library.shim_mpicc))}$", cache, re.M)
    prefix = tmp_path / "prefix"
    for artefact in ("bin/pcbench", "lib/libpipecoll.so", "lib/libpipecoll_preload.so",
                     "include/pipecoll.h"):
        assert (prefix / artefact).exists(), f"{artefact} not installed"
    # The tests are registered with CTest (what `spack install --test=root` runs).
    listed = subprocess.run(["ctest", "-N"], cwd=build, capture_output=True, text=True,
                            timeout=60, env=env)
    assert re.search(r"Total Tests: [1-9]", listed.stdout), listed.stdout


def test_cmake_variants_off_drop_targets(sp, tmp_path):
    """~preload ~bench really removes the interposer and pcbench (configure only)."""
    from mpistack import libraries
    installed = [lib for lib in libraries.selected() if lib.shim_mpicc.exists()]
    if not installed:
        pytest.skip("no MPI library set up: run `make setup`")
    if _missing_sources(sp):
        pytest.skip(f"pipecoll sources not there yet: {', '.join(_missing_sources(sp))}")
    lib = installed[0]
    args = sp.recipe_cmake_args({"preload": False, "bench": False, "tests": False},
                                str(lib.shim_mpicc))
    build = tmp_path / "build"
    done = subprocess.run(["cmake", "-S", str(sp.PIPECOLL), "-B", str(build), *args],
                          env=lib.environment(), capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    targets = subprocess.run(["cmake", "--build", str(build), "--target", "help"],
                             capture_output=True, text=True, timeout=120).stdout
    assert "pipecoll" in targets
    assert "pcbench" not in targets and "pipecoll_preload" not in targets
