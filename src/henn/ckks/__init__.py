"""Backend-neutral CKKS: parameters with a security check, one interface over several libraries."""

from henn.ckks.backend import Backend
from henn.ckks.backends import available, backend_class, open_backend
from henn.ckks.evaluator import Evaluator
from henn.ckks.params import Parameters, ParametersLiteral
from henn.ckks.precision import precision_bits
from henn.ckks.selection import select_parameters
from henn.ckks.values import Ciphertext, EvaluationKeys, GaloisKeys, Plaintext, PublicKey, RelinKey, SecretKey

__all__ = [
    "Backend",
    "Ciphertext",
    "EvaluationKeys",
    "Evaluator",
    "GaloisKeys",
    "Parameters",
    "ParametersLiteral",
    "Plaintext",
    "PublicKey",
    "RelinKey",
    "SecretKey",
    "available",
    "backend_class",
    "open_backend",
    "precision_bits",
    "select_parameters",
]
