"""Deployment: the compiled model file (artefact.py), both ends of a deployed model from that file
alone (local.py), the inference server (service.py, app.py, store.py) and its network client
(remote.py). Sits above the runtime; nothing here imports the compiler."""

__all__ = ["Artefact", "Client", "Server"]


def __getattr__(name):  # lazy: `henn --help` imports henn.deploy.flood without the runtime
    if name == "Artefact":
        from henn.deploy.artefact import Artefact

        return Artefact
    if name in ("Client", "Server"):
        from henn.deploy import local

        return getattr(local, name)
    raise AttributeError(f"module 'henn.deploy' has no attribute {name!r}")
