"""The performance model and scalability optimizer of Yan et al., KDD 2015.

*Performance Modeling and Scalability Optimization of Distributed Deep Learning Systems*,
sections 4 and 5. Pure: plain arithmetic on frozen dataclasses; no torch, no I/O.

- :mod:`~simcore.analytic.yan.model`: inputs (layers, hardware constants, configurations);
- :mod:`~simcore.analytic.yan.cost`: the epoch time and its breakdown;
- :mod:`~simcore.analytic.yan.optimizer`: exhaustive and polynomial (greedy + DP) searches;
- :mod:`~simcore.analytic.yan.networks`: the paper's MNIST and ImageNet-22K networks.
"""

from simcore.analytic.yan.cost import EpochTime, epoch_time
from simcore.analytic.yan.model import (
    Configuration,
    HardwareConstants,
    Layer,
    LayerPlan,
    Network,
)
from simcore.analytic.yan.networks import imagenet22k, mnist
from simcore.analytic.yan.optimizer import (
    SearchResult,
    SearchSpace,
    exhaustive_search,
    polynomial_search,
)

__all__ = [
    "Configuration",
    "EpochTime",
    "HardwareConstants",
    "Layer",
    "LayerPlan",
    "Network",
    "SearchResult",
    "SearchSpace",
    "epoch_time",
    "exhaustive_search",
    "imagenet22k",
    "mnist",
    "polynomial_search",
]
