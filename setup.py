"""The `odqa` package. The shipped models are not in it: each folder of models/ is its own distribution
(models/NAME/pyproject.toml, `odqa-model-NAME`), so the code wheel carries no weights.

The components keep their folders at the top of the repository (reader/, retriever/, linker/, indexes/) and are
imported as odqa.reader, odqa.retriever, ... through the links odqa/reader -> ../reader etc., so the checkout, the
editable install and the wheel import the same names and nothing is installed outside `odqa`: those four names
belong to other projects on PyPI.

Folders of data inside the package (odqa/demo) are listed as packages too: setuptools installs their files
(package-data) and would otherwise warn that they look importable but are not configured."""

from setuptools import find_namespace_packages, setup

CODE = ["odqa", "odqa.*"]


def _importable(name: str) -> bool:
    return all(part.isidentifier() and part != "__pycache__" for part in name.split("."))


setup(packages=[name for name in find_namespace_packages(include=CODE) if _importable(name)])
