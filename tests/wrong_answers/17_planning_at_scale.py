"""Typical wrong answers to notebook 17's exercises: each check must say "not yet"."""

_N70 = "plan.n_params(plan.LLAMA['70B'])"

WRONG = {
    1: [
        # divided by the 8 FSDP ranks only: TP's 4-way split forgotten
        f"states_gib = {_N70} * 16 / 8 / 2**30",
        # divided by the 4 TP ranks only
        f"states_gib = {_N70} * 16 / 4 / 2**30",
        # the optimizer state forgotten: 4 + 4 bytes
        f"states_gib = {_N70} * 8 / 32 / 2**30",
        # bf16 bytes for everything: 2 + 2 + 2 + 2
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
        "peak_gib = 60.8  # Adam's moments forgotten",
        "peak_gib = 49.8  # the logits forgotten",
        "peak_gib = 52.9  # local batch 1",
        "peak_gib = 32.9 + 20.0  # the Playbook's states and activations",
        "peak_gib = 2 * 52.9  # batch 1's peak doubled",
        "peak_gib = 64.9  # FSDP over 64",
        "peak_gib = 82.9  # GB, not GiB",
        "peak_gib = 32.9  # the states alone",
        "peak_gib = 80  # the GPU's memory, not the peak",
    ],
    3: [
        # the MFU forgotten: the GPU at its peak
        "def step_seconds(tokens, flops_per_token, peak, mfu, comm_s):\n"
        "    return max(tokens * flops_per_token / peak, comm_s)",
        # communication never hidden
        "def step_seconds(tokens, flops_per_token, peak, mfu, comm_s):\n"
        "    return tokens * flops_per_token / (peak * mfu) + comm_s",
        # communication always hidden
        "def step_seconds(tokens, flops_per_token, peak, mfu, comm_s):\n"
        "    return tokens * flops_per_token / (peak * mfu)",
        # right only at the defaults: the H100's peak hard-coded
        "def step_seconds(tokens, flops_per_token, peak, mfu, comm_s):\n"
        "    return max(tokens * flops_per_token / (989e12 * mfu), comm_s)",
        # the MFU as a percentage
        "def step_seconds(tokens, flops_per_token, peak, mfu, comm_s):\n"
        "    return max(tokens * flops_per_token / (peak * mfu * 100), comm_s)",
        # multiplied by the MFU instead of divided
        "def step_seconds(tokens, flops_per_token, peak, mfu, comm_s):\n"
        "    return max(tokens * flops_per_token * mfu / peak, comm_s)",
        # half the communication hidden, always
        "def step_seconds(tokens, flops_per_token, peak, mfu, comm_s):\n"
        "    return tokens * flops_per_token / (peak * mfu) + comm_s / 2",
        # forward FLOPs only: a third of the step's
        "def step_seconds(tokens, flops_per_token, peak, mfu, comm_s):\n"
        "    return max(tokens * flops_per_token / 3 / (peak * mfu), comm_s)",
    ],
}
