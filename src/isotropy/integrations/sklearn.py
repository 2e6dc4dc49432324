"""scikit-learn: sentences as the first step of a pipeline (layer 5).

The transforms follow the estimator contract (``get_params``, ``set_params``, ``clone``,
``fit`` returns self, not-fitted errors), so ``make_pipeline(Whitening(256),
LogisticRegression())`` works on vectors. :class:`SentenceEncoder` is the missing first
step for text: a stateless transformer from sentences to vectors, so a pipeline can start
from raw text: ``make_pipeline(SentenceEncoder(pooling="first-last-avg"), Whitening(256),
LogisticRegression())``. scikit-learn is a core dependency: the transforms derive from its
``BaseEstimator`` and ``TransformerMixin``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from .._params import EstimatorParams
from ..errors import IsotropyError

__all__ = ["SentenceEncoder"]


class SentenceEncoder(EstimatorParams):
    """scikit-learn transformer from sentences to vectors: an :class:`isotropy.encoders.Encoder` as a pipeline step.

    Stateless (``fit`` only loads the model), so it can lead a pipeline:
    ``make_pipeline(SentenceEncoder(), Whitening(256), LogisticRegression())``.
    Parameters are the Encoder's.
    """

    def __init__(self, model=None, pooling=None, max_length=None, batch_size=64, device=None, backend="torch"):
        self.model = model
        self.pooling = pooling
        self.max_length = max_length
        self.batch_size = batch_size
        self.device = device
        self.backend = backend

    def set_params(self, **params: Any) -> SentenceEncoder:
        super().set_params(**params)
        self.__dict__.pop("encoder_", None)  # the loaded model no longer matches the parameters
        return self

    def fit(self, X: Any = None, y: Any = None) -> SentenceEncoder:
        from ..encoders import Encoder

        self.encoder_ = Encoder(**self.get_params(deep=False))  # the parameters are the Encoder's, by name
        self.n_features_out_ = int(self.encoder_.dim)
        return self

    def transform(self, X: Sequence[str]) -> np.ndarray:
        if not hasattr(self, "encoder_"):
            self.fit()
        if isinstance(X, str):
            raise IsotropyError("SentenceEncoder.transform takes a list of sentences, not one string")
        sentences = [x[0] if isinstance(x, (list, tuple, np.ndarray)) and len(x) == 1 else x for x in list(X)]
        return self.encoder_.encode(sentences)

    def fit_transform(self, X: Sequence[str], y: Any = None) -> np.ndarray:
        return self.fit(X).transform(X)

    def __sklearn_tags__(self):
        from sklearn.utils import InputTags, Tags, TargetTags, TransformerTags

        return Tags(
            estimator_type=None,
            target_tags=TargetTags(required=False),
            transformer_tags=TransformerTags(preserves_dtype=[]),
            input_tags=InputTags(two_d_array=False, string=True),
            requires_fit=False,
        )
