"""What every training step of `bench --nproc` runs on, shared by the ranks and by the
single-process reference run: the batch (drawn from the seed, each data-parallel replica its own
sequences), the loss, and the reference run itself (`reference_losses`), the model alone on one
process over all the replicas' sequences, whose losses the distributed run should give."""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F


def batch(s: dict[str, Any], replica: int, device: torch.device) -> tuple[dict, torch.Tensor]:
    """(model inputs, targets) of one data-parallel replica: `s["batch"]` sequences of
    `s["seq"]` tokens, drawn from seed + replica, the same at every step."""
    gen = torch.Generator().manual_seed(s["seed"] + replica)
    shape = (s["batch"], s["seq"])
    ids = torch.randint(0, s["vocab"], shape, generator=gen).to(device)
    inputs = {"input_ids": ids}
    if s["encoder_decoder"]:
        inputs["decoder_input_ids"] = ids
    targets = torch.randint(0, s["vocab"], shape, generator=gen).to(device)
    return inputs, targets


def reference_losses(module: Any, s: dict[str, Any], replicas: int, steps: int) -> list[float]:
    """The loss of each of `steps` AdamW steps of the model alone on this process, built under
    the same seed, on the replicas' sequences side by side (the distributed run's global batch),
    dropout as the spec says."""
    device = torch.device("cpu")
    torch.manual_seed(s["seed"])
    model = module.Model(module.Config())
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
    parts = [batch(s, r, device) for r in range(replicas)]
    inputs = {k: torch.cat([p[0][k] for p in parts]) for k in parts[0][0]}
    targets = torch.cat([p[1] for p in parts])
    losses = []
    for _ in range(steps):
        loss = training_loss(model(**inputs), targets, s["vocab"])
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=False)
        losses.append(loss.item())
    return losses


def training_loss(out: Any, targets: torch.Tensor, vocab: int) -> torch.Tensor:
    """Cross-entropy of the logits; without an LM head (an encoder), the mean square of the
    hidden states."""
    out = out[0] if isinstance(out, tuple) else out
    if out.size(-1) == vocab:
        return F.cross_entropy(out.flatten(0, 1).float(), targets.flatten())
    return out.float().square().mean()
