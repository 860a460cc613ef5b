"""Typical wrong answers to notebook 03's exercises: each check must say "not yet"."""

WRONG = {
    1: ["answer = sizes[0]  # the smallest size measured, whatever its rate",
        "answer = max(rates) / 2  # half the best rate, not the size that reaches it"],
    2: ["answer = max(times, key=times.get)  # the way that took the most time",
        "answer = min(times.values())  # the least time, not the name of the way"],
    3: ["def losses_batched(every=10):  # still one read per step\n"
        "    return losses_every_step()",
        "def losses_batched(every=10):  # a copy to the host every step\n"
        "    steps = [(xb @ w).square().mean().to('cpu') for xb in xs]\n"
        "    return torch.stack(steps).tolist()"],
}
