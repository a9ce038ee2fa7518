import os

import numpy as np
import pytest

FULL = os.environ.get("HENN_FULL") == "1"


@pytest.fixture
def rng():
    return np.random.default_rng(1234)
