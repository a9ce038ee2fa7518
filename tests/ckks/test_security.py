"""The 128-bit security bound: exactly the table in /work/shared/design/FACTS.md
(HomomorphicEncryption.org standard, ternary secret, classical; 2^16 and 2^17 as OpenFHE)."""

from __future__ import annotations

import pytest

from henn.ckks import security
from henn.ckks.params import Parameters, ParametersLiteral
from henn.errors import SecurityError

# copied from FACTS.md, "Security bound"
FACTS_TABLE = {1024: 27, 2048: 54, 4096: 109, 8192: 218, 16384: 438, 32768: 881, 65536: 1772, 131072: 3544}


def test_table_is_exactly_facts():
    assert {1 << log_n: bits for log_n, bits in security.MAX_LOG_QP_128.items()} == FACTS_TABLE
    assert security.SECURITY_LEVEL_BITS == 128


@pytest.mark.parametrize("n,bound", sorted(FACTS_TABLE.items()))
def test_bound_per_ring(n, bound):
    log_n = n.bit_length() - 1
    assert security.max_log_qp(log_n) == bound
    assert security.is_secure(log_n, bound)
    assert security.is_secure(log_n, bound - 0.5)
    assert not security.is_secure(log_n, bound + 0.01)
    assert not security.is_secure(log_n, bound, secret="gaussian")
    assert security.min_log_n_for(bound) == log_n
    if log_n > 10:
        assert security.min_log_n_for(FACTS_TABLE[n // 2] + 1) == log_n


@pytest.mark.parametrize("log_n", [9, 18, 0])
def test_unknown_ring(log_n):
    with pytest.raises(ValueError):
        security.max_log_qp(log_n)
    assert not security.is_secure(log_n, 10)


def test_min_log_n_beyond_table():
    assert security.min_log_n_for(3545) is None
    assert security.min_log_n_for(1) == 10


def test_parameters_follow_the_table():
    # the largest chain allowed at N = 2^15: 881 bits (60 + 19*40 + 61 = 881)
    ok = ParametersLiteral(15, (60,) + (40,) * 19, (61,), 40)
    assert Parameters.from_literal(ok).log_qp == 881
    with pytest.raises(SecurityError, match="881"):
        Parameters.from_literal(ParametersLiteral(15, (60,) + (40,) * 19 + (20,), (61,), 40))
