"""Packages found as usual, plus models/ installed as `odqa_models` (pyproject's find cannot rename a folder)."""

from setuptools import find_packages, setup

setup(
    packages=find_packages(include=["odqa*", "retriever*", "reader*", "linker*", "indexes*"]) + ["odqa_models"],
    package_dir={"odqa_models": "models"},
)
