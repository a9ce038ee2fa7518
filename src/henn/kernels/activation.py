"""Encrypted evaluation of a polynomial activation's core (forms of approximate_activations):
identity u, square u^2, cubic u (u^2 + inner), quartic (u^2 + inner)^2 + tcoef u, with u = x + shift.
Additions of constants are free; the quartic's tcoef * u uses the level its branch has to spare
and is encoded at the scale that lands it exactly on the scale of (u^2 + inner)^2.

relin=False leaves the last product unrelinearized (degree 2) where nothing is added to it after
(`defers_relin`): the linear layer after it relinearizes its outputs instead (lazy relinearization)."""

from __future__ import annotations

from henn.ckks.values import Ciphertext
from henn.errors import UnsupportedOperation


def defers_relin(attrs: dict) -> bool:
    """Whether the core can end on an unrelinearized product: it multiplies, and adds nothing after."""
    return attrs["form"] in ("square", "cubic") or (attrs["form"] == "quartic" and not attrs["tcoef"])


def act_core(ev, x: Ciphertext, attrs: dict, *, relin: bool = True) -> Ciphertext:
    form = attrs["form"]
    if not relin and not defers_relin(attrs):
        raise UnsupportedOperation(f"a {form} activation core cannot leave its last product unrelinearized")
    u = ev.add(x, attrs["shift"]) if attrs["shift"] else x
    if form == "identity":
        return u
    sq = ev.rescale(ev.square(u, relinearize=relin or form != "square"))
    if form == "square":
        return sq
    v = ev.add(sq, attrs["inner"]) if attrs["inner"] else sq
    if form == "cubic":
        return ev.rescale(ev.multiply(v, ev.drop_level(u, 1), relinearize=relin))
    h = ev.rescale(ev.square(v, relinearize=relin or bool(attrs["tcoef"])))
    if attrs["tcoef"]:
        q = ev.backend.prime(u.level)
        sigma = h.scale * q / u.scale
        t = ev.rescale(ev.multiply(u, attrs["tcoef"], scale=sigma))
        t = ev.drop_to_level(t, h.level)
        h = ev.add(h, t)
    return h
