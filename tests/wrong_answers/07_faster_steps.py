"""Typical wrong answers to notebook 07's exercises: each check must say "not yet"."""

WRONG = {
    1: ["def clipped_loss_one_graph(model, x, y):\n"
        "    loss = nn.functional.mse_loss(model(x), y)\n"
        "    return loss * torch.clamp(1.0 / loss, max=1.0)  # not detached",
        "def clipped_loss_one_graph(model, x, y):\n"
        "    return torch.clamp(nn.functional.mse_loss(model(x), y), max=1.0)",
        "clipped_loss_one_graph = clipped_loss  # still two graphs"],
    2: ["def feed(static, new):\n    static = new  # rebinds the name only",
        "def feed(static, new):\n    return new.clone()"],
}
WRONG[3] = [
    "def workers_needed(load_ms, compute_ms):\n"
    "    return load_ms // compute_ms  # rounds down: the step still waits",
    "def workers_needed(load_ms, compute_ms):\n"
    "    return os.cpu_count()  # one per core, whatever the timings",
]
