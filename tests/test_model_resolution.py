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


@pytest.fixture(autouse=True)
def _fresh_lookup():
    """Each test reads the installed models again, and leaves no patched lookup behind."""
    models.installed_models.cache_clear()
    yield
    models.installed_models.cache_clear()
