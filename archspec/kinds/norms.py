"""Norm kinds: everything archspec knows about one normalisation layer, in one object.

A backend never compares a norm's name: it asks the kind for its parameters, its FLOPs per
element, what autograd keeps for its backward, the PyTorch module that implements it and the
line `print(model)` shows for it.
"""

from __future__ import annotations

from dataclasses import dataclass

FP32 = 4


@dataclass(frozen=True)
class NormKept:
    """Bytes per element of what a norm keeps for backward (`NormKind.kept_bytes`)."""

    input_copy: int | None  # an fp32 copy of the input it keeps instead of it; None: the input
    statistic: int  # each per-row statistic (mean, 1/std, 1/rms)
    normalised: int  # the normalised input, where the kind keeps it
    scale: int  # the scale it computes from its weight, where the kind keeps it


@dataclass(frozen=True)
class NormKind:
    name: str  # the spec's word for it (schema literal)
    label: str  # in tables and diagrams
    torch_class: str  # the torch.nn module the generated code builds (also its repr name)
    flops_per_element: int  # without the bias add
    bias_by_default: bool  # `norm.bias` when the spec leaves it out
    allows_bias: bool
    keeps_normalised: bool  # autograd keeps the normalised input too (for the scale's gradient)
    row_statistics: int  # values kept per row (mean, 1/std, 1/rms; their dtype: kept_bytes)
    # autograd keeps the scale the norm computes from its weight (Gemma's 1 + w, float32)
    keeps_scale: bool = False
    min_torch: str | None = None  # the torch release that added the module, if recent
    # A module the generated file defines itself, where torch has none: the class of that name
    # (`torch_class`) in archspec.runtime.norms, copied in; `base` is the torch module it extends.
    own: bool = False
    base: str | None = None
    # A learned scale (`weight`, and `bias` where allowed); False: no parameters at all (OLMo's
    # "non-parametric layer norm"), so a module of this kind owns no tensor.
    affine: bool = True
    # With a bf16 (fp16) input on the CPU, whether the norm computes in fp32: torch's rms_norm
    # upcasts its input there (rms_norm_symint calls _fused_rms_norm, on the CPU the composite
    # `input.to(float32)`, then pow, rsqrt and mul, as autograd's saved tensors show), Gemma's
    # and OLMo's norms call `.float()` themselves. False: native_layer_norm works on the input
    # as it is. See `kept_bytes`. (On a GPU _fused_rms_norm is a kernel of its own whose
    # backward reads the input and 1/rms alone: not measured here, count keeps its figure.)
    upcasts_on_cpu: bool = False

    def kept_bytes(self, compute: int, device: str) -> NormKept:
        """What autograd keeps for the norm's backward, in bytes per element, for an input of
        `compute` bytes on `device` (measured with saved_tensors_hooks on torch 2.13's CPU
        kernels, tests/test_mixed_precision_saved.py). In fp32 on any device: the input itself,
        fp32 statistics, the normalised input in fp32 and the scale in fp32. With bf16 compute
        on the CPU, a norm that upcasts keeps an fp32 copy of its input (a storage of its own;
        the bf16 input is not kept) and everything else in fp32; native_layer_norm keeps its
        mean and 1/std in the input's dtype (its CPU kernel accumulates in fp32 only for a
        weight wider than the input: FSDP2's mixed precision casts the weight to bf16 too)
        and the scale it is given, w + 1, in the weights' dtype. On a GPU the statistics are
        fp32 (the CUDA kernels' accumulate type), as count keeps them in every dtype; bf16
        norms on a GPU are not measured here."""
        if compute == FP32 or device != "cpu":
            return NormKept(None, FP32, compute, FP32)
        if self.upcasts_on_cpu:
            return NormKept(FP32, FP32, FP32, FP32)
        return NormKept(None, compute, compute, compute)

    @property
    def constructor(self) -> str:
        """What the generated code calls: `nn.LayerNorm`, or a class of the file's own."""
        return self.torch_class if self.own else f"nn.{self.torch_class}"

    @property
    def requires(self) -> str:
        """The torch module the kind needs (for the file's torch-version note)."""
        return f"nn.{self.base or self.torch_class}"

    def weight_shape(self, dim):
        return (dim,) if self.affine else None

    def bias_shape(self, dim, bias: bool):
        return (dim,) if bias and self.affine else None

    def parameters(self, dim, bias: bool):
        """The parameters of one module over `dim` channels: 2·dim, dim or none."""
        return dim * ((2 if bias else 1) if self.affine else 0)

    def constructor_args(self, dim: str, bias: bool, eps: float | None = None) -> list[str]:
        """Arguments of `nn.<torch_class>(...)` beyond PyTorch's defaults. `eps`: a norm whose
        epsilon is not the Config's `norm_eps` (DeepSeek's latent norms keep 1e-6 whatever
        `rms_norm_eps` says) states its own."""
        args = [dim, "eps=config.norm_eps" if eps is None else f"eps={eps!r}"]
        if not self.affine:
            args.append("elementwise_affine=False")
        elif self.allows_bias and not bias:
            args.append("bias=False")
        return args

    def extra_repr(self, dim: int, eps: float, bias: bool, prints_bias: bool) -> str:
        """The module's `extra_repr()`: torch stores normalized_shape as a tuple, and eps goes
        through str.format, which writes a float as repr does (1e-05). `prints_bias`: the
        installed torch's LayerNorm repr ends with `bias=` (newer releases)."""
        text = f"({dim},), eps={eps}, elementwise_affine={self.affine}"
        if (self.allows_bias or not self.affine) and prints_bias:
            text += f", bias={bias and self.affine}"
        return text


NORMS: dict[str, NormKind] = {
    kind.name: kind
    for kind in (
        NormKind(
            name="layernorm",
            label="LayerNorm",
            torch_class="LayerNorm",
            # mean (add), centre (sub), variance (mul, add), normalise (mul), scale (mul)
            flops_per_element=6,
            bias_by_default=True,
            allows_bias=True,
            keeps_normalised=False,
            row_statistics=2,
        ),
        NormKind(
            name="rmsnorm",
            label="RMSNorm",
            torch_class="RMSNorm",
            # square (mul), mean (add), normalise (mul), scale (mul)
            flops_per_element=4,
            bias_by_default=False,
            allows_bias=False,
            keeps_normalised=True,
            row_statistics=1,
            min_torch="2.4",
            upcasts_on_cpu=True,
        ),
        NormKind(
            name="offset_rmsnorm",
            label="RMSNorm (1 + w)",
            torch_class="OffsetRMSNorm",
            # square (mul), mean (add), normalise (mul), 1 + w (add), scale (mul)
            flops_per_element=5,
            bias_by_default=False,
            allows_bias=False,
            keeps_normalised=True,
            row_statistics=1,
            keeps_scale=True,  # y * (1 + w) keeps 1 + w for the gradient of y
            min_torch="2.4",
            upcasts_on_cpu=True,
            own=True,
            base="RMSNorm",
        ),
        NormKind(
            name="nonparametric_layernorm",
            label="LayerNorm (no parameters)",
            torch_class="NonParametricLayerNorm",
            # mean (add), centre (sub), variance (mul, add), normalise (mul): no scale
            flops_per_element=5,
            bias_by_default=False,
            allows_bias=False,
            keeps_normalised=False,
            row_statistics=2,
            own=True,
            base="LayerNorm",
            affine=False,
            upcasts_on_cpu=True,
        ),
        NormKind(
            name="offset_layernorm",
            label="LayerNorm (1 + w)",
            torch_class="OffsetLayerNorm",
            # mean (add), centre (sub), variance (mul, add), normalise (mul), 1 + w (add),
            # scale (mul)
            flops_per_element=7,
            bias_by_default=True,
            allows_bias=True,
            keeps_normalised=False,
            row_statistics=2,
            keeps_scale=True,  # layer_norm keeps its weight, 1 + w, for the input's gradient
            own=True,
            base="LayerNorm",
        ),
    )
}
