"""Norm modules torch lacks, as transformers computes them."""

import torch.nn.functional as F
from torch import Tensor, nn


# Gemma's RMSNorm: the scale is 1 + weight (the weight starts at zero), and the whole
# norm runs in float32 before casting back, as transformers' GemmaRMSNorm
# ("(x * w).to(float16)", not LLaMA's "x.to(float16) * w").
class OffsetRMSNorm(nn.RMSNorm):
    """RMSNorm scaling by 1 + weight, its weight starting at zero (Gemma), computed in
    float32 and cast back to the input's dtype, as transformers' GemmaRMSNorm.
    """

    def reset_parameters(self) -> None:
        nn.init.zeros_(self.weight)

    def forward(self, x: Tensor) -> Tensor:
        y = F.rms_norm(x.float(), self.normalized_shape, None, self.eps)
        return (y * (1.0 + self.weight.float())).type_as(x)


# OLMo's LayerNorm: no weight and no bias, computed in float32 and cast back, as
# transformers' OlmoLayerNorm (which hard-codes eps 1e-5; the spec's norm.eps says it).
class NonParametricLayerNorm(nn.LayerNorm):
    """LayerNorm without a learned scale or bias (OLMo), computed in float32 and
    cast back to the input's dtype, as transformers' OlmoLayerNorm.
    """

    def forward(self, x: Tensor) -> Tensor:
        y = F.layer_norm(x.float(), self.normalized_shape, None, None, self.eps)
        return y.type_as(x)


# Nemotron's LayerNorm1P: the scale is 1 + weight (the weight starts at zero), as
# transformers' NemotronLayerNorm1P, which runs F.layer_norm with weight + 1.
class OffsetLayerNorm(nn.LayerNorm):
    """LayerNorm scaling by 1 + weight, its weight starting at zero (Nemotron), as
    transformers' NemotronLayerNorm1P.
    """

    def reset_parameters(self) -> None:
        super().reset_parameters()
        if self.weight is not None:
            nn.init.zeros_(self.weight)

    def forward(self, x: Tensor) -> Tensor:
        return F.layer_norm(
            x, self.normalized_shape, self.weight + 1.0, self.bias, self.eps
        )
