"""The gpu backend (backend.py): RNS-CKKS on torch tensors in 31-bit words with Triton kernels."""

from henn.ckks.backends.gpu.backend import BACKEND

__all__ = ["BACKEND"]
