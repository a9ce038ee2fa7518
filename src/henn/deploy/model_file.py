"""The client's view of either model file: a client part as it is, a whole model file (whose holder has the
weights anyway) through its client part with the input checks it carries."""

from __future__ import annotations

from pathlib import Path

from henn.deploy.artefact import Artefact
from henn.deploy.client_model import ClientModel
from henn.deploy.facts import MODEL_FORMAT
from henn.errors import SerializationError
from henn.program import ARCHIVE_ERRORS, open_archive


def read_client_model(data: bytes) -> ClientModel:
    """A ClientModel from a client part or a whole model file; anything malformed is a SerializationError."""
    try:
        _, manifest = open_archive(data, "__manifest__")
    except ARCHIVE_ERRORS as exc:
        raise SerializationError(f"not a henn model file ({exc}): write it with `henn compile --out`") from None
    if isinstance(manifest, dict) and manifest.get("format") == MODEL_FORMAT:
        return Artefact.from_bytes(data).client_part(share_checks=True)
    return ClientModel.from_bytes(data)


def load_client_model(path: str | Path) -> ClientModel:
    return read_client_model(Path(path).read_bytes())
