"""Packing: how tensors sit in ciphertext slots and how each layer runs on them, below both the
passes (choose_packing, group_batch, collect_keys) and the lowering.

    layout.py    the typed, frozen Layout
    plans.py     typed, frozen plans (taps, BSGS, pools) with their rotation steps
    bsgs.py      the one baby-step/giant-step planner and cost model; diagonal assembly
    matrices.py  linear IR ops as sparse matrices, conv tap tables
    single.py    single mode in one ciphertext (taps, direct, hybrid, expanded, blocked)
    multi.py     single mode over several ciphertexts (multiplexed layouts)
    grouped.py   grouped batch packing (G channels per ciphertext)
    memory.py    the one memory model (compile time and run time)
"""
