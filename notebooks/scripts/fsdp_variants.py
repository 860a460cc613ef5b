"""What FSDP2's options trade, trained beside plain FSDP2 by fsdp_train.py --variants.

`reshard_after_forward=False` keeps each block's full weights from its forward to its
backward: one all-gather fewer per block and step, but after forward every block's
full weights are in memory. A bf16 `MixedPrecisionPolicy` casts the shards before the
all-gather, so half the bytes travel, and reduce-scatters the gradients in float32
(fsdp_train.py counts the bytes each all-gather returns). Needs torch and
fsdp_model.py.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from fsdp_model import Net, shard

try:  # the public home since torch 2.6
    from torch.distributed.fsdp import MixedPrecisionPolicy
except ImportError:  # older torch kept FSDP2 in a private module
    from torch.distributed._composable.fsdp import MixedPrecisionPolicy


def variants(mesh) -> dict[str, Callable[[Net], Net]]:
    """Return FSDP2 with other options: full weights kept, bf16 parameters."""
    bf16 = MixedPrecisionPolicy(param_dtype=torch.bfloat16,  # NEW: gathered in bf16
                                reduce_dtype=torch.float32)  # NEW: summed in float32
    return {"fsdp_keep": lambda m: shard(m, mesh, reshard_after_forward=False),  # NEW
            "fsdp_bf16": lambda m: shard(m, mesh, mp_policy=bf16)}  # NEW

