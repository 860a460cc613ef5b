"""Typical wrong answers to notebook 06's exercises: each check must say "not yet"."""

WRONG = {
    1: ["def labelled_step(model, opt, x, y):\n"
        "    with record_function('forward'):\n"
        "        out = model(x)\n"
        "        with record_function('loss'):  # nested inside forward\n"
        "            loss = nn.functional.mse_loss(out, y)\n"
        "    with record_function('backward'):\n"
        "        opt.zero_grad(set_to_none=True)\n"
        "        loss.backward()\n"
        "    with record_function('optimizer'):\n"
        "        opt.step()\n"
        "    return loss.detach()",
        "labelled_step = train_step  # three labels: the loss hides inside forward"],
    2: ["answer = 2 * 4 * 91_009  # the two moments, but no step counts",
        "answer = 4 * 91_009  # one moment per parameter",
        "answer = 2 * 4 * (64 * 128 + 5 * 128 * 128 + 128)  # weights without biases"],
    3: ["def clipped_loss_one_graph(model, x, y):\n"
        "    loss = nn.functional.mse_loss(model(x), y)\n"
        "    return loss * torch.clamp(1.0 / loss, max=1.0)  # not detached",
        "def clipped_loss_one_graph(model, x, y):\n"
        "    return torch.clamp(nn.functional.mse_loss(model(x), y), max=1.0)",
        "clipped_loss_one_graph = clipped_loss  # still two graphs"],
}
