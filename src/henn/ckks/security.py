"""The one owner of the security bound: HomomorphicEncryption.org standard, 128-bit classical.

Table for a uniform ternary secret (what SEAL and Lattigo use by default): the largest
log2(Q*P) for which the lattice estimator gives >= 128 bits of classical security.
Entries for N = 2^16, 2^17 extend the standard as OpenFHE does.
"""

from __future__ import annotations

MAX_LOG_QP_128: dict[int, int] = {10: 27, 11: 54, 12: 109, 13: 218, 14: 438, 15: 881, 16: 1772, 17: 3544}

SECURITY_LEVEL_BITS = 128


def max_log_qp(log_n: int) -> int:
    """Largest total modulus (bits) that keeps 128-bit security at ring degree 2^log_n."""
    if log_n not in MAX_LOG_QP_128:
        raise ValueError(f"no security bound known for N = 2^{log_n}")
    return MAX_LOG_QP_128[log_n]


def is_secure(log_n: int, log_qp: float, secret: str = "ternary") -> bool:
    """True when (N, log QP) meets the 128-bit bound for a uniform ternary secret."""
    return secret == "ternary" and log_n in MAX_LOG_QP_128 and log_qp <= MAX_LOG_QP_128[log_n]


def min_log_n_for(log_qp: float) -> int | None:
    """Smallest log N whose bound admits log_qp bits, or None if no tabulated N does."""
    for log_n in sorted(MAX_LOG_QP_128):
        if log_qp <= MAX_LOG_QP_128[log_n]:
            return log_n
    return None
