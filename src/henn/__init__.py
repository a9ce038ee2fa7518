"""henn: neural-network inference on CKKS-encrypted data, over several CKKS libraries."""

__version__ = "0.1.0"

__all__ = ["CompiledModel", "compile", "connect"]


def __getattr__(name):  # lazy: `import henn` stays light (no onnx/scipy until the compiler is used)
    if name == "connect":  # the network client: never imports the compiler
        from henn.deploy.remote import connect

        return connect
    if name in __all__:
        from henn import api

        return getattr(api, name)
    raise AttributeError(f"module 'henn' has no attribute {name!r}")
