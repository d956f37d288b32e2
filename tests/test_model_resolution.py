"""Shipped models by name (issue 50 item 2): models/NAME of a checkout, else the distribution that declares NAME
under the `odqa.models` entry points, else one line saying how to install it."""

from __future__ import annotations

import pytest

import odqa.core.models as models
from odqa.core.errors import OdqaError


def test_a_checkout_reads_its_models_folder():
    for name in models.SHIPPED_NAMES:
        assert models.shipped_model(name) == models.SHIPPED_MODELS / name
        assert models.resolve_model(name) == str(models.SHIPPED_MODELS / name)


def test_an_installed_model_distribution_is_found_through_its_entry_point(tmp_path, monkeypatch):
    from importlib.metadata import EntryPoint

    folder = tmp_path / "site" / "odqa_model_reader"
    folder.mkdir(parents=True)
    (folder / "config.json").write_text("{}")
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    monkeypatch.setattr(models, "SHIPPED_MODELS", tmp_path / "no-checkout")
    entry = EntryPoint(name="reader", value="odqa_model_reader", group=models.MODEL_ENTRY_POINTS)
    monkeypatch.setattr("importlib.metadata.entry_points", lambda group=None: [entry] if group == entry.group else [])
    assert models.shipped_model("reader") == folder and models.resolve_model("reader") == str(folder)


def test_a_shipped_model_neither_in_the_checkout_nor_installed_says_how_to_install_it(tmp_path, monkeypatch):
    monkeypatch.setattr(models, "SHIPPED_MODELS", tmp_path / "no-checkout")
    monkeypatch.setattr("importlib.metadata.entry_points", lambda group=None: [])
    monkeypatch.chdir(tmp_path)
    with pytest.raises(OdqaError, match=r"shipped model 'linker' is not installed: pip install 'odqa\[models\]'"):
        models.resolve_model("linker")


def test_the_install_hint_names_commands_that_exist_where_no_index_has_the_model_wheels(tmp_path, monkeypatch):
    """`pip install 'odqa[models]'` alone fails where no package index has the odqa-model-* wheels (issue 64 item
    11): the message also says how to build them from a checkout, with commands that work as written there."""
    import shlex

    monkeypatch.setattr(models, "SHIPPED_MODELS", tmp_path / "no-checkout")
    monkeypatch.setattr("importlib.metadata.entry_points", lambda group=None: [])
    monkeypatch.chdir(tmp_path)
    with pytest.raises(OdqaError) as caught:
        models.resolve_model("reader-multilingual")
    message = str(caught.value)
    assert "where your package index has the odqa-model-* wheels" in message
    build = message.split("checkout of odqa's source: ", 1)[1].split(";")[0]
    wheel, install = (shlex.split(part) for part in build.split(" && "))
    assert wheel == ["pip", "wheel", "models/reader-multilingual", "--no-deps", "-w", "dist"]
    assert (models.REPO_ROOT / wheel[2] / "pyproject.toml").is_file()  # a folder pip can build
    assert install[:2] == ["pip", "install"] and install[2] == "dist/odqa_model_reader_multilingual-*.whl"
    from tests.packaging_files import project

    assert any(r.startswith("odqa-model-reader-multilingual==") for r in project()["optional-dependencies"]["models"])
    every = models.models_install()
    assert 'for m in models/*/; do pip wheel "$m" --no-deps -w dist; done' in every  # as docs/install.md builds them


class NoNetwork:
    """Stands in for socket.getaddrinfo: records each host asked for and fails as an offline machine does."""

    def __init__(self) -> None:
        self.hosts: list[str] = []

    def __call__(self, host, *args, **kwargs):
        self.hosts.append(host)
        raise OSError(-2, "Name or service not known (no network in this test)")


@pytest.fixture
def no_network(monkeypatch):
    import socket

    from huggingface_hub import constants

    lookups = NoNetwork()
    monkeypatch.setattr(socket, "getaddrinfo", lookups)
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)  # online, as a user without the setting
    models.check_hub_name.cache_clear()
    yield lookups
    models.check_hub_name.cache_clear()


@pytest.mark.parametrize(
    "name, refusal",
    [
        ("reder", "unknown model 'reder' (did you mean 'reader'?)"),
        ("retreiver", "unknown model 'retreiver' (did you mean 'retriever'?)"),
        ("./no/such/model", "no model folder at './no/such/model'"),
        ("/no/such/model", "no model folder at '/no/such/model'"),
        ("models/reder", "no model folder at 'models/reder'"),  # models/ is a folder here: a path, not a hub name
    ],
)
def test_a_mistyped_name_or_missing_path_is_refused_at_once_without_the_hub(name, refusal, no_network, monkeypatch):
    """Issue 64 item 11: `--reader reder` spent a minute in the hub library's retries offline."""
    monkeypatch.chdir(models.REPO_ROOT)
    with pytest.raises(OdqaError) as caught:
        models.resolve_model(name)
    message = str(caught.value)
    assert refusal in message and "\n" not in message
    assert all(shipped in message for shipped in models.SHIPPED_NAMES)
    assert no_network.hosts == []


def test_a_hub_name_is_asked_once_without_retries_and_refused_offline(no_network, monkeypatch):
    import huggingface_hub
    from huggingface_hub import constants

    asked = []

    def metadata(url, timeout=None, **kwargs):  # the hub library's HEAD request, failing as offline
        asked.append((url, timeout, kwargs.get("retry_on_errors", False)))
        raise ConnectionError("no network in this test")

    monkeypatch.setattr(huggingface_hub, "get_hf_file_metadata", metadata)
    with pytest.raises(
        OdqaError,
        match="'someone/no-such-model' is neither a model folder nor in the local Hugging "
        "Face cache, and the Hugging Face hub did not answer",
    ) as caught:
        models.resolve_model("someone/no-such-model")
    assert "reader-multilingual" in str(caught.value)
    assert len(asked) == 1 and "someone/no-such-model" in asked[0][0]  # one request
    assert asked[0][1:] == (models.HUB_CHECK_TIMEOUT_S, False)  # short, not retried
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)
    models.check_hub_name.cache_clear()
    with pytest.raises(OdqaError, match="the hub is switched off"):
        models.resolve_model("someone/other-model")
    assert len(asked) == 1 and no_network.hosts == []
    assert models.model_fingerprint("someone/other-model")  # a digest of a hub name asks nothing


def test_a_hub_name_in_the_local_cache_resolves_without_the_network(tmp_path, no_network, monkeypatch):
    from huggingface_hub import constants

    (tmp_path / "models--someone--cached-model" / "snapshots" / "abc123").mkdir(parents=True)
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(tmp_path))
    assert models.resolve_model("someone/cached-model") == "someone/cached-model"
    assert no_network.hosts == []


@pytest.mark.subprocess
def test_the_command_line_refuses_a_mistyped_reader_in_one_line_without_the_network(tmp_path):
    import json
    import os
    import subprocess
    import sys

    data = tmp_path / "squad.json"
    data.write_text(
        json.dumps(
            {
                "data": [
                    {
                        "title": "T",
                        "paragraphs": [
                            {
                                "context": "Fleming found it.",
                                "qas": [
                                    {
                                        "id": "1",
                                        "question": "Who found it?",
                                        "answers": [{"text": "Fleming", "answer_start": 0}],
                                    }
                                ],
                            }
                        ],
                    }
                ]
            }
        )
    )
    code = (
        "import socket, sys\n"
        "def offline(host, *a, **k):\n"
        "    print('NETWORK', host, file=sys.stderr)\n"
        "    raise OSError(-2, 'no network')\n"
        "socket.getaddrinfo = offline\n"
        "from odqa.cli import main\n"
        f"sys.exit(main(['eval-reader', '--data', {str(data)!r}, '--model', 'reder']))\n"
    )
    env = {k: v for k, v in os.environ.items() if k not in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")}
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=models.REPO_ROOT, capture_output=True, text=True, timeout=300, env=env
    )
    errors = [line for line in out.stderr.splitlines() if line.startswith("odqa: error")]
    assert out.returncode == 2 and len(errors) == 1, out.stderr[-2000:]
    assert "unknown model 'reder'" in errors[0] and "reader-multilingual" in errors[0]
    assert "NETWORK" not in out.stderr and "Retrying" not in out.stderr


@pytest.fixture(autouse=True)
def _fresh_lookup():
    """Each test reads the installed models again, and leaves no patched lookup behind."""
    models.installed_models.cache_clear()
    yield
    models.installed_models.cache_clear()


def test_the_shipped_model_names_are_written_once():
    """odqa.core.models.SHIPPED_NAMES is the list of shipped models; what names them again must agree with it: the
    `models` extra (one pinned distribution each, in its order), models/ (one buildable folder each, declaring its
    distribution and its entry point) and docs/install.md (each distribution)."""
    import re
    import sys

    from tests.packaging_files import project

    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover
        import tomli as tomllib

    extra = project()["optional-dependencies"]["models"]
    assert [re.split(r"[=<>~!\[; ]", requirement)[0] for requirement in extra] == [
        f"odqa-model-{name}" for name in models.SHIPPED_NAMES
    ]
    folders = sorted(path.parent.name for path in (models.REPO_ROOT / "models").glob("*/pyproject.toml"))
    assert folders == sorted(models.SHIPPED_NAMES)
    for name in models.SHIPPED_NAMES:
        with (models.REPO_ROOT / "models" / name / "pyproject.toml").open("rb") as f:
            model_project = tomllib.load(f)["project"]
        assert model_project["name"] == f"odqa-model-{name}"
        assert list(model_project["entry-points"][models.MODEL_ENTRY_POINTS]) == [name]
        # the extra pins the version this checkout builds, so `pip install 'odqa[models]'` finds the wheels built here
        assert f"odqa-model-{name}=={model_project['version']}" in extra, (name, model_project["version"], extra)
    install = " ".join((models.REPO_ROOT / "docs" / "install.md").read_text(encoding="utf-8").split())
    for name in models.SHIPPED_NAMES:
        assert f"`-{name}`" in install or f"`odqa-model-{name}`" in install, name
    from odqa.reader.settings import SHIPPED_READERS

    assert set(SHIPPED_READERS) <= set(models.SHIPPED_NAMES) and models.DEFAULT_ENCODER in models.SHIPPED_NAMES
