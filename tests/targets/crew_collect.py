#!/usr/bin/python3
"""Regression test of adapters/torch/crew.py's Crew.collect: the failure a crew reports is the
rank that failed first, not a peer whose collective failed because of it. When rank 1 of a crew
died of SIGSEGV, rank 0's gloo read failed ("Connection reset by peer") and rank 0 answered 1;
with both readable at once, collect took rank 0's answer (the lower rank) and the finding named
rank 0 (torch.targets.torch_crew_faults failed in CI). Here the ranks' reply pipes are written by
hand, every answer readable before collect is called. Exits 0 when every case holds, 1 otherwise.
Usage: crew_collect.py"""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "adapters", "torch"))
import crew  # noqa: E402


def collect(answers, good="0"):
    """Crew.collect over one pipe per rank; an answer of None closes the rank's pipe unanswered."""
    c = crew.Crew.__new__(crew.Crew)
    c.replies = []
    for text in answers:
        r, w = os.pipe()
        if text is not None:
            os.write(w, (text + "\n").encode())
        os.close(w)
        c.replies.append(r)
    try:
        return c.collect(lambda text: text == good)
    finally:
        for r in c.replies:
            os.close(r)


CASES = [  # (answers by rank, what collect returns)
    (["0 1.0", "0 1.1", "0 1.2"], None),
    (["ready 1.0", "ready 1.1"], None, "ready"),
    (["1 2.0", None], (1, "")),             # rank 1 died; rank 0's collective failed after it
    (["1 2.0", "1 1.0"], (1, "1")),         # rank 1 raised and exited; rank 0 failed after it
    (["0 1.0", "4 1.5", "1 1.7"], (1, "4")),
    ([None, "1 3.0", None], (0, "")),       # two deaths: the lower rank
    (["1 1.0", "1 1.0"], (0, "1")),         # the same stamp: the lower rank
]

bad = 0
for case in CASES:
    answers, want = case[0], case[1]
    got = collect(answers, *case[2:])
    if got != want:
        print("FAIL: answers %s: collect gave %s, expected %s" % (answers, got, want))
        bad += 1
print("ok: %d cases" % len(CASES) if not bad else "%d of %d cases failed" % (bad, len(CASES)))
sys.exit(1 if bad else 0)
