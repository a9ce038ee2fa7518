"""From IR to a runnable Program: the driver (frontend + passes + lowering, driver.py), the choice of
parameters (parameters.py; the precision search in precision.py) and the lowering of the planned IR to
Program steps (lower.py). Layouts and plans live in henn.packing, the Program format in henn.program."""
