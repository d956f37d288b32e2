"""Packages found as usual, plus models/ installed as `odqa_models` (pyproject's find cannot rename a folder).

Folders of data inside the packages (odqa/demo, the models' folders) are listed as packages too: setuptools
installs their files (package-data) and would otherwise warn that they look importable but are not configured."""

from setuptools import find_namespace_packages, setup

CODE = ["odqa*", "retriever*", "reader*", "linker*", "indexes*"]


def _importable(name: str) -> bool:
    return all(part.isidentifier() and part != "__pycache__" for part in name.split("."))


setup(
    packages=[name for name in find_namespace_packages(include=CODE) if _importable(name)]
    + ["odqa_models"] + [f"odqa_models.{name}" for name in find_namespace_packages(where="models") if _importable(name)],
    package_dir={"odqa_models": "models"},
)
