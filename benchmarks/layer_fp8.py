"""What fp8 training gains on an MLP's two projections at each model's width, casts included:
torchao.float8 (the fp8 training torchtitan runs) against bf16, both compiled.

    python benchmarks/layer_fp8.py --out benchmarks/gpu-h100-sweep/layer_fp8.json   # on a GPU
    python benchmarks/layer_fp8.py --against-plan benchmarks/gpu-h100-sweep/layer_fp8.json

kernel_fp8_moe.py times fp8 GEMMs and their casts apart; a training step runs them as
torch.compile fuses them. Here an MLP's up and down projections (no bias, 8,192 tokens) are
run forward and backward (three GEMMs each: output, input gradient, weight gradient) in bf16
and through torchao's convert_to_float8_training with its tensorwise and rowwise recipes,
each compiled whole, at the widths of MPT-3B, Llama 3 8B, Llama 3 70B and one tensor-parallel
rank of Llama 3.1 405B at tp 8 (config.json's hidden_size and intermediate_size). The speedup
is set beside plan's: its fp8 rule (the fp8 peak, the fitted fp8 factor, a half-size scaled
to fp8's FLOPs per byte) over its bf16 rule for the same GEMMs. Nothing is fitted here.
"""

from __future__ import annotations

import json

import torch
from kernel_shapes import kernel_cli, plan_rule, timed
from torch import nn

# (name, width, hidden width of the MLP's projections), from each model's config.json; the
# 405B's hidden width is one of tp 8 ranks' share of its 53,248.
WIDTHS = [("mpt-3b", 2560, 10240), ("llama-3-8b", 4096, 14336),
          ("llama-3-70b", 8192, 28672), ("llama-3.1-405b, tp 8", 16384, 6656)]  # fmt: skip
TOKENS = 8192
RECIPES = ("bf16", "tensorwise", "rowwise")


def mlp(width: int, hidden: int, recipe: str, device: torch.device) -> nn.Module:
    up, down = nn.Linear(width, hidden, bias=False), nn.Linear(hidden, width, bias=False)
    model = nn.Sequential(up, down).to(device, torch.bfloat16)
    # Each model compiled afresh: dynamo's cache would otherwise count every model as a
    # recompilation of Sequential.forward and, past its limit, run the rest eager.
    torch._dynamo.reset()
    if recipe != "bf16":
        from torchao.float8 import Float8LinearConfig, convert_to_float8_training

        convert_to_float8_training(model, config=Float8LinearConfig.from_recipe_name(recipe))
    return torch.compile(model)


def layer_row(device, name: str, width: int, hidden: int, tokens: int, repeat: int) -> dict:
    x = torch.randn(tokens, width, device=device, dtype=torch.bfloat16, requires_grad=True)
    grad = torch.randn(tokens, width, device=device, dtype=torch.bfloat16)
    flops = 3 * 2 * 2 * tokens * width * hidden  # two projections, three GEMMs each
    row: dict = {"model": name, "width": width, "hidden": hidden, "tokens": tokens}
    for recipe in RECIPES:
        try:
            model = mlp(width, hidden, recipe, device)
        except ImportError as e:
            row[recipe] = {"error": f"torchao is not installed: {e}"}
            continue

        def step(model=model):
            for p in model.parameters():
                p.grad = None
            x.grad = None
            model(x).backward(grad)

        try:
            seconds = timed(step, device, repeat)  # its warm-up calls compile
        except RuntimeError as e:
            row[recipe] = {"error": str(e).splitlines()[0][:200]}
            continue
        row[recipe] = {"s": seconds, "tflops": flops / seconds / 1e12}
        del model
    return row


def against_plan(result: dict) -> str:
    bf16, what_bf16, _ = plan_rule(result["device"])
    fp8, what_fp8, _ = plan_rule(result["device"], "fp8")
    lines = [f"{result['device']}, torch {result['torch']}, torchao {result['torchao']}",
             f"{what_bf16}; {what_fp8}", "",
             "| widths | tokens | bf16 TFLOP/s | tensorwise | rowwise | speedup tensorwise "
             "| rowwise | plan's speedup |",
             "|---|---:|---:|---:|---:|---:|---:|---:|"]  # fmt: skip
    for r in result["layers"]:
        shape = (r["tokens"], r["hidden"], r["width"])
        base = r["bf16"].get("tflops", float("nan"))
        tw, rw = (r[k].get("tflops", float("nan")) for k in ("tensorwise", "rowwise"))
        lines.append(f"| {r['model']} ({r['width']} → {r['hidden']}) | {r['tokens']} "
                     f"| {base:.0f} | {tw:.0f} | {rw:.0f} | {tw / base:.2f} | {rw / base:.2f} "
                     f"| {fp8(*shape) / bf16(*shape):.2f} |")  # fmt: skip
    return "\n".join(lines) + "\n"


def main() -> None:
    args = kernel_cli(__doc__, against_plan, dry_help="CPU, tiny widths, bf16 only")
    if args is None:
        return
    device = torch.device("cpu" if args.dry_run else "cuda")
    widths = [("tiny", 32, 64)] if args.dry_run else WIDTHS
    try:
        import torchao

        version = torchao.__version__
    except ImportError:
        version = None
    result = {"device": torch.cuda.get_device_name() if device.type == "cuda" else "cpu",
              "torch": torch.__version__, "torchao": version, "layers": []}  # fmt: skip
    args.out.parent.mkdir(parents=True, exist_ok=True)
    for name, width, hidden in widths:
        tokens = 64 if args.dry_run else TOKENS
        row = layer_row(device, name, width, hidden, tokens, 2 if args.dry_run else 10)
        result["layers"].append(row)
        args.out.write_text(json.dumps(result, indent=1))  # nothing measured is lost
        print(name, {k: round(v["tflops"]) if "tflops" in v else v.get("error")
                     for k, v in row.items() if k in RECIPES}, flush=True)  # fmt: skip


if __name__ == "__main__":
    main()
