"""Deployment: the compiled model file (artefact.py) and its weight-free client part (client_model.py),
both ends of a deployed model from those files alone (local.py), the client's passphrase-protected key
file (keyfile.py), request and response files (messages.py), the inference server (service.py, app.py,
store.py) and its network client (remote.py). Sits above the runtime; nothing here imports the
compiler. Who holds what, and the threat model: docs/deployment.md."""

__all__ = ["Artefact", "Client", "ClientModel", "Server"]


def __getattr__(name):  # lazy: `henn --help` imports henn.deploy.flood without the runtime
    if name == "Artefact":
        from henn.deploy.artefact import Artefact

        return Artefact
    if name == "ClientModel":
        from henn.deploy.client_model import ClientModel

        return ClientModel
    if name in ("Client", "Server"):
        from henn.deploy import local

        return getattr(local, name)
    raise AttributeError(f"module 'henn.deploy' has no attribute {name!r}")
