"""Deployment: the compiled model file (artefact.py), both ends of a deployed model from that file
alone (local.py), the inference server (service.py, app.py, store.py) and its network client
(remote.py). Sits above the runtime; nothing here imports the compiler."""

from henn.deploy.artefact import Artefact
from henn.deploy.local import Client, Server

__all__ = ["Artefact", "Client", "Server"]
