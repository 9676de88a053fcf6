"""The measure of issue 28 for one decoder family, against transformers' own classes.

`tests/test_hf_zoo_*.py` list, per family, a public config.json of a real size and a tiny
config; these functions check that the real size counts like the transformers class on the
meta device, and that a tiny random model saved by transformers imports (`import-hf`), loads
(`load_weights`) and gives the same logits (fp32, a right-padded batch), the same 16 greedy
tokens, the same printed module tree and the same forward matmul FLOPs (FlopCounterMode).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import sympy as sp
import torch

from archspec.backends.count.conventions import CONVENTIONS
from archspec.backends.count.flops import B, S, flop_figures
from archspec.backends.count.params import parameter_count
from archspec.backends.printer import module_repr
from archspec.hf.classes import hf_class
from archspec.hf.import_config import import_config
from archspec.hf.weights import load_weights
from archspec.ir.build import build_ir
from archspec.spec.resolve import load_spec
from tests.test_hf_weights import VOCAB, assert_close, batch, generated, greedy_hf

GREEDY_TOKENS = 16


def hf_config(cls: str, fields: dict[str, Any]):
    """The transformers class and its config for a tiny model."""
    import transformers

    config = transformers.AutoConfig.for_model(**{"vocab_size": VOCAB, **fields})
    config.architectures = [cls]
    return getattr(transformers, cls), config


def tiny_model(cls: str, fields: dict[str, Any]):
    model_cls, config = hf_config(cls, fields)
    torch.manual_seed(0)
    model = model_cls(config).eval()
    with torch.no_grad():
        # transformers starts biases at zero and norm weights at one (or zero, for offset
        # norms), where a tensor loaded into the wrong place would go unseen: draw them.
        # Small biases and norm scales near one keep the tiny model's greedy tokens varied.
        for key, param in model.named_parameters():
            if "norm" in key and not key.endswith(".bias"):
                param.normal_(1.0, 0.3)
            elif key.endswith((".bias", "_bias")) or "correction" in key:
                param.normal_(0.0, 0.1)  # gpt-oss's stacked experts' biases end in _bias
            elif key.endswith(".sinks"):  # gpt-oss's sink logits, comparable to the scores
                param.normal_(0.0, 0.3)
        # DeepSeek-V3's router bias correction, a buffer (zero, it would choose nothing)
        for key, buffer in model.named_buffers():
            if "correction" in key:
                buffer.normal_(0.0, 0.1)
    return model


def real_total_equals_transformers(config: dict[str, Any]) -> tuple[int, int]:
    """(archspec's total, transformers' on the meta device) for a full-size config.json."""
    import transformers

    ir = build_ir(import_config(config).spec)
    fields = {k: v for k, v in config.items() if k != "architectures"}
    with torch.device("meta"):
        cls = hf_class(config["architectures"][0]).transformers_name
        model = getattr(transformers, cls)(transformers.AutoConfig.for_model(**fields))
    return ir.value(parameter_count(ir.root)), sum(p.numel() for p in model.parameters())


def check_logits_and_tokens(
    cls: str, fields: dict[str, Any], tmp_path: Path, frozen: int = 0
) -> None:
    """`frozen`: the parameters transformers holds but does not train (ERNIE 4.5's router
    corrections), which archspec keeps as buffers."""
    hf = tiny_model(cls, fields)
    hf.save_pretrained(tmp_path / "checkpoint")
    module, spec = generated(tmp_path / "checkpoint", tmp_path)
    model = load_weights(module.Model().eval(), tmp_path / "checkpoint")
    assert repr(model) == module_repr(build_ir(load_spec(spec)))
    trainable = sum(p.numel() for p in hf.parameters() if p.requires_grad)
    assert sum(p.numel() for p in hf.parameters()) - trainable == frozen
    assert sum(p.numel() for p in model.parameters()) == trainable
    ids, mask = batch(0)
    real = mask.bool()
    with torch.no_grad():
        ref = hf(input_ids=ids, attention_mask=mask).logits
        assert_close(model(ids, mask)[real], ref[real])
        prompt = torch.randint(3, VOCAB, (2, 5))
        ours = model.generate(prompt, GREEDY_TOKENS)
        assert torch.equal(ours, greedy_hf(hf, prompt, GREEDY_TOKENS))
        assert len(set(ours[:, 5:].flatten().tolist())) > 2  # not one repeated token


def check_forward_matmul_flops(cls: str, fields: dict[str, Any], b: int = 2, s: int = 24) -> None:
    from torch.utils.flop_counter import FlopCounterMode

    hf = tiny_model(cls, fields)
    experts = ("num_experts", "num_local_experts", "n_routed_experts", "moe_num_experts")
    if any(getattr(hf.config, name, None) for name in experts):
        # transformers 5 runs the experts through torch._grouped_mm by default, for which
        # FlopCounterMode has no formula: the loop over experts computes the same products
        # with F.linear, which it counts (each token through its top_k experts).
        hf.set_experts_implementation("eager")
    # on the CPU, FlopCounterMode counts the products of eager attention, not SDPA's kernel
    hf.set_attn_implementation("eager")
    # DBRX's experts pass views of their parameters to a module: made under no_grad, such a
    # view still requires grad but has no grad_fn, which FlopCounterMode's module tracker
    # cannot hook. Frozen parameters compute the same forward.
    hf.requires_grad_(False)
    ir = build_ir(import_config({**hf.config.to_dict(), "architectures": [cls]}).spec)
    figures = flop_figures(ir, CONVENTIONS["executed"])
    ids = torch.randint(3, VOCAB, (b, s))
    with torch.no_grad(), FlopCounterMode(display=False) as counter:
        hf(input_ids=ids)
    expected = sp.sympify(figures.forward_matmul).xreplace({**ir.env, B: b, S: s})
    assert int(expected) == counter.get_total_flops()
