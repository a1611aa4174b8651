"""With Spack (when `spack` is on PATH, else skipped): concretize the project's environment
offline, and install pipecoll offline against the Debian MPI externals, then run the
installed pcbench through the ReFrame environment made for it.

Spack runs on copies of the environment under tmp (spack.lock, .spack-env/ and the
install tree stay out of the work tree). Concretizing the whole environment (with the
TensorFlow + Horovod stack) takes half an hour on a loaded 2-core machine: it runs only
with PCREPRO_SPACK_FULL=1; by default the MPI and benchmark roots are concretized.
"""
from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path

import pytest

DEBIAN_WRAPPERS = ("/usr/bin/mpicc.openmpi", "/usr/bin/mpicc.mpich")


def debian_site_or_none(sp) -> str | None:
    """debian12-local when this is such a machine (its wrappers exist), else no site."""
    return "debian12-local" if all(Path(w).exists() for w in DEBIAN_WRAPPERS) else None


def spack_env(site: str | None) -> dict:
    env = {k: v for k, v in os.environ.items() if k != "PCREPRO_SPACK_SITE"}
    if site:
        env["PCREPRO_SPACK_SITE"] = site
    return env


@pytest.mark.timeout(4 * 3600)
def test_concretize_environment_offline(sp, tmp_path):
    spack = sp.spack_or_skip()
    site = debian_site_or_none(sp)
    full = os.environ.get("PCREPRO_SPACK_FULL") == "1"

    def without_training(env):
        env["specs"] = [s for s in env["specs"]
                        if not (isinstance(s, dict) and "$training" in s["matrix"][0])]

    env_dir = sp.copy_environment(tmp_path / "env", None if full else without_training)
    data = sp.load_yaml(env_dir / "spack.yaml")["spack"]
    site_data = sp.load_yaml(sp.SITE_DIR / f"{site}.yaml") if site else None
    defs = sp.definitions(data, site_data)
    sp.run_spack(spack, ["-e", str(env_dir), "concretize", "-f"], env_dir,
                 timeout=4 * 3600, env=spack_env(site))
    lock = json.loads((env_dir / "spack.lock").read_text())
    nodes = lock["concrete_specs"]
    mpis = defs["mpis_paper"] + defs["mpis_current"] + defs["mpis_site"]
    expected = len(mpis) * (1 + len(defs["benchmarks"]))
    if full:
        expected += len(defs["training"]) * len(defs["training_mpis"])
    assert len(lock["roots"]) == expected
    # Each matrix row links the MPI it names.
    for root in lock["roots"]:
        wanted = re.search(r"\^(\S+)@(\S+)", root["spec"])
        if not wanted:
            continue
        mpi = [d for d in nodes[root["hash"]]["dependencies"]
               if "mpi" in d["parameters"]["virtuals"]]
        got = nodes[mpi[0]["hash"]]
        assert (got["name"], got["version"]) == wanted.groups(), root["spec"]
    # The portable target everywhere (no build-host x86_64_v4).
    targets = {n["arch"]["target"] if isinstance(n["arch"]["target"], str)
               else n["arch"]["target"]["name"] for n in nodes.values() if "arch" in n}
    assert targets == {"x86_64_v3"}, targets


@pytest.mark.timeout(3600)
@pytest.mark.parametrize("mpi,soname,run_tests", [
    ("openmpi@4.1.4", "libmpi.so.40", True),    # with the library's own tests (ctest)
    ("mpich@4.0.2", "libmpich.so.12", False),
])
def test_install_pipecoll_against_debian_external(sp, tmp_path, mpi, soname, run_tests):
    spack = sp.spack_or_skip()
    if debian_site_or_none(sp) is None:
        pytest.skip("not a Debian machine with both distribution MPIs "
                    f"({', '.join(DEBIAN_WRAPPERS)})")
    shims = subprocess.run(["python3", str(sp.SITE_DIR / "debian12_shims.py"), "--check"],
                           capture_output=True, text=True, timeout=120)
    if shims.returncode != 0:
        pytest.skip("the debian12-local shim prefixes are not made: run "
                    "`python3 site_configs/spack/debian12_shims.py` (as root) first")

    root = f"pipecoll@develop +preload +bench ^{mpi}"

    def one_root(env):
        env["specs"] = [root]
        env.pop("definitions")
        env["config"]["install_tree"] = {"root": str(tmp_path / "opt")}

    env_dir = sp.copy_environment(tmp_path / "env", one_root)
    env = spack_env("debian12-local")
    sp.run_spack(spack, ["-e", str(env_dir), "concretize", "-f"], env_dir, 1800, env)
    lock = json.loads((env_dir / "spack.lock").read_text())
    mpi_nodes = [n for n in lock["concrete_specs"].values()
                 if n["name"] == mpi.split("@")[0]]
    assert len(mpi_nodes) == 1 and mpi_nodes[0].get("external"), "MPI not the external"
    install = ["-e", str(env_dir), "install", "--no-cache"]
    if run_tests:
        install.append("--test=root")
    done = sp.run_spack(spack, install, env_dir, 3000, env)
    if run_tests:
        assert "Executing phase: 'build'" in done.stdout + done.stderr
    # The develop build left its stage link in .spack-env/, not in the source tree.
    assert not list((env_dir / "pipecoll").glob("build-*"))
    assert list((env_dir / ".spack-env").glob("dev-stage-pipecoll-*"))
    prefix = Path(sp.run_spack(spack, ["-e", str(env_dir), "find", "--format", "{prefix}",
                                       "pipecoll"], env_dir, 600, env).stdout.strip())
    for artefact in ("bin/pcbench", "lib/libpipecoll.so", "lib/libpipecoll_preload.so"):
        assert (prefix / artefact).exists(), artefact
    ldd = subprocess.run(["ldd", str(prefix / "bin/pcbench")], capture_output=True,
                         text=True, timeout=60).stdout
    assert soname in ldd, f"pcbench does not link {soname}:\n{ldd}"

    # The ReFrame environment for this build: its load commands put the Spack-built
    # pcbench and the external MPI's launcher on PATH, and a real 2-rank run works.
    import importlib.util
    import sys
    module_path = sp.SITE_DIR / "reframe_environments.py"
    spec = importlib.util.spec_from_file_location("pcrepro_spack_rfm_envs_live", module_path)
    rfe = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = rfe
    spec.loader.exec_module(rfe)
    (renv,) = rfe.environments(["local"], env_dir, only_installed=True, spack=spack)
    rows = tmp_path / "rows.jsonl"
    exports = "".join(f"export {k}={v}\n" for k, v in renv["env_vars"])
    script = (exports + "\n".join(renv["prepare_cmds"]) + "\n"
              f'test "$(command -v pcbench)" = "{prefix}/bin/pcbench" || exit 3\n'
              f"mpirun -np 2 pcbench --variant blocking,fconc:2 --min-bytes 8 --max-bytes 1K "
              f"--iters 3 --warmup 1 --output {rows}\n")
    ran = subprocess.run(["timeout", "300", "bash", "-c", script], capture_output=True,
                         text=True, timeout=600, env=env)
    assert ran.returncode == 0, ran.stdout[-2000:] + ran.stderr[-2000:]
    lines = [json.loads(line) for line in rows.read_text().splitlines() if line.strip()]
    assert lines and all(row.get("check") == "pass" for row in lines), lines[:2]
