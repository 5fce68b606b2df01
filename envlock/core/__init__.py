"""The pure core: torch -> CUDA anchor (anchor.py), anchor + tables -> plan (rules.py), the shipped tables
(tables/), what torch supports (torch_support.py), a failed solve in plain words (solve_explain.py).

Nothing here reads a file it is not handed, starts a program or reaches the network (tests/test_purity.py).
"""
