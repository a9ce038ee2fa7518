"""Runtime: Client (keys, encrypt/decrypt; the only secret-key holder), Server (evaluates a Program
with public keys), Executor (walks Program steps on a Backend)."""

from henn.runtime.client import Client
from henn.runtime.executor import Executor
from henn.runtime.server import Server

__all__ = ["Client", "Executor", "Server"]
