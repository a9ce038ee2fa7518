"""From IR to a runnable Program: sparse matrices of linear ops (matrices.py), single-ciphertext
layouts and BSGS plans (layouts.py), the Program format (program.py), lowering per packing mode
(lower_batch.py, lower_single.py) and the driver that runs frontend + passes + lowering (driver.py)."""
