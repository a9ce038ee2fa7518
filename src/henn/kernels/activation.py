"""Encrypted evaluation of a polynomial activation's core (forms of approximate_activations):
identity u, square u^2, cubic u (u^2 + inner), quartic (u^2 + inner)^2 + tcoef u, with u = x + shift.
Additions of constants are free; the quartic's tcoef * u uses the level its branch has to spare
and is encoded at the scale that lands it exactly on the scale of (u^2 + inner)^2.

relin=False leaves the last product as it comes, unrelinearized (degree 2) and unrescaled, where nothing
is added to it after (`defers_relin`): the linear layer after it sums the products at their level,
relinearizes its outputs and only then rescales them (lazy relinearization). Rescaling a product of
degree 2 first would multiply its rounding error by s^2: 100x the error on MNIST's CNN.

`complex_act_core` is the same for complex packing (henn.program): two images per slot, one per part."""

from __future__ import annotations

from henn.activations import COMPLEX_FORMS, CORE_FORMS, form
from henn.ckks.values import Ciphertext
from henn.errors import UnsupportedOperation


def defers_relin(attrs: dict) -> bool:
    """Whether the core can end on an unrelinearized product: it multiplies, and adds nothing after."""
    return form(attrs["form"]).defers_relin(attrs)


def act_core(ev, x: Ciphertext, attrs: dict, *, relin: bool = True) -> Ciphertext:
    name = attrs["form"]
    if name not in _CORES:
        raise UnsupportedOperation(f"an act step evaluates the forms {', '.join(CORE_FORMS)}, not {name!r}")
    if not relin and not defers_relin(attrs):
        raise UnsupportedOperation(f"a {name} activation core cannot leave its last product unrelinearized")
    u = ev.add(x, attrs["shift"]) if attrs["shift"] else x
    last = ev.rescale if relin else (lambda ct: ct)  # the last product: rescaled here, or by the layer after
    return _CORES[name](ev, u, attrs, relin, last)


def _square(ev, u, attrs, relin, last):
    return last(ev.square(u, relinearize=relin))


def _inner(ev, u, attrs):
    sq = ev.rescale(ev.square(u))
    return ev.add(sq, attrs["inner"]) if attrs["inner"] else sq


def _cubic(ev, u, attrs, relin, last):
    return last(ev.multiply(_inner(ev, u, attrs), ev.drop_level(u, 1), relinearize=relin))


def _quartic(ev, u, attrs, relin, last):
    h = last(ev.square(_inner(ev, u, attrs), relinearize=relin))
    if attrs["tcoef"]:  # never with relin=False (defers_relin)
        q = ev.backend.prime(u.level)
        sigma = h.scale * q / u.scale
        t = ev.rescale(ev.multiply(u, attrs["tcoef"], scale=sigma))
        t = ev.drop_to_level(t, h.level)
        h = ev.add(h, t)
    return h


_CORES = {"identity": lambda ev, u, attrs, relin, last: u, "square": _square, "cubic": _cubic, "quartic": _quartic}
if tuple(_CORES) != CORE_FORMS:  # every core form of henn.activations.FORMS is evaluated here
    raise AssertionError(f"encrypted cores {tuple(_CORES)} do not match the forms {CORE_FORMS}")


def complex_act_core(ev, x: Ciphertext, attrs: dict, *, relin: bool = True) -> Ciphertext:
    """An identity or square core on both parts of complex-packed slots (henn.program, Complex packing).

    The shift is added to both parts, c (1 + i). A square's input holds z = (x_A + i x_B) / 2 (its linear
    step carries the 1/2); u = z + conj(z) = x_A and v = z - conj(z) = i x_B, so u^2 - i v^2 = x_A^2 +
    i x_B^2: one conjugation, two products, the -i exact (a monomial), one relinearization (or none: a
    sum of products of degree 2, for the linear layer after it, as act_core leaves it)."""
    name = attrs["form"]
    if name not in COMPLEX_FORMS:
        raise UnsupportedOperation(
            f"complex packing evaluates {' and '.join(COMPLEX_FORMS)} activation cores, not {name!r}"
        )
    shift = attrs["shift"]
    z = ev.add(x, complex(shift, shift)) if shift else x
    if name == "identity":
        return z
    zc = ev.conjugate(z)
    u, v = ev.add(z, zc), ev.sub(z, zc)
    w = ev.add(ev.square(u, relinearize=False), ev.multiply_integer(ev.square(v, relinearize=False), -1j))
    return ev.rescale(ev.relinearize(w)) if relin else w
