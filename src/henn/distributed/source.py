"""The model a cluster run evaluates, as the server's model file (henn.deploy.Artefact): read from a
path, or made from a CompiledModel in this process as `henn compile` makes it."""

from __future__ import annotations

import os
from pathlib import Path

from henn.deploy.artefact import Artefact
from henn.deploy.checks import InputChecks
from henn.errors import InputError, UnsupportedOperation


def artefact_of(model) -> Artefact:
    """The model file of `model`: a path to one (`henn compile --out`), an Artefact, or a CompiledModel."""
    if isinstance(model, Artefact):
        artefact = model
    elif isinstance(model, (str, os.PathLike)):
        if not Path(model).is_file():
            raise InputError(f"no model file at {model}: write one with `henn compile ... --out model.henn`")
        artefact = Artefact.load(Path(model))
    else:
        artefact = _of_compiled(model)
    if artefact.segments:
        raise UnsupportedOperation(
            "client-aided models take a round trip per segment: run them over HTTP (henn serve, henn predict), "
            "not on a cluster"
        )
    return artefact


def _of_compiled(cm) -> Artefact:
    from henn.api import CompiledModel  # only a caller that compiled has it imported already

    if not isinstance(cm, CompiledModel):
        raise InputError(
            f"cannot run a {type(cm).__name__} on a cluster: give a model file's path, an Artefact or the "
            "CompiledModel of henn.compile"
        )
    checks = InputChecks.from_compiled(
        cm.compiled.checked, cm.activation_intervals(), cm.activation_check, cm.compiled.final
    )
    options = {"backend": cm.backend_name, "mode": cm.mode, "images_per_set": cm.program.images_per_set}
    return Artefact(cm.program, cm.backend_name, checks, model="compiled", options=options)
