"""Typical wrong answers to notebook 17's exercises: each check must say "not yet"."""

_N70 = "plan.n_params(plan.LLAMA['70B'])"
_SIG = "def step_seconds(tokens, flops_per_token, peak, mfu, dp_s, tp_s):\n"
_COMPUTE = "    compute = tokens * flops_per_token / (peak * mfu)\n"

WRONG = {
    1: [
        # divided by the 8 FSDP ranks only: TP's 4-way split forgotten
        f"states_gib = {_N70} * 16 / 8 / 2**30",
        # divided by the 4 TP ranks only
        f"states_gib = {_N70} * 16 / 4 / 2**30",
        # the optimizer state forgotten: 4 + 4 bytes
        f"states_gib = {_N70} * 8 / 32 / 2**30",
        # gradients forgotten: 4 + 8
        f"states_gib = {_N70} * 12 / 32 / 2**30",
        # GB, not GiB
        f"states_gib = {_N70} * 16 / 32 / 1e9",
        # the whole model on one rank
        f"states_gib = {_N70} * 16 / 2**30",
        # a factor of the world off: 31 ranks
        f"states_gib = {_N70} * 16 / 31 / 2**30",
        # bits, not bytes
        f"states_gib = {_N70} * 128 / 32 / 2**30",
        # the wrong model: 8B's count
        "states_gib = plan.n_params(plan.LLAMA['8B']) * 16 / 32 / 2**30",
        # only the bf16 weights
        f"states_gib = {_N70} * 2 / 32 / 2**30",
    ],
    2: [
        "peak_gib = 56.9  # Adam's moments forgotten",
        "peak_gib = 57.6  # the logits forgotten",
        "peak_gib = 51.8  # local batch 1",
        "peak_gib = 32.9 + 20.0  # the Playbook's states and activations",
        "peak_gib = 2 * 51.8  # batch 1's peak doubled",
        "peak_gib = 61.0  # FSDP over 64",
        "peak_gib = 78.7  # GB, not GiB",
        "peak_gib = 32.9  # the states alone",
        "peak_gib = 80  # the GPU's memory, not the peak",
        "peak_gib = 73.29 + 15.66  # the logits counted twice",
        "peak_gib = 73.29 / 2  # a factor of 2 off",
    ],
    3: [
        # the MFU forgotten: the GPU at its peak
        _SIG + "    return tokens * flops_per_token / peak + tp_s",
        # communication never hidden
        _SIG + _COMPUTE + "    return compute + dp_s + tp_s",
        # communication always hidden
        _SIG + _COMPUTE + "    return compute",
        # TP hidden like FSDP
        _SIG + _COMPUTE + "    return max(compute, dp_s + tp_s)",
        # TP forgotten
        _SIG + _COMPUTE + "    return max(compute, dp_s)",
        # right only at the defaults: the H100's peak hard-coded
        _SIG + "    compute = tokens * flops_per_token / (989e12 * mfu)\n"
        "    return compute + tp_s + max(0.0, dp_s - compute)",
        # the MFU as a percentage
        _SIG + "    compute = tokens * flops_per_token / (peak * mfu * 100)\n"
        "    return compute + tp_s + max(0.0, dp_s - compute)",
        # multiplied by the MFU instead of divided
        _SIG + "    compute = tokens * flops_per_token * mfu / peak\n"
        "    return compute + tp_s + max(0.0, dp_s - compute)",
        # forward FLOPs only: a third of the step's
        _SIG + "    compute = tokens * flops_per_token / 3 / (peak * mfu)\n"
        "    return compute + tp_s + max(0.0, dp_s - compute)",
        # right where TP is idle or FSDP hidden, compute alone elsewhere
        _SIG + _COMPUTE + "    if tokens < 10000:\n"
        "        return compute + tp_s + max(0.0, dp_s - compute)\n"
        "    return compute",
        # TP added, FSDP never hidden past compute: max(compute, dp) forgotten
        _SIG + _COMPUTE + "    return compute + tp_s",
    ],
}
