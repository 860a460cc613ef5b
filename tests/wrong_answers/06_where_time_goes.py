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
    3: ["answer = ('segments', 'segments', 'segments')  # the message's own advice",
        "answer = ('batch', 'batch', 'batch')  # always halve the batch",
        "answer = ('batch', 'process', 'segments')"],
    4: ["masked_loss_no_sync = masked_loss  # the mask index still syncs",
        "def masked_loss_no_sync(out, y, keep):\n"
        "    err = (out - y).square().squeeze(-1)\n"
        "    return (err * keep).sum() / keep.sum().item()  # .item() syncs",
        "def masked_loss_no_sync(out, y, keep):\n"
        "    return ((out - y).square().squeeze(-1) * keep).mean()  # all rows' mean"],
}
