"""odqa: open-domain question answering (entity linking, BM25 + dense retrieval, extractive reading).

    from odqa import OdqaConfig, Pipeline
    answer = Pipeline(OdqaConfig.load(overrides={"index": "my-index"})).ask("Who discovered penicillin?").answers[0]

(odqa.demo_corpus's demo_index_path / demo_kb_path, passed as default_index / default_kb, give the demo corpus.)
"""

__version__ = "0.1.0"

__all__ = ["OdqaConfig", "Pipeline", "Result", "__version__"]

# Loaded on first use: importing a base module (odqa.core.*) must not pull in the application layer.
_LAZY = {"OdqaConfig": "odqa.config", "Pipeline": "odqa.pipeline", "Result": "odqa.pipeline"}


def __getattr__(name: str):
    if name in _LAZY:
        import importlib

        value = getattr(importlib.import_module(_LAZY[name]), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'odqa' has no attribute {name!r}")


def __dir__():
    return sorted(list(globals()) + [n for n in _LAZY if n not in globals()])
