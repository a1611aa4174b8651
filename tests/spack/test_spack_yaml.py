"""Structure of the top-level spack.yaml, checked without Spack: every reference resolves,
the matrices are well formed, repos/includes/develop point at real paths, the target is
portable, the paper's versions are pinned."""
from __future__ import annotations

import re

import pytest

PORTABLE_TARGETS = {"x86_64", "x86_64_v2", "x86_64_v3", "aarch64", "ppc64le"}


@pytest.fixture(scope="module")
def env(sp):
    data = sp.load_yaml(sp.SPACK_YAML)
    assert set(data) == {"spack"}, "spack.yaml must have the single top-level key `spack`"
    return data["spack"]


def references(items) -> set[str]:
    """Names used as $name / $^name in a list (or matrix rows)."""
    found = set()
    for item in items:
        if isinstance(item, dict):
            for row in item.get("matrix", []):
                found |= references(row)
        else:
            match = re.fullmatch(r"\$\^?(\w+)", item)
            if match:
                found.add(match.group(1))
    return found


def test_definitions_are_defined_before_use(sp, env):
    defined = set()
    for entry in env["definitions"]:
        names = [k for k in entry if k != "when"]
        assert len(names) == 1, f"a definition entry names one list: {entry}"
        used = references(entry[names[0]])
        assert used <= defined, f"definition {names[0]} uses {used - defined} before defined"
        defined.add(names[0])
    # Evaluated as Spack does, with and without each site's additions.
    sp.definitions(env)
    for site in sp.site_files():
        sp.definitions(env, sp.load_yaml(site))


def test_every_spec_list_reference_exists(sp, env):
    names = {k for entry in env["definitions"] for k in entry if k != "when"}
    missing = references(env["specs"]) - names
    assert not missing, f"specs use undefined lists: {missing}"
    # A site list only used in `specs:` (evaluated after the site's definitions); using it
    # in another definition of spack.yaml would freeze it empty.
    for entry in env["definitions"]:
        for name, items in entry.items():
            if name != "when":
                assert "mpis_site" not in references(items), (
                    f"definition {name} uses $mpis_site, which sites extend later")


def test_matrices_are_well_formed(sp, env):
    defs = sp.definitions(env)
    matrices = [item["matrix"] for item in env["specs"] if isinstance(item, dict)]
    assert len(matrices) == 2, "expected the benchmarks x MPI and training x MPI matrices"
    for matrix in matrices:
        assert len(matrix) == 2 and all(isinstance(row, list) and row for row in matrix)
        first, deps = (sp.expand(row, defs) for row in matrix)
        assert first and not any(spec.startswith("^") for spec in first), matrix
        # The MPI row: only dependency constraints (^...), each an MPI provider at a version.
        assert all(re.match(r"\$\^|\^", item) for item in matrix[1]), f"use $^list: {matrix[1]}"
        for spec in deps:
            assert re.fullmatch(r"\^(openmpi|mpich|intel-oneapi-mpi)@[\d.]+", spec), spec


def test_paper_and_current_mpis(sp, env):
    defs = sp.definitions(env)
    # The paper: Open MPI 4.1.0, MPICH 3.3.1, Intel MPI (2020; oneAPI 2021.x in Spack).
    assert {"openmpi@4.1.0", "mpich@3.3.1"} <= set(defs["mpis_paper"])
    assert any(s.startswith("intel-oneapi-mpi@2021.") for s in defs["mpis_paper"])
    assert any(s.startswith("openmpi@5") for s in defs["mpis_current"])
    assert any(s.startswith("mpich@4") for s in defs["mpis_current"])
    # Every root spec is pinned to a version (reproducible; spack.lock records the rest).
    for name, specs in defs.items():
        for spec in specs:
            assert re.match(r"[\w-]+@[\w.=]+", spec.lstrip("^")), f"{name}: {spec} unpinned"


def test_training_stack_uses_mpi(sp, env):
    defs = sp.definitions(env)
    (horovod,) = defs["training"]
    for token in ("py-horovod@", "frameworks=tensorflow", "controllers=mpi",
                  "tensor_ops=mpi", "^py-tensorflow@"):
        assert token in horovod, f"training stack lacks {token}: {horovod}"
    mpis = {s.split("@")[0] for s in defs["training_mpis"]}
    assert mpis == {"openmpi", "mpich"}


def test_unify_false_and_no_view(env):
    assert env["concretizer"]["unify"] is False
    # Several versions of one MPI cannot share a view.
    assert env.get("view") is False


def test_repos_point_at_spack1_repositories(sp, env):
    for namespace, path in env["repos"].items():
        root = (sp.SPACK_YAML.parent / path).resolve()
        repo = sp.load_yaml(root / "repo.yaml")["repo"]
        assert repo["namespace"] == namespace == root.name, (namespace, root)
        # Spack 1.x imports recipes as spack_repo.<namespace>.packages.<pkg>.package
        assert root.parent.name == "spack_repo"
        assert str(repo["api"]).startswith("v2"), "Spack 1.x repositories use api v2.x"
        assert (root / "packages").is_dir()


def test_includes_resolve(sp, env):
    includes = env["include"]
    site_entry, defaults_entry = includes
    # The site file: chosen by PCREPRO_SPACK_SITE, optional as a whole (the `when`).
    assert "${PCREPRO_SPACK_SITE}" in site_entry["path"]
    assert "PCREPRO_SPACK_SITE" in site_entry["when"]
    assert eval(site_entry["when"], {"env": {}}) is False  # noqa: S307 (Spack's own eval)
    assert eval(site_entry["when"], {"env": {"PCREPRO_SPACK_SITE": "x"}}) is True  # noqa: S307
    sites = sp.site_files()
    assert sites, "no site file in site_configs/spack/"
    for site in sites:
        path = sp.SPACK_YAML.parent / site_entry["path"].replace("${PCREPRO_SPACK_SITE}", site.stem)
        assert path.resolve() == site.resolve()
    # Defaults come after the site file: lower precedence, so a site overrides them.
    assert (sp.SPACK_YAML.parent / defaults_entry).is_file()


def test_develop_builds_this_checkout(sp, env):
    (name, entry), = env["develop"].items()
    assert name == "pipecoll" and entry["spec"] == "pipecoll@=develop"
    assert (sp.SPACK_YAML.parent / entry["path"] / "CMakeLists.txt").is_file()
    # The develop stage link goes below .spack-env/ (git-ignored), not into pipecoll/.
    link = env["config"]["develop_stage_link"]
    target = (sp.SPACK_YAML.parent / entry["path"] / link).resolve()
    assert target.parent == (sp.SPACK_YAML.parent / ".spack-env").resolve()


def test_target_is_portable(sp, env):
    # spack.yaml itself must not set the target (it would override every site file), nor
    # pin one in a spec.
    assert "target" not in str(env.get("packages", {}))
    assert not re.search(r"target=", str(env["definitions"]) + str(env["specs"]))
    defaults = sp.load_yaml(sp.SITE_DIR / "defaults.yaml")
    assert defaults["packages"]["all"]["require"] == "target=x86_64_v3"
    for site in sp.site_files():
        require = (sp.load_yaml(site).get("packages", {}).get("all", {}) or {}).get("require")
        effective = require or defaults["packages"]["all"]["require"]
        target = re.fullmatch(r"target=(\w+)", effective)
        assert target and target.group(1) in PORTABLE_TARGETS, (
            f"{site.name}: target {effective!r} is not a generic level; "
            f"use one of {sorted(PORTABLE_TARGETS)}")
