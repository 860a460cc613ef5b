"""A small decoder-only transformer (GPT) on Python's documentation, bytes as tokens.

One file shared by notebooks 15 and 16: the model, a layout-independent init, the text,
the global batch of each step, the FLOPs-per-token estimate and a cited table of GPU
peaks for MFU. torch and the standard library only, so a copied scripts/ folder runs
anywhere.

    cfg = Config()                      # tiny: many steps in seconds on a 2-core CPU
    model = GPT(cfg); init_weights(model, seed=0)
    data = corpus()
    x, y = batch(data, step=0, batch_size=8, block=cfg.block)
    loss = loss_fn(model(x), y)
"""

from __future__ import annotations

import hashlib
import re
import sys
import zlib
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.checkpoint import checkpoint

__all__ = ["Config", "GPT", "Block", "Attention", "MLP", "init_weights", "corpus",
           "corpus_pin", "batch", "loss_fn", "count_params", "flops_per_token",
           "TOLERANCE", "PINNED", "RECOMPUTE", "DATASHEET", "datasheet_peak"]

TOLERANCE = 1e-10  # float64: the largest weight difference two strategies may show
# "attention" redoes the whole attention sub-layer (norm1, q/k/v, RoPE, the attention
# core, proj): neither Korthikanti et al.'s selective recomputation (the core alone)
# nor torchtitan's op-level selective activation checkpointing
RECOMPUTE = ("none", "attention", "full")


@dataclass
class Config:
    vocab: int = 256  # bytes: the vocabulary does not depend on the text
    block: int = 64  # context length, in tokens
    layers: int = 2
    heads: int = 4
    dim: int = 64
    mlp: int = 4  # the MLP's hidden width is mlp * dim
    # Llama-3 shapes (notebook 17); the defaults keep the model above, bit for bit
    kv_heads: int = 0  # grouped-query attention: heads sharing K/V (0: one per head)
    hidden: int = 0  # the MLP's hidden width when set, else mlp * dim
    swiglu: bool = False  # proj(silu(fc(x)) * up(x)) instead of proj(gelu(fc(x)))
    tied: bool = True  # the head shares the embedding's weight

    def __repr__(self) -> str:
        """Name the six base fields, and a Llama-3 option only where it is set."""
        names = ["vocab", "block", "layers", "heads", "dim", "mlp"]
        extra = {"kv_heads": 0, "hidden": 0, "swiglu": False, "tied": True}
        names += [k for k, default in extra.items() if getattr(self, k) != default]
        return "Config(" + ", ".join(f"{k}={getattr(self, k)!r}" for k in names) + ")"

    @property
    def n_kv(self) -> int:
        """Return the number of key/value heads (grouped-query attention)."""
        return self.kv_heads or self.heads

    @property
    def ffn(self) -> int:
        """Return the MLP's hidden width."""
        return self.hidden or self.mlp * self.dim


def rope(x: torch.Tensor) -> torch.Tensor:
    """Rotate (B, T, H, D) queries or keys by position (RoPE), built from T and D."""
    T, D = x.shape[1], x.shape[-1]
    dt = x.dtype if x.dtype in (torch.float32, torch.float64) else torch.float32
    inv = 1.0 / 10000 ** (torch.arange(0, D, 2, device=x.device, dtype=dt) / D)
    angle = torch.outer(torch.arange(T, device=x.device, dtype=dt), inv)[:, None, :]
    cos, sin = angle.cos().to(x.dtype), angle.sin().to(x.dtype)
    x1, x2 = x[..., : D // 2], x[..., D // 2:]
    return torch.cat([x1 * cos - x2 * sin, x1 * sin + x2 * cos], dim=-1)


class Attention(nn.Module):
    def __init__(self, cfg: Config):
        super().__init__()
        self.head_dim = cfg.dim // cfg.heads
        kv = cfg.n_kv * self.head_dim  # cfg.dim unless grouped-query attention
        self.q = nn.Linear(cfg.dim, cfg.dim, bias=False)
        self.k = nn.Linear(cfg.dim, kv, bias=False)
        self.v = nn.Linear(cfg.dim, kv, bias=False)
        self.proj = nn.Linear(cfg.dim, cfg.dim, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        B, T = x.shape[0], x.shape[1]
        # -1, not cfg.heads: under tensor parallelism a rank holds only some heads
        q = rope(self.q(x).view(B, T, -1, self.head_dim)).transpose(1, 2)
        k = rope(self.k(x).view(B, T, -1, self.head_dim)).transpose(1, 2)
        v = self.v(x).view(B, T, -1, self.head_dim).transpose(1, 2)
        if k.size(1) != q.size(1):  # grouped-query: each K/V head serves a group of q
            k = k.repeat_interleave(q.size(1) // k.size(1), dim=1)
            v = v.repeat_interleave(q.size(1) // v.size(1), dim=1)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)  # (B, H, T, D)
        return self.proj(y.transpose(1, 2).reshape(B, T, -1))


class MLP(nn.Module):
    def __init__(self, cfg: Config):
        super().__init__()
        self.fc = nn.Linear(cfg.dim, cfg.ffn, bias=False)
        if cfg.swiglu:  # Llama's SwiGLU: a second input projection gates the first
            self.up = nn.Linear(cfg.dim, cfg.ffn, bias=False)
        self.proj = nn.Linear(cfg.ffn, cfg.dim, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if hasattr(self, "up"):
            return self.proj(F.silu(self.fc(x)) * self.up(x))
        return self.proj(F.gelu(self.fc(x)))


class Block(nn.Module):
    """Pre-norm: x + attn(norm1(x)), then x + mlp(norm2(x))."""

    def __init__(self, cfg: Config):
        super().__init__()
        self.norm1 = nn.RMSNorm(cfg.dim)
        self.attn = Attention(cfg)
        self.norm2 = nn.RMSNorm(cfg.dim)
        self.mlp = MLP(cfg)

    def _attention(self, x: torch.Tensor) -> torch.Tensor:
        return self.attn(self.norm1(x))

    def _layer(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self._attention(x)
        return x + self.mlp(self.norm2(x))

    def forward(self, x: torch.Tensor, recompute: str = "none") -> torch.Tensor:
        if recompute == "full":  # keep the block's input; redo the block in backward
            return checkpoint(self._layer, x, use_reentrant=False)
        if recompute == "attention":  # redo the attention sub-layer, keep the MLP's
            x = x + checkpoint(self._attention, x, use_reentrant=False)
            return x + self.mlp(self.norm2(x))
        return self._layer(x)


class GPT(nn.Module):
    """Token embedding, `layers` blocks, a final norm, and a head tied to the embedding
    (its own weight with `Config(tied=False)`, as Llama 3).

    `recompute` is "none", "full" (checkpoint every block) or "attention" (checkpoint
    each block's attention sub-layer, norm included): see RECOMPUTE.
    """

    def __init__(self, cfg: Config, recompute: str = "none"):
        super().__init__()
        assert cfg.dim % cfg.heads == 0, f"dim {cfg.dim} must split into {cfg.heads}"
        assert cfg.heads % cfg.n_kv == 0, f"{cfg.n_kv} K/V heads must split {cfg.heads}"
        if recompute not in RECOMPUTE:
            raise ValueError(f"recompute={recompute!r}: choose one of {RECOMPUTE}")
        self.cfg, self.recompute = cfg, recompute
        self.tok = nn.Embedding(cfg.vocab, cfg.dim)
        self.blocks = nn.ModuleList(Block(cfg) for _ in range(cfg.layers))
        self.norm = nn.RMSNorm(cfg.dim)
        self.head = nn.Linear(cfg.dim, cfg.vocab, bias=False)
        self.tie_weights()

    def tie_weights(self) -> None:
        """Share one tensor between embedding and head. Call it again after `to_empty`
        on plain tensors, which gives each module a new Parameter and so unties them;
        DTensor parameters (after `fully_shard`) are swapped in place and stay tied.
        An untied model (`Config(tied=False)`) keeps its own head."""
        if self.cfg.tied:
            self.head.weight = self.tok.weight

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        x = self.tok(idx)
        for block in self.blocks:
            x = block(x, self.recompute)
        return self.head(self.norm(x))


def _seed(seed: int, name: str) -> int:
    return seed * 1_000_003 + zlib.crc32(name.encode())


_WRAPPERS = ("_orig_mod.", "_checkpoint_wrapped_module.", "_fsdp_wrapped_module.")


def _plain(name: str) -> str:
    """Return a parameter's name without the prefixes DDP, compile or wrappers add."""
    for wrapper in _WRAPPERS:
        name = name.replace(wrapper, "")
    return name.removeprefix("module.")


@torch.no_grad()
def init_weights(model: nn.Module, seed: int = 0) -> None:
    """Fill every parameter the same way on any layout (one process, DDP, FSDP, TP).

    Each full tensor is drawn in float64 from a generator seeded by the seed and the
    parameter's name, then cast and copied in (sharded first if it is a DTensor), so one
    full parameter exists at a time, never the whole model. The cost: every rank draws
    every full tensor (W-fold work) and holds the float64 draw plus its cast, 12 bytes
    x the largest parameter for float32, on the host. torchtitan instead runs its
    `init_weights` on the DTensor parameters after `to_empty`: each rank fills only its
    own shard, on its device, with DTensor's random ops.
    """
    for name, p in sorted(model.named_parameters(), key=lambda kv: _plain(kv[0])):
        name = _plain(name)
        if "norm" in name:
            full = torch.ones(p.shape, dtype=torch.float64)
        elif name.endswith("bias"):
            full = torch.zeros(p.shape, dtype=torch.float64)
        else:
            g = torch.Generator().manual_seed(_seed(seed, name))
            full = torch.empty(p.shape, dtype=torch.float64)
            full.normal_(0.0, 0.02, generator=g)
        full = full.to(p.dtype)
        if hasattr(p, "device_mesh"):  # a DTensor: keep only this rank's shard of it
            from torch.distributed.tensor import distribute_tensor
            # every rank drew the same tensor: each slices its own, nothing is sent
            full = distribute_tensor(full, p.device_mesh, p.placements,
                                     src_data_rank=None)
        p.copy_(full)


# sha256 of the whole joined text, by the Python minor it was measured on
PINNED = {
    (3, 11): "37d06970fc926e60",
    (3, 13): "a68b7f5ba5e4f20a",
}


def _text() -> bytes:
    from pydoc_data.topics import topics
    return "".join(topics[key] for key in sorted(topics)).encode("utf-8")


def corpus_pin() -> str:
    """Return which Python made the text and whether its digest matches the pin."""
    digest = hashlib.sha256(_text()).hexdigest()[:16]
    minor = sys.version_info[:2]
    version = f"Python {minor[0]}.{minor[1]}"
    if minor not in PINNED:
        return f"{version}: unpinned (sha256 {digest})"
    status = "matches its pin" if PINNED[minor] == digest else "differs from its pin"
    return f"{version}: {status} (sha256 {digest})"


def corpus(n_bytes: int = 200_000) -> torch.Tensor:
    """Return Python's own documentation (pydoc_data.topics), utf-8 bytes as uint8.

    The topics are sorted by key and joined. The text differs a little between Python
    releases: `corpus_pin()` says whether this one is the one measured.
    """
    return torch.frombuffer(bytearray(_text()[:n_bytes]), dtype=torch.uint8)


def batch(data: torch.Tensor, step: int, batch_size: int, block: int, seed: int = 0):
    """Return (x, y), the GLOBAL batch of step `step`: (batch_size, block) long tensors.

    The offsets come from a generator seeded by seed and step, so every strategy sees
    the same rows. A data-parallel rank takes a contiguous chunk of rows:
    `x.chunk(world)[rank]` (batch_size divisible by world).
    """
    g = torch.Generator().manual_seed(seed * 1_000_003 + step)
    starts = torch.randint(len(data) - block - 1, (batch_size,), generator=g)
    rows = data[starts[:, None] + torch.arange(block + 1)].long()
    return rows[:, :-1], rows[:, 1:]


def loss_fn(logits: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """Return the mean cross-entropy of next-token logits (B, T, V) against y (B, T)."""
    return F.cross_entropy(logits.reshape(-1, logits.size(-1)), y.reshape(-1))


def count_params(model: nn.Module) -> int:
    """Return the number of parameters, a tied embedding once (global sizes)."""
    return sum(p.numel() for p in model.parameters())


def flops_per_token(cfg: Config, n_params: int) -> int:
    """Return training FLOPs per token: 6N plus attention's 12 * layers * block * dim.

    6N: each weight does a multiply-add (2 FLOPs) per token forward and twice that
    backward. The attention term (scores and weighted sum, forward and backward) is
    the one nanoGPT's `estimate_mfu` uses; like it, it ignores the causal mask's zeros.
    """
    return 6 * n_params + 12 * cfg.layers * cfg.block * cfg.dim


# Cited: NVIDIA's datasheets, dense tensor-core TFLOP/s (half the "with sparsity"
# figure) in the dtype the notebooks' steps use there; torchtitan's get_peak_flops
# has the same bf16 figures, except that it reads any "H200" (the NVL too) as 989.
# A name matches by whole words, so "H200" is not "GH200".
DATASHEET = {
    "T4": (torch.float16, 65), "A100": (torch.bfloat16, 312),
    "H100 PCIe": (torch.bfloat16, 756), "H100 NVL": (torch.bfloat16, 835),
    "H100 80GB HBM3": (torch.bfloat16, 989),  # the SXM board's name
    "H200 NVL": (torch.bfloat16, 835), "H200": (torch.bfloat16, 989),
    "GH200": (torch.bfloat16, 989)}


def datasheet_peak(name: str, dtype: torch.dtype) -> float | None:
    """Return the cited dense peak FLOP/s of GPU `name` in `dtype`, or None if the
    table has no entry for that name and dtype. The longest matching entry wins."""
    words = re.findall(r"[A-Za-z0-9]+", name)
    for key in sorted(DATASHEET, key=lambda k: -len(k.split())):
        n = len(key.split())
        if any(words[i:i + n] == key.split() for i in range(len(words) - n + 1)):
            kind, tflops = DATASHEET[key]
            return tflops * 1e12 if kind == dtype else None
    return None
