"""Typical wrong answers to notebook 11's exercises: each check must say "not yet"."""

WRONG = {
    1: ["answer = 4  # one micro-batch per stage",
        "answer = 36  # 9p instead of 9(p-1)"],
}
