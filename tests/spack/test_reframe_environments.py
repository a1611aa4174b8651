"""site_configs/spack/reframe_environments.py: ReFrame environments from a spack.lock,
accepted by ReFrame itself, and load commands that fail loudly when a build is missing."""
from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]
MODULE = REPO_ROOT / "site_configs/spack/reframe_environments.py"
REFRAME = Path(sys.executable).parent / "reframe"


def load_module():
    spec = importlib.util.spec_from_file_location("pcrepro_spack_rfm_envs", MODULE)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


def node(name, version, deps=(), external=None, **params):
    entry = {"name": name, "version": version, "parameters": params,
             "dependencies": [{"name": d, "hash": h, "parameters": {"deptypes": ["build", "link"],
                                                                  "virtuals": v}}
                              for d, h, v in deps]}
    if external:
        entry["external"] = {"path": external, "module": None, "extra_attributes": {}}
    return entry


def write_lock(env_dir: Path, mpis: list[tuple[str, str, str]]) -> Path:
    """A spack.lock (lockfile v6 layout) with pipecoll against each (name, version,
    external prefix) and an OSU root that must be ignored."""
    nodes, roots = {}, []
    for i, (name, version, external) in enumerate(mpis):
        mpi_hash, pc_hash = f"mpi{i}" + "a" * 28, f"pcl{i}" + "b" * 28
        nodes[mpi_hash] = node(name, version, external=external or None)
        nodes[pc_hash] = node("pipecoll", "develop", [(name, mpi_hash, ["mpi"]),
                                                      ("cmake", "c" * 32, [])],
                              preload=True, bench=True, tests=False)
        roots.append({"hash": pc_hash, "spec": f"pipecoll@develop ^{name}@{version}"})
    nodes["osu" + "d" * 29] = node("osu-micro-benchmarks", "7.5.1",
                                   [(mpis[0][0], "mpi0" + "a" * 28, ["mpi"])])
    roots.append({"hash": "osu" + "d" * 29, "spec": "osu-micro-benchmarks@7.5.1"})
    lock = {"_meta": {"file-type": "spack-lockfile", "lockfile-version": 6,
                      "specfile-version": 5}, "spack": {}, "roots": roots,
            "concrete_specs": nodes}
    env_dir.mkdir(parents=True, exist_ok=True)
    (env_dir / "spack.lock").write_text(json.dumps(lock))
    return env_dir


MPIS = [("openmpi", "4.1.4", "/opt/pcrepro/spack-shims/debian12/openmpi-4.1.4"),
        ("mpich", "3.3.1", ""), ("intel-oneapi-mpi", "2021.1.1", "")]


def test_one_environment_per_pipecoll_build(tmp_path):
    rfe = load_module()
    env_dir = write_lock(tmp_path / "env", MPIS)
    envs = rfe.environments(["mysys"], env_dir, spack="/opt/spack/bin/spack")
    assert [e["extras"]["mpi_library"] for e in envs] == ["openmpi", "mpich", "impi"]
    assert [e["extras"]["mpi_version"] for e in envs] == ["4.1.4", "3.3.1", "2021.1.1"]
    assert envs[0]["extras"]["spack_mpi_external"] == MPIS[0][2]
    assert len({e["name"] for e in envs}) == 3
    for env in envs:
        assert env["target_systems"] == ["mysys"]
        assert env["extras"]["pcbench"] == "pcbench"
        assert f"-e {env_dir} load --sh /{env['extras']['spack_hash']}" in env["prepare_cmds"][0]
        # Launch settings of the local set-up (venv paths) never leak into a Spack env.
        assert not any("venv" in value for _, value in env["env_vars"])


def test_reframe_accepts_the_environments(tmp_path):
    """ReFrame's own loader validates a site config built from these environments."""
    env_dir = write_lock(tmp_path / "env", MPIS)
    config = tmp_path / "spack_site.py"
    config.write_text(textwrap.dedent(f"""
        import sys
        sys.path.insert(0, {str(MODULE.parent)!r})
        import reframe_environments as spack_envs
        envs = spack_envs.environments(["spacksys"], {str(env_dir)!r}, spack="spack")
        site_configuration = {{
            "systems": [{{"name": "spacksys", "hostnames": [".*"], "partitions": [{{
                "name": "default", "scheduler": "local", "launcher": "mpirun",
                "environs": [e["name"] for e in envs]}}]}}],
            "environments": envs,
        }}
    """))
    done = subprocess.run([str(REFRAME), "-C", str(config), "--show-config=environments"],
                          capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert "spack-intel-oneapi-mpi-2021_1_1" in done.stdout


def run_prepare(env: dict, tmp_path: Path, fake_spack: str) -> subprocess.CompletedProcess:
    spack = tmp_path / "spack"
    spack.write_text(fake_spack)
    spack.chmod(0o755)
    script = "\n".join(env["prepare_cmds"]) + '\necho "loaded=$PCREPRO_FAKE_LOADED"\n'
    return subprocess.run(["bash", "-c", script], capture_output=True, text=True, timeout=60)


def test_prepare_cmds_load_or_fail_loudly(tmp_path):
    rfe = load_module()
    env_dir = write_lock(tmp_path / "env", MPIS[:1])
    (env,) = rfe.environments(["s"], env_dir, spack=str(tmp_path / "spack"))
    ok = run_prepare(env, tmp_path, "#!/bin/sh\necho 'export PCREPRO_FAKE_LOADED=yes;'\n")
    assert ok.returncode == 0 and "loaded=yes" in ok.stdout, ok.stderr
    # Not installed: spack load fails -> the job stops with the reason, not a run without
    # pcbench on PATH.
    bad = run_prepare(env, tmp_path, "#!/bin/sh\necho '==> Error: not installed' >&2\nexit 1\n")
    assert bad.returncode == 1 and "loaded=" not in bad.stdout
    assert "is not installed" in bad.stderr and "spack -e" in bad.stderr


def test_clear_errors(tmp_path):
    rfe = load_module()
    with pytest.raises(rfe.SpackEnvironmentError, match="concretize first"):
        rfe.environments(["s"], tmp_path / "nothing", spack="spack")
    env_dir = write_lock(tmp_path / "env", [("mvapich", "3.0", "")])
    with pytest.raises(rfe.SpackEnvironmentError, match="mvapich"):
        rfe.environments(["s"], env_dir, spack="spack")
    (tmp_path / "bad").mkdir()
    (tmp_path / "bad/spack.lock").write_text("{not json")
    with pytest.raises(rfe.SpackEnvironmentError, match="not a Spack lockfile"):
        rfe.environments(["s"], tmp_path / "bad", spack="spack")
