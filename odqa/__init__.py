"""odqa: open-domain question answering (entity linking, BM25 + dense retrieval, extractive reading).

    from odqa import OdqaConfig, Pipeline
    answer = Pipeline(OdqaConfig()).ask("Who discovered penicillin?").answers[0]
"""

__version__ = "0.1.0"

from odqa.config import OdqaConfig  # noqa: E402  (after __version__, which the build reads)
from odqa.pipeline import Pipeline, Result  # noqa: E402

__all__ = ["OdqaConfig", "Pipeline", "Result", "__version__"]
