"""Helpers for the Spack tests: the project's Spack files, a copy of the environment to run
Spack on (so Spack's state never lands in the work tree), and the recipe loaded without
Spack (its real cmake_args, with Spack's define() semantics)."""
from __future__ import annotations

import ast
import importlib.util
import os
import re
import shutil
import subprocess
import sys
import types
from pathlib import Path

import pytest
import yaml

REPO_ROOT = Path(__file__).resolve().parents[2]
SPACK_YAML = REPO_ROOT / "spack.yaml"
SITE_DIR = REPO_ROOT / "site_configs" / "spack"
RECIPE = REPO_ROOT / "spack_repo" / "pcrepro" / "packages" / "pipecoll" / "package.py"
PIPECOLL = REPO_ROOT / "pipecoll"


def load_yaml(path: Path) -> dict:
    with open(path) as handle:
        return yaml.safe_load(handle)


def site_files() -> list[Path]:
    """Per-site files (everything but the project defaults)."""
    return sorted(p for p in SITE_DIR.glob("*.yaml") if p.name != "defaults.yaml")


def definitions(env: dict, site: dict | None = None) -> dict[str, list[str]]:
    """Spack's evaluation of `definitions:` (lists extend; $name / $^name expand), the
    environment's own first, then the site file's (an include sits below spack.yaml)."""
    defs: dict[str, list[str]] = {}
    entries = list(env.get("definitions", [])) + list((site or {}).get("definitions", []))
    for entry in entries:
        entry = {k: v for k, v in entry.items() if k != "when"}
        (name, items), = entry.items()
        defs.setdefault(name, []).extend(expand(items, defs))
    return defs


def expand(items: list, defs: dict[str, list[str]]) -> list[str]:
    out = []
    for item in items:
        match = re.fullmatch(r"\$(\^?)(\w+)", item)
        if match:
            hat, name = match.groups()
            if name not in defs:
                raise KeyError(name)
            out.extend(("^" + spec if hat else spec) for spec in defs[name])
        else:
            out.append(item)
    return out


# -- Spack on this machine ----------------------------------------------------------------
def spack_or_skip() -> str:
    spack = shutil.which("spack")
    if not spack:
        pytest.skip("spack is not on PATH (it is not on PyPI or in Debian; get it as "
                    "site_configs/spack/README.md says, then put its bin/ on PATH)")
    return spack


def run_spack(spack: str, args: list[str], cwd: Path, timeout: float,
              env: dict | None = None) -> subprocess.CompletedProcess:
    done = subprocess.run([spack, *args], cwd=cwd, capture_output=True, text=True,
                          timeout=timeout, env=env)
    assert done.returncode == 0, (
        f"spack {' '.join(args)} failed ({done.returncode}):\n{done.stdout[-4000:]}\n"
        f"{done.stderr[-4000:]}")
    return done


def copy_environment(dest: Path, transform=None) -> Path:
    """The project's environment as Spack sees it in `dest` (spack.yaml; the repository
    and site files as symlinks; pipecoll/ copied, because the develop build links its
    stage at pipecoll/../.spack-env/, which must be the copy's), so spack.lock,
    .spack-env/ and build links go there. `transform` may edit spack.yaml's dict first."""
    dest.mkdir(parents=True, exist_ok=True)
    data = load_yaml(SPACK_YAML)
    if transform:
        transform(data["spack"])
    for name in ("spack_repo", "site_configs"):
        (dest / name).symlink_to(REPO_ROOT / name)
    shutil.copytree(PIPECOLL, dest / "pipecoll", symlinks=True,
                    ignore=shutil.ignore_patterns("build-*", "spack-build-*"))
    (dest / "spack.yaml").write_text(yaml.safe_dump(data, sort_keys=False))
    return dest


# -- the recipe without Spack ---------------------------------------------------------------
def spack_define(var: str, value) -> str:
    """Spack's cmake define() (spack_repo.builtin.build_systems.cmake.define)."""
    if isinstance(value, bool):
        return f"-D{var}:BOOL={'ON' if value else 'OFF'}"
    if isinstance(value, (list, tuple)):
        value = ";".join(str(v) for v in value)
    return f"-D{var}:STRING={value}"


class _Variant:
    def __init__(self, value):
        self.value = value


class FakeSpec:
    """What the recipe reads of a concrete spec: boolean variants and spec['mpi'].mpicc."""

    def __init__(self, variants: dict[str, bool], mpicc: str):
        self.variants = {name: _Variant(value) for name, value in variants.items()}
        self._mpi = types.SimpleNamespace(mpicc=mpicc)

    def satisfies(self, constraint: str) -> bool:
        match = re.fullmatch(r"([+~])(\w+)", constraint.strip())
        assert match, f"FakeSpec only answers +variant / ~variant, not {constraint!r}"
        sign, name = match.groups()
        return self.variants[name].value == (sign == "+")

    def __getitem__(self, name: str):
        assert name == "mpi", f"the recipe asked for spec[{name!r}]"
        return self._mpi


def load_recipe():
    """(module, directives) of the recipe executed against a minimal stand-in for Spack:
    the directives are recorded, CMakePackage has Spack's define/define_from_variant."""
    directives: dict[str, list] = {"version": [], "variant": [], "depends_on": []}

    def recorder(kind):
        def record(*args, **kwargs):
            directives[kind].append((args, kwargs))
        return record

    class CMakePackage:
        run_tests = False

        def define(self, var, value):
            return spack_define(var, value)

        def define_from_variant(self, var, variant=None):
            return spack_define(var, self.spec.variants[variant or var.lower()].value)

    package_mod = types.ModuleType("spack.package")
    for kind in directives:
        setattr(package_mod, kind, recorder(kind))
    package_mod.__all__ = list(directives)
    cmake_mod = types.ModuleType("spack_repo.builtin.build_systems.cmake")
    cmake_mod.CMakePackage = CMakePackage
    fakes = {
        "spack": types.ModuleType("spack"), "spack.package": package_mod,
        "spack_repo": types.ModuleType("spack_repo"),
        "spack_repo.builtin": types.ModuleType("spack_repo.builtin"),
        "spack_repo.builtin.build_systems": types.ModuleType("spack_repo.builtin.build_systems"),
        "spack_repo.builtin.build_systems.cmake": cmake_mod,
    }
    saved = {name: sys.modules.get(name) for name in fakes}
    sys.modules.update(fakes)
    try:
        spec = importlib.util.spec_from_file_location("pcrepro_recipe_pipecoll", RECIPE)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    finally:
        for name, old in saved.items():
            if old is None:
                sys.modules.pop(name, None)
            else:
                sys.modules[name] = old
    return module, directives


def recipe_cmake_args(variants: dict[str, bool], mpicc: str, run_tests: bool = False) -> list[str]:
    """The recipe's own cmake_args() for a spec with these variants and this mpicc."""
    module, _ = load_recipe()
    pkg = module.Pipecoll.__new__(module.Pipecoll)
    pkg.spec = FakeSpec(variants, mpicc)
    pkg.run_tests = run_tests
    return pkg.cmake_args()


def cmake_options(cmakelists: Path = PIPECOLL / "CMakeLists.txt") -> dict[str, bool]:
    """option(NAME "doc" ON|OFF) of a CMakeLists.txt -> {NAME: default}."""
    text = cmakelists.read_text()
    return {name: default == "ON" for name, default in
            re.findall(r'option\(\s*(\w+)\s+"[^"]*"\s+(ON|OFF)\s*\)', text)}


def recipe_tree() -> ast.Module:
    return ast.parse(RECIPE.read_text(), filename=str(RECIPE))


@pytest.fixture(scope="session")
def sp():
    """These helpers, for the test modules (pytest's importlib mode cannot import a
    conftest by name)."""
    return types.SimpleNamespace(**{k: v for k, v in globals().items() if not k.startswith("_")})


def pytest_generate_tests(metafunc):
    if "site_file" in metafunc.fixturenames:
        metafunc.parametrize("site_file", site_files(), ids=lambda p: p.stem)
