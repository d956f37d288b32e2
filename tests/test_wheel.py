"""The built wheels, installed into a fresh virtual environment, work from another folder: the code wheel carries
no weights, each shipped model is its own wheel (models/NAME/pyproject.toml, found through the `odqa.models` entry
points), each under PyPI's 100 MB, and nothing is fetched from a hub (issue 50 item 2). The code installs nothing
outside odqa's own names, so other projects' `reader`, `retriever`, `linker` or `indexes` installed beside it
change nothing (item 1). Both the wheel and the sdist carry every file of the package that is not Python, and an
installed wheel serves its page and answers (issue 64 item 1)."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import httpx
import pytest

from odqa.core.models import SHIPPED_NAMES as MODELS  # every shipped model, each its own wheel
from tests.answer_checks import assert_answer_read_from
from tests.es_server import free_port
from tests.packaging_files import package_files
from tests.serve_fixtures import wait_until_healthy

REPO_ROOT = Path(__file__).resolve().parent.parent
PYPI_FILE_LIMIT = 100 * 10**6  # PyPI's default upload limit per file

pytestmark = [pytest.mark.slow, pytest.mark.subprocess]


def _run(cmd, **kwargs):
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600, **kwargs)
    assert proc.returncode == 0, f"{cmd}: {proc.stderr[-3000:]}"
    return proc


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    """(venv python, env): odqa from the wheel; its dependencies (torch, ...) from this interpreter's
    site-packages, so nothing is downloaded. The venv is made without --system-site-packages, which from a venv's
    interpreter would expose the base interpreter's packages instead: a .pth file names this interpreter's own
    site-packages folders (plain paths: their .pth files, an editable odqa's among them, are not run)."""
    root = tmp_path_factory.mktemp("wheel")
    source = _clean_copy(root / "source")
    for folder in [source, *(source / "models" / name for name in MODELS)]:
        _run(
            [
                sys.executable,
                "-m",
                "pip",
                "wheel",
                str(folder),
                "--no-deps",
                "--no-build-isolation",
                "-q",
                "-w",
                str(root / "dist"),
            ]
        )
    (wheel,) = (root / "dist").glob("odqa-*.whl")
    model_wheels = sorted((root / "dist").glob("odqa_model_*.whl"))
    _run([sys.executable, "-m", "venv", "--without-pip", str(root / "venv")])
    python = root / "venv" / "bin" / "python"
    venv_site = Path(
        _run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"]).stdout.strip()
    )
    (venv_site / "odqa-test-dependencies.pth").write_text("".join(f"{p}\n" for p in _dependency_folders()))
    # --ignore-installed: this interpreter may hold an editable odqa; the venv gets its own from the wheel
    _run(
        [
            str(python),
            "-m",
            "pip",
            "install",
            "--no-deps",
            "--ignore-installed",
            "-q",
            str(wheel),
            *map(str, model_wheels),
        ]
    )
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env.update(HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", PATH=f"{python.parent}:{env['PATH']}")
    return python, env, root, wheel


def _clean_copy(target: Path) -> Path:
    """The repository's tracked files (links kept, weights hard-linked), so the builds neither read a stale
    build/ folder of the checkout nor leave build folders in it."""
    listed = subprocess.run(["git", "ls-files", "-z"], cwd=REPO_ROOT, capture_output=True, text=True)
    if listed.returncode != 0:
        pytest.skip("the wheel is built from the repository's tracked files: git and a checkout are needed")
    for name in filter(None, listed.stdout.split("\0")):
        src, dst = REPO_ROOT / name, target / name
        dst.parent.mkdir(parents=True, exist_ok=True)
        if src.is_symlink():
            dst.symlink_to(os.readlink(src))
        elif src.is_file():
            try:
                os.link(src, dst)
            except OSError:  # another filesystem
                shutil.copy2(src, dst)
    return target


def _dependency_folders() -> list[str]:
    """The folders this interpreter imports installed packages from (a venv's own and, where it sees them, the
    base interpreter's), without the source tree."""
    import site

    folders = [*site.getsitepackages(), site.getusersitepackages()]
    return [f for f in dict.fromkeys(folders) if Path(f).is_dir() and Path(f).resolve() != REPO_ROOT]


def test_wheel_runs_outside_the_source_tree(installed, tmp_path):
    python, env, root, _ = installed
    where = _run(
        [
            str(python),
            "-c",
            "import odqa, odqa.core.models as m; print(odqa.__file__); "
            f"print(*(m.shipped_model(name) for name in {MODELS}))",
        ],
        cwd=tmp_path,
        env=env,
    ).stdout.split()
    assert len(where) == 1 + len(MODELS) and "None" not in where, where
    assert all(str(root / "venv") in line for line in where), where  # not the source tree
    assert _run(["odqa", "--version"], cwd=tmp_path, env=env).stdout.strip().startswith("odqa ")
    proc = _run(["odqa", "ask", "--json", "Who discovered penicillin?"], cwd=tmp_path, env=env)
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    assert_answer_read_from(result["answers"][0], result["passages"])
    assert "Penicillin" in {(m["entity"] or {}).get("title") for m in result["mentions"]}  # shipped linker, demo KB
    proc = _run(
        ["odqa", "ask", "--json", "--retriever", "bm25", "--no-linker", "Who painted the Mona Lisa?"],
        cwd=tmp_path,
        env=env,
    )
    assert json.loads(proc.stdout.strip().splitlines()[-1])["answers"]


def test_python_api_from_the_wheel(installed, tmp_path):
    python, env, _, _ = installed
    script = (
        "from odqa import OdqaConfig, Pipeline\n"
        "from odqa.demo_corpus import demo_index_path\n"
        "config = OdqaConfig.load(overrides={'retrieval.retriever': 'bm25', 'linker.enabled': False})\n"
        "pipeline = Pipeline(config, default_index=demo_index_path)\n"
        "result = pipeline.ask('Who discovered penicillin?')\n"
        "print(json.dumps(result.to_dict()))\n"
    )
    result = json.loads(_run([str(python), "-c", "import json\n" + script], cwd=tmp_path, env=env).stdout)
    assert_answer_read_from(result["answers"][0], result["passages"])


OTHER_PROJECTS = ("reader", "retriever", "linker", "indexes")  # names other distributions on PyPI install


def test_the_wheel_installs_only_odqas_own_top_level_names(installed):
    wheel = installed[3]
    with zipfile.ZipFile(wheel) as archive:
        tops = {
            name.split("/")[0]
            for name in archive.namelist()
            if not name.split("/")[0].endswith((".dist-info", ".data"))
        }
    assert tops == {"odqa"}, tops
    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
    assert {f"odqa/{name}/__init__.py" for name in OTHER_PROJECTS} <= names
    assert not any(name.endswith((".safetensors", ".bin", ".onnx")) for name in names)  # no weights in the code


def test_each_shipped_model_is_its_own_wheel_under_pypis_limit(installed):
    dist = installed[3].parent
    wheels = {path.name.split("-")[0]: path for path in dist.glob("odqa_model_*.whl")}
    assert set(wheels) == {"odqa_model_" + name.replace("-", "_") for name in MODELS}, wheels
    for path in [installed[3], *wheels.values()]:
        assert path.stat().st_size < PYPI_FILE_LIMIT, (path.name, path.stat().st_size)
    with zipfile.ZipFile(wheels["odqa_model_reader"]) as archive:
        names = set(archive.namelist())
    assert {"odqa_model_reader/model.safetensors", "odqa_model_reader/README.md"} <= names  # the weights and card


def test_other_projects_of_the_same_names_beside_it_change_nothing(installed, tmp_path):
    python, env, _, _ = installed
    other = tmp_path / "other"
    for name in OTHER_PROJECTS:
        (other / name).mkdir(parents=True)
        (other / name / "__init__.py").write_text(f"raise ImportError('the other project called {name}')\n")
    (other / "pyproject.toml").write_text(
        '[build-system]\nrequires = ["setuptools"]\nbuild-backend = "setuptools.build_meta"\n'
        '[project]\nname = "odqa-test-name-clash"\nversion = "1.0"\n'
        f"[tool.setuptools]\npackages = {list(OTHER_PROJECTS)}\n"
    )
    _run([str(python), "-m", "pip", "install", "--no-deps", "--no-build-isolation", "-q", str(other)], env=env)
    proc = _run(
        ["odqa", "ask", "--json", "--retriever", "bm25", "--no-linker", "Who discovered penicillin?"],
        cwd=tmp_path,
        env=env,
    )
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    assert_answer_read_from(result["answers"][0], result["passages"])
    _run([str(python), "-m", "pip", "uninstall", "-y", "-q", "odqa-test-name-clash"], env=env)
    code = "import odqa.reader.model, odqa.indexes.folder, odqa.linker.linker, odqa.indexes.vector; print('ok')"
    assert _run([str(python), "-c", code], cwd=tmp_path, env=env).stdout.strip() == "ok"


def test_the_wheel_and_the_sdist_carry_every_file_that_is_not_python(installed):
    python, env, root, wheel = installed
    needed = [f"odqa/{name}" for name in package_files()]
    assert "odqa/serve/static/index.html" in needed
    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
    assert not [name for name in needed if name not in names], "left out of the wheel"
    # the sdist, built from the same clean copy (pip builds a wheel from it where no wheel fits)
    (root / "sdist").mkdir(exist_ok=True)
    code = "import sys; from setuptools import build_meta; print(build_meta.build_sdist(sys.argv[1]))"
    built = _run([sys.executable, "-c", code, str(root / "sdist")], cwd=root / "source").stdout.strip().splitlines()[-1]
    with tarfile.open(root / "sdist" / built) as archive:
        top = built.removesuffix(".tar.gz")
        members = {member.name.removeprefix(f"{top}/") for member in archive.getmembers()}
    assert not [name for name in needed if name not in members], "left out of the sdist"


def test_serve_from_the_wheel_serves_the_page_and_answers(installed, tmp_path):
    python, env, _, _ = installed
    port = free_port()
    log = (tmp_path / "serve.log").open("w+")
    server = subprocess.Popen(
        ["odqa", "serve", "--port", str(port), "--no-access-log", "--retriever", "bm25", "--no-linker"],
        cwd=tmp_path,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    try:
        url = f"http://127.0.0.1:{port}"
        wait_until_healthy(url, server, lambda: (tmp_path / "serve.log").read_text()[-3000:])
        page = httpx.get(f"{url}/", timeout=30)
        assert page.status_code == 200 and "text/html" in page.headers["content-type"]
        for asset in ("page.js", "page.css"):
            assert f"/static/{asset}" in page.text
            served = httpx.get(f"{url}/static/{asset}", timeout=30)
            assert served.status_code == 200
            assert served.content == (REPO_ROOT / "odqa" / "serve" / "static" / asset).read_bytes()
        response = httpx.post(f"{url}/ask", json={"question": "Who discovered penicillin?", "k": 3}, timeout=120)
        assert response.status_code == 200, response.text
        result = response.json()
        assert result["passages"] and "answers" in result and result["question"] == "Who discovered penicillin?"
    finally:
        server.send_signal(signal.SIGINT)
        try:
            server.wait(timeout=60)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()
        log.close()
    assert server.returncode == 0, (tmp_path / "serve.log").read_text()[-3000:]


def test_the_wheel_asks_for_the_server_elasticsearch_and_other_bm25_engines_only_as_extras(installed):
    """Issue 64 item 10, on the built wheel's own metadata: its base requirements are what answering needs."""
    with zipfile.ZipFile(installed[3]) as archive:
        metadata = archive.read(next(n for n in archive.namelist() if n.endswith(".dist-info/METADATA"))).decode()
    from packaging.requirements import Requirement

    requires = [
        Requirement(line.split(":", 1)[1]) for line in metadata.splitlines() if line.startswith("Requires-Dist:")
    ]
    base = {r.name.lower() for r in requires if r.marker is None or "extra" not in str(r.marker)}
    for extra, names in {
        "serve": {"fastapi", "uvicorn", "fastapi-offline"},
        "elastic": {"elasticsearch"},
        "bm25-engines": {"bm25s", "rank-bm25"},
    }.items():
        assert not base & names, base & names
        assert names <= {r.name.lower() for r in requires if r.marker and r.marker.evaluate({"extra": extra})}, extra
    assert {"torch", "tantivy", "pystemmer"} <= base


def test_the_missing_model_message_builds_the_wheels_this_test_built(installed):
    """Its commands, run in a checkout, give the wheels found here (issue 64 item 11)."""
    from odqa.core.models import models_install

    dist = installed[3].parent
    for name in MODELS:
        wheel = models_install(name).rsplit("pip install ", 1)[1]
        assert wheel.startswith("dist/") and len(list(dist.glob(wheel.removeprefix("dist/")))) == 1, (name, wheel)
