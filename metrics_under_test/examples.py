"""Two worked examples of your own metric; copy one to start. Both run offline.

    pytest --metric=metrics_under_test.examples:laplacian_variance
    pytest --metric=metrics_under_test.examples:NoiseSigma

They are also installed under the entry point group `banana_tests.metrics`, so
`--metric=laplacian_variance,noise_sigma` finds them by name.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from metrics_under_test.protocol import Image, metric

_LUMA = np.array([0.299, 0.587, 0.114], dtype=np.float64)  # ITU-R BT.601, on 0..255


@metric("laplacian_variance", lower_better=False, score_range=(0.0, 2000.0), cost="fast")
def laplacian_variance(images: Sequence[Image]) -> list[float]:
    """Sharpness: the variance of the 4-neighbour Laplacian of luminance (Pech-Pacheco et al., 2000).

    Higher is sharper. On 0..255 luminance, blurred photographs score below ~100 and sharp
    ones a few hundred to ~2000, hence the typical range (0, 2000). Noise raises it too: a
    classical measure that cannot tell detail from noise, which is what the suite is for.
    """
    scores = []
    for img in images:
        y = img.astype(np.float64) @ _LUMA
        lap = y[:-2, 1:-1] + y[2:, 1:-1] + y[1:-1, :-2] + y[1:-1, 2:] - 4.0 * y[1:-1, 1:-1]
        scores.append(float(lap.var()))
    return scores


class NoiseSigma:
    """Gaussian noise level σ (on 0..255) by Immerkær's fast estimator (CVIU 64(2), 1996).

    A fixed 3×3 convolution, the difference of two Laplacians, cancels image structure up to
    second order; the mean absolute response, scaled by sqrt(π/2)/6, estimates σ. A torch
    module with a constant kernel: no training, no download, deterministic. Lower is better;
    clean photographs sit near 1-3, visibly noisy ones reach 10-20, hence the range (0, 20).
    """

    name = "noise_sigma"
    lower_better = True
    score_range = (0.0, 20.0)
    cost = "fast"
    version = "1"

    def __init__(self, device: str = "cpu") -> None:
        import torch

        kernel = torch.tensor([[1.0, -2.0, 1.0], [-2.0, 4.0, -2.0], [1.0, -2.0, 1.0]])
        self._torch = torch
        self.device = torch.device(device)
        self.module = torch.nn.Conv2d(1, 1, 3, bias=False).requires_grad_(False)
        self.module.weight.copy_(kernel.view(1, 1, 3, 3))
        self.module.to(self.device).eval()
        self._luma = torch.tensor(_LUMA, dtype=torch.float32, device=self.device)

    def __call__(self, images: Sequence[Image]) -> list[float]:
        torch = self._torch
        scores = [0.0] * len(images)
        by_shape: dict[tuple[int, ...], list[int]] = {}
        for i, img in enumerate(images):
            by_shape.setdefault(img.shape, []).append(i)
        with torch.inference_mode():
            for positions in by_shape.values():
                batch = torch.from_numpy(np.stack([images[i] for i in positions])).to(self.device)
                luma = (batch.float() @ self._luma).unsqueeze(1)  # N×1×H×W
                response = self.module(luma).abs().mean(dim=(1, 2, 3))
                sigma = response * math.sqrt(math.pi / 2) / 6.0
                for i, s in zip(positions, sigma.tolist(), strict=True):
                    scores[i] = float(s)
        return scores
