"""henn: neural-network inference on CKKS-encrypted data, over several CKKS libraries."""

__version__ = "0.1.0"
