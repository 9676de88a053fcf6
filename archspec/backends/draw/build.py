"""The diagram of an IR: one column per stack, one group per distinct block variant.

Blocks are wired as their residual kind says (`ResidualKind.norm_position`): a pre-norm
sublayer is norm → layer → ⊕, a post-norm one layer → ⊕ → norm, and a parallel block one shared
norm feeding its sublayers side by side into one ⊕. Nothing here compares a kind's name.
"""

from __future__ import annotations

from archspec.backends.count.params import parameter_count
from archspec.backends.draw import labels
from archspec.backends.draw.diagram import Add, Box, Column, Cross, Diagram, Group, Item, Parallel
from archspec.ir.classes import class_name, class_names
from archspec.ir.nodes import IR, MLP, Attention, Block, Linear, MoE, Node, Norm, Stack


class _Builder:
    def __init__(self, ir: IR, params: bool) -> None:
        self.ir = ir
        self.params = params
        self.names = class_names(ir.root)
        self.ids: dict[str, int] = {}

    def id(self, stem: str) -> str:
        self.ids[stem] = self.ids.get(stem, 0) + 1
        return f"{stem}{self.ids[stem]}"

    def count(self, *nodes: Node | None) -> int | None:
        if not self.params:
            return None
        return sum(self.ir.value(parameter_count(node)) for node in nodes if node is not None)

    def box(self, role: str, text: tuple[str, str], node: Node | None, path: str, **kw) -> Box:
        params = self.count(node) if node is not None else None
        return Box(self.id(role[:3]), role, text[0], text[1], params, path, **kw)

    # The parts of a block.

    def norm(self, node: Norm, path: str) -> Box:
        return self.box("norm", labels.norm(node), node, f"{path}.{node.name}")

    def layer(self, node: Attention | MLP | MoE, stack: Stack, path: str) -> list[Box]:
        where = f"{path}.{node.name}"
        if isinstance(node, Attention):
            role = "cross-attention" if node.cross else "attention"
            return [self.box(role, labels.attention(self.ir, node, stack), node, where)]
        if isinstance(node, MLP):
            return [self.box("mlp", labels.mlp(self.ir, node), node, where)]
        experts = self.ir.value(node.n_experts)
        return [
            self.box("router", labels.router(self.ir, node), node.router, where + ".router"),
            self.box(
                "experts",
                labels.experts(self.ir, node),
                node.experts,
                where + ".experts",
                copies=experts,
            ),
            *self.shared_expert(node, where),
        ]

    def shared_expert(self, node: MoE, where: str) -> list[Box]:
        """The MLP every token goes through (Qwen2-MoE, DeepSeek), with its gate if any."""
        if node.shared is None:
            return []
        title, detail = labels.mlp(self.ir, node.shared)
        box = self.box("mlp", (f"Shared expert: {title}", detail), node.shared, where + ".shared")
        box.params = self.count(node.shared, node.shared_gate)
        return [box]

    def block(self, block: Block, stack: Stack, runs: list[tuple[range, int]]) -> Group:
        """`runs`: (layers, modules) of each run the block variant serves."""
        path = f"{stack.name}.{stack.blocks.name}.i"
        items: list[Item] = []
        skips: list[tuple[int, int]] = []
        position = block.entry.norm_position
        if block.shared_norm is not None:
            items.append(self.norm(block.shared_norm, path))
            layers = [self.layer(s.layer, stack, path) for s in block.sublayers]
            # Side by side only when each sublayer is one box; an MoE beside attention is
            # still one column per sublayer, drawn as its experts box.
            items.append(Parallel(self.id("par"), [boxes[-1] for boxes in layers]))
            items.append(Add(self.id("add")))
            skips.append((0, 2))
        else:
            for sub in block.sublayers:
                start = len(items)
                if position in ("before", "per_branch") and sub.norm is not None:
                    items.append(self.norm(sub.norm, path))
                items.extend(self.layer(sub.layer, stack, path))
                if sub.post_norm is not None:  # sandwich, output-norm
                    items.append(self.norm(sub.post_norm, path))
                items.append(Add(self.id("add")))
                skips.append((start, len(items) - 1))
                if position == "after" and sub.norm is not None:
                    items.append(self.norm(sub.norm, path))
        title = f"{class_name(self.names, block)} · {block.entry.label}"
        repeat = sum(len(layers) for layers, _ in runs)
        modules = sum(count for _, count in runs)
        layers = labels.layers([layers for layers, _ in runs])
        return Group(
            self.id("blk"), title, repeat, layers, items, skips, self.count(block), modules
        )

    # A stack and the model around it.

    def projection(self, stack: Stack, node: Linear, title: str) -> Box:
        text = labels.linear(self.ir, node, title)
        return self.box("embedding", text, node, f"{stack.name}.{node.name}")

    def column(self, stack: Stack, encoder_decoder: bool) -> Column:
        model, ir = self.ir.root, self.ir
        role = stack.role
        title = role.capitalize() if encoder_decoder else f"{role.capitalize()}-only"
        if encoder_decoder and role == "decoder":
            source = "target tokens (shifted right)"
        else:
            source = "input tokens"
        column = Column(role, title, source, "hidden states")
        shared = " (shared)" if encoder_decoder else ""
        embedding = self.box(
            "embedding",
            labels.embedding(ir, model.tok_emb, "Token embedding" + shared),
            model.tok_emb,
            model.tok_emb.name,
        )
        if self.params and stack is not model.stacks[0]:
            embedding.params = 0  # counted once, in the first column
        column.items.append(embedding)
        if model.type_emb is not None and role == model.stacks[0].role:
            column.items.append(
                self.box(
                    "position",
                    labels.embedding(ir, model.type_emb, "+ token types"),
                    model.type_emb,
                    model.type_emb.name,
                )
            )
        position = stack.position.entry
        if stack.proj_first:
            column.items.append(self.projection(stack, stack.emb_proj, "Embedding projection"))
        if stack.pos_emb is not None:
            text = labels.embedding(ir, stack.pos_emb, f"+ {position.description}")
            path = f"{stack.name}.{stack.pos_emb.name}"
            column.items.append(self.box("position", text, stack.pos_emb, path))
        elif position.added:
            column.items.append(self.box("position", (f"+ {position.description}", ""), None, ""))
        if stack.emb_norm is not None:
            column.items.append(
                self.box(
                    "norm",
                    labels.norm(stack.emb_norm, "embeddings"),
                    stack.emb_norm,
                    f"{stack.name}.{stack.emb_norm.name}",
                )
            )
        if stack.emb_proj is not None and not stack.proj_first:
            column.items.append(self.projection(stack, stack.emb_proj, "Embedding projection"))
        if stack.rel_bias is not None:  # one table of score biases, read by every layer
            table = stack.rel_bias
            text = (
                f"Bias table: {position.label}",
                f"{ir.value(table.num):,} buckets × {ir.value(table.dim):,} heads",
            )
            path = f"{stack.name}.{stack.rel_bias.name}"
            column.items.append(self.box("position", text, stack.rel_bias, path))
        for variant in stack.block_variants:
            runs = [  # layers a block serves: ALBERT's shared block serves them all
                (run.layers(ir.value), ir.value(run.count))
                for run in stack.blocks.runs
                if run.node == variant
            ]
            column.items.append(self.block(variant, stack, runs))
        if stack.final_norm is not None:
            column.items.append(
                self.box(
                    "norm",
                    labels.norm(stack.final_norm, "final"),
                    stack.final_norm,
                    f"{stack.name}.{stack.final_norm.name}",
                )
            )
        if stack.out_proj is not None:
            column.items.append(self.projection(stack, stack.out_proj, "Output projection"))
        last = stack is model.stacks[-1]
        if last and model.pooler is not None:
            text = labels.linear(ir, model.pooler, "Pooler (first token, tanh)")
            column.items.append(self.box("pooler", text, model.pooler, model.pooler.name))
            column.output = "pooled output"
        if last and model.lm_transform is not None:  # a masked-LM head's transform
            text = labels.linear(ir, model.lm_transform, "LM transform")
            column.items.append(self.box("head", text, model.lm_transform, model.lm_transform.name))
            if model.lm_norm is not None:
                text = labels.norm(model.lm_norm, "LM head")
                column.items.append(self.box("norm", text, model.lm_norm, model.lm_norm.name))
        if last and model.score is not None:  # ELECTRA's discriminator
            text = labels.linear(ir, model.score, "Discriminator score")
            box = self.box("head", text, model.score, model.score.name)
            box.params = self.count(model.score_dense, model.score)
            column.items.append(box)
            column.output = "a score per token"
        if last and model.lm_head is not None:
            text = labels.linear(ir, model.lm_head, "LM head")
            column.items.append(self.box("head", text, model.lm_head, model.lm_head.name))
            column.output = "next-token logits" if stack.causal else "token logits"
        elif encoder_decoder and role == "encoder":
            column.output = "encoder output"
        return column


def build_diagram(ir: IR, params: bool = False) -> Diagram:
    """The block diagram of `ir`; with `params`, every box carries its parameter count."""
    from archspec.safety.text import visible

    model = ir.root
    builder = _Builder(ir, params)
    encoder_decoder = len(model.stacks) > 1
    columns = [builder.column(stack, encoder_decoder) for stack in model.stacks]
    cross = []
    if encoder_decoder:
        targets = [
            box.id
            for item in columns[-1].items
            if isinstance(item, Group)
            for box in item.items
            if isinstance(box, Box) and box.role == "cross-attention"
        ]
        cross.append(Cross(0, targets))
    total = ir.value(parameter_count(model))
    layout = {
        "encoder-decoder": "encoder-decoder",
        "encoder": "encoder-only",
        "decoder": "decoder-only",
    }.get(model.layout, model.layout)
    subtitle = (
        f"{layout} · d_model {ir.value(model.d_model):,} · vocab {ir.value(model.vocab_size):,}"
        f" · {total:,} parameters"
    )
    return Diagram(visible(ir.identity.title), subtitle, columns, cross, total)
