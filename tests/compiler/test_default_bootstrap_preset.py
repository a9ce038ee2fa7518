"""Without explicit parameters, a bootstrapping compile takes its backend's bootstrapping set."""

import pytest

from henn.passes import CompileOptions
from henn.passes.parameters import bootstrap_params


@pytest.mark.parametrize("backend, preset", [("lattigo", "boot-n16"), ("plain", "boot-n16"), ("gpu", "boot-n16-gpu")])
def test_each_backend_gets_a_bootstrapping_set_it_can_open(backend, preset):
    params = bootstrap_params(CompileOptions(backend=backend, bootstrap=True))
    assert params.name == preset
    assert params.bootstrap is not None
