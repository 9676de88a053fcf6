"""`plan` on two rows of MaxText's TPU v6e (Trillium) table, which nothing was fitted on,
bracketed because their rematerialisation cannot be expressed.

MaxText's tiering page (AI-Hypercomputer/maxtext docs/reference/models/tiering.md at e591f30,
"Trillium (v6e)", Gold) gives approximate tokens/s per device on 256 chips, bf16:

- Llama 3.1 8B, SL=8192: 7,207 (the recipe's log line at tpu-recipes HEAD,
  training/trillium/Llama3.1-8B-MaxText/v6e-256/README.md: "Tokens/s/device: 7207.336");
  its workload, as that README reproduces it from MaxText@tpu-recipes-v0.1.4:
  per_device_batch_size 4, ici_fsdp_parallelism -1 (FSDP over the 256 chips);
- Llama 3.1 70B, SL=8192: 960; benchmarks/maxtext_trillium_model_configs.py at 92e59fd,
  llama3_1_70b_8192: per_device_batch_size 5, ici_fsdp_parallelism -1.

Both run remat_policy "custom" with the layer input and the q, k, v (and for the 8B the
output) projections offloaded to host memory: the backward recomputes the MLP and the
attention core and keeps the projections. archspec's recomputation is none, selective (the
attention core) or full (the whole block), and it has no host offload, so each row is
predicted twice: under full recomputation (more replayed than the run: the projections too)
and selective (less: not the MLP). The run's own time lies between, less whatever the host
transfers cost beyond what they overlap. The memory check is left out (the run keeps on the
host what archspec would count on the chip). Llama 3.1 405B (its config adds dcn_fsdp 2 to
a table row of "256 Chips"), Llama 2 70B (its workload is at a MaxText tag not read here)
and the Mixtral rows are not taken.

    python benchmarks/maxtext_v6e_bracket.py
"""

from __future__ import annotations

import json
import subprocess
import sys

CHIPS = 256
# (name, spec and its --set values, per-chip batch, sequence, published tokens/s a chip)
ROWS = (
    ("Llama 3.1 8B", ["llama-3.1-8b"], 4, 8192, 7207),
    ("Llama 3.1 70B", ["llama-2-70b", "--set", "vocab_size=128256"], 5, 8192, 960),
)


def tokens_per_chip(spec: list[str], per_chip: int, seq: int, recompute: str) -> float:
    args = [*spec, "--set", f"max_seq_len={seq}", "--gpu", "tpu-v6e", "--gpus", str(CHIPS),
            "--global-batch", str(per_chip * CHIPS), "--batch", str(per_chip), "--seq", str(seq),
            "--tp", "1", "--pp", "1", "--zero", "3", "--engine", "maxtext",
            "--recompute", recompute, "--json"]  # fmt: skip
    out = subprocess.run([sys.executable, "-m", "archspec", "plan", *args], check=True,
                         capture_output=True, text=True).stdout  # fmt: skip
    return json.loads(out)["tokens_per_s"] / CHIPS


def main() -> None:
    for name, spec, per_chip, seq, published in ROWS:
        full = tokens_per_chip(spec, per_chip, seq, "full")
        selective = tokens_per_chip(spec, per_chip, seq, "selective")
        print(f"{name}, {CHIPS} TPU v6e, SL {seq}: published {published:,} tokens/s a chip; "
              f"plan {full:,.0f} under full recomputation ({full / published - 1:+.1%}), "
              f"{selective:,.0f} under selective ({selective / published - 1:+.1%})")  # fmt: skip


if __name__ == "__main__":
    main()
