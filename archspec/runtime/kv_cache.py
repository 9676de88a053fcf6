"""The KV cache: the keys and values an attention layer has computed so far."""

import torch
from torch import Tensor


def static_address(t: Tensor) -> Tensor:
    """t, marked as a static input of compiled steps: one whose address stays. Not
    while compiling: a tensor a compiled step creates is its output, which a CUDA graph
    keeps in memory of its own."""
    if not torch.compiler.is_compiling():
        torch._dynamo.mark_static_address(t)
    return t


class KVCache:
    """The keys and values one attention layer has computed so far, so that new tokens
    attend to earlier ones without recomputing them. Generation keeps one per block.

    The first update allocates room for max_len positions; each update writes the new
    positions in place (nothing is copied or concatenated). A decode step reads all
    max_len positions, those not written yet hidden by the causal mask (they come
    after every query), so that every decode step has the same shapes: compiled, it
    is one graph for every position. For the same reason the count of positions
    written, `length`, is a tensor: a Python int would be a constant of the compiled
    graph. In an encoder-decoder's block, `memory` also keeps the cross-attention's
    keys and values of the encoder output, projected once.

    CUDA graphs replay fixed addresses: torch.compile(mode="reduce-overhead") captures
    a step in one only if every tensor the step writes in place is a static input (as
    parameters and buffers are), so the cache marks its own tensors static.
    """

    def __init__(self, max_len: int, device: torch.device | None = None) -> None:
        self.max_len = max_len
        self.k: Tensor | None = None
        self.v: Tensor | None = None
        self.length = static_address(torch.zeros((), dtype=torch.long, device=device))
        self.memory: tuple[Tensor, Tensor] | None = None
        # Whether k and v, and memory, were made outside compiled steps (see settle).
        self.owned = False
        self.memory_owned = False

    def allocate(self, k: Tensor, v: Tensor, slots: int) -> None:
        """Room for `slots` positions of keys like k and values like v (latent
        attention caches values of another width than its keys). Zeros: a hidden key
        gets weight 0, and 0 times leftover NaNs would be NaN."""
        self.k = static_address(k.new_zeros((*k.shape[:2], slots, k.size(3))))
        self.v = static_address(v.new_zeros((*v.shape[:2], slots, v.size(3))))
        self.owned = not torch.compiler.is_compiling()

    def settle(self) -> None:
        """Take over what a compiled step allocated (call it between steps). Compiled
        with CUDA graphs (mode="reduce-overhead"), a step's new tensors are its graph's
        outputs, in memory the graph's next replay overwrites; copies made outside the
        step are the cache's own, static, and every later step writes them in place."""
        if not self.owned and self.k is not None and self.v is not None:
            self.k = static_address(self.k.clone())
            self.v = static_address(self.v.clone())
            self.owned = True
        if self.memory is not None and not self.memory_owned:
            self.memory = (self.memory[0].clone(), self.memory[1].clone())
            self.memory_owned = True

    def keep_memory(self, k: Tensor, v: Tensor) -> None:
        """Keep the cross-attention's keys and values of the encoder output."""
        self.memory = (k, v)
        self.memory_owned = not torch.compiler.is_compiling()

    def update(self, k: Tensor, v: Tensor) -> tuple[Tensor, Tensor]:
        """Write new keys and values (B, heads, S, head_dim) after the cached ones;
        return the whole cache, (B, heads, max_len, head_dim)."""
        if self.k is None or self.v is None:
            self.allocate(k, v, self.max_len)
        positions = self.length + torch.arange(k.size(2), device=k.device)
        self.k.index_copy_(2, positions, k)
        self.v.index_copy_(2, positions, v)
        self.length += k.size(2)
        return self.k, self.v

    def reorder(self, rows: Tensor) -> None:
        """Keep, in row i, what row rows[i] holds (beam search continues some beams
        twice and drops others). The encoder's memory is the same for every beam of a
        sequence, so it stays."""
        if self.k is not None and self.v is not None:
            self.k.copy_(self.k.index_select(0, rows))
            self.v.copy_(self.v.index_select(0, rows))
