"""The two networks of Yan et al. (KDD'15) section 6.1, as layer descriptions.

The paper gives only their outline (layer kinds and total connections); the per-layer sizes
below are our assumptions, chosen to match that outline, and stated per network. Pooling is
folded into the convolution before it, as the paper counts layers. Rows are the partitioned
dimension: a convolution's ``receptive_fraction`` is its kernel rows over its input rows.
"""

from __future__ import annotations

from simcore.analytic.yan.model import Layer, Network

MNIST_TRAIN_SAMPLES = 60_000  # the paper, section 6.1
IMAGENET22K_TRAIN_SAMPLES = 15_000_000  # "over 15 million images" (section 6.1)


def _conv(name: str, rows: int, maps: int, kernel: int, in_maps: int, in_rows: int) -> Layer:
    """A square convolution producing ``rows`` x ``rows`` x ``maps`` outputs."""
    neurons = rows * rows * maps
    fan_in = kernel * kernel * in_maps
    return Layer(name, "conv", neurons, neurons * fan_in, maps * (fan_in + 1), kernel / in_rows)


def _fc(name: str, inputs: int, outputs: int) -> Layer:
    return Layer(name, "fc", outputs, inputs * outputs, (inputs + 1) * outputs)


def mnist() -> Network:
    """MNIST: 2 convolutional, 2 linear layers and a 10-way softmax, about 2.5 M connections.

    Assumed sizes (the paper and Adam [Chilimbi et al., OSDI'14] give only the outline):
    28x28 input; conv 5x5 -> 20 maps of 24x24; conv 5x5 (stride 2, pooled) -> 32 maps of
    10x10; linear 3200 -> 200; linear 200 -> 200; softmax 200 -> 10: 2.57 M connections.
    """
    layers = (
        _conv("conv1", 24, 20, 5, 1, 28),
        _conv("conv2", 10, 32, 5, 20, 24),
        _fc("fc1", 3200, 200),
        _fc("fc2", 200, 200),
        _fc("softmax", 200, 10),
    )
    return Network("mnist", layers, MNIST_TRAIN_SAMPLES)


def imagenet22k() -> Network:
    """ImageNet-22K: 5 convolutional, 2 linear layers and a 22,000-way softmax, > 2 G connections.

    Assumed sizes: an AlexNet-shaped stack [Krizhevsky et al., NIPS'12] without grouping and
    with wider maps (128-384-512-512-320) so that the total passes 2 billion connections, as
    the paper says of Adam's model: 224x224x3 input; conv 11x11/4 -> 55x55x128; conv 5x5
    (pooled input) -> 27x27x384; three conv 3x3 -> 13x13 x 512, 512, 320; linear
    6x6x320 -> 4096; linear 4096 -> 4096; softmax 4096 -> 22,000: 2.14 G connections.
    """
    layers = (
        _conv("conv1", 55, 128, 11, 3, 224),
        _conv("conv2", 27, 384, 5, 128, 27),
        _conv("conv3", 13, 512, 3, 384, 13),
        _conv("conv4", 13, 512, 3, 512, 13),
        _conv("conv5", 13, 320, 3, 512, 13),
        _fc("fc1", 6 * 6 * 320, 4096),
        _fc("fc2", 4096, 4096),
        _fc("softmax", 4096, 22_000),
    )
    return Network("imagenet22k", layers, IMAGENET22K_TRAIN_SAMPLES)
