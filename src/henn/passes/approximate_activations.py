"""approximate_activations: choose how each polynomial activation is evaluated; refuse the rest.

Every `poly` node gets an evaluation form (henn.activations.FORMS) with the least depth, written as

    p(x) = gain * core(x) + offset,    u = x + shift,
    identity (deg <= 1): core = u                                       0 levels
    square   (deg 2):    core = u^2            (completing the square)  1 level
    cubic    (deg 3):    core = u (u^2 + inner)                         2 levels
    quartic  (deg 4):    core = (u^2 + inner)^2 + tcoef * u             2 levels

Shifts and inner constants are additions (free); `tcoef * u` is a scalar product on a branch with a
spare level; gain and offset are later folded into the next linear layer (merge_act_pool), so a
degree-2 activation costs one level and a degree-4 one two, as in paper 000 Table 5.

    general  (any degree): all of p in the power basis (henn.kernels.poly, output at the input
             scale): ceil(log2(d + 1)) levels, one more with a fitted range beyond [-1, 1]

The general form serves degrees above 4, and polynomials whose gain and offset no linear layer can
take (their output reaches a residual addition or a per-channel polynomial before any Conv/Gemm).
Its coefficients are in u = x + shift, and |u| <= bound is expected: merge_act_pool folds the shift,
and the 1 / bound of kernels.poly, into the layer before where it can.

    chebyshev (approximations): s_m(...s_1(t)) [* u], t = u / bound, Chebyshev series evaluated in the
             Chebyshev basis (henn.kernels.chebyshev): sum of ceil(log2(d_i + 1)) levels, one more for
             the product by u, one more for t when bound != 1 (merge_act_pool folds it where it can)

Smooth non-polynomial activations (GELU, SiLU, Sigmoid, Tanh, ELU, Softplus, Mish, and LeakyReLU and
Hardswish with a larger error) become chebyshev-form polynomials: a Chebyshev fit
(henn.approximation) on the range their inputs take over the calibration images, widened by
henn.ranges.OBSERVED_SLACK about its centre, which is also the range henn.ranges accepts at run time.
Their degree is options.activation_degree (one for all or per layer name), else the lowest that keeps the
calibration images' predictions, plus one step, and at most the lowest of henn.approximation.DEGREES whose
error is within henn.approximation.TARGET of the output range (henn.passes.smooth_degrees).
ReLU and |x| become x (a + b s(t)) with s a composite of minimax sign polynomials on [-R, R], R the
largest |input| widened the same way, within R 2^-bits (bits: options.activation_bits, one for all or
per layer name; layers it does not name get the fewest bits that keep the calibration images' predictions,
henn.passes.sign_bits).
Max pools become trees of composite maxima, b + relu(a - b) with that ReLU on the range of a - b
(henn.passes.maxpool_form), bits as for ReLU.
Without calibration images they are refused, and so are the others (ReLU6, SELU, ...), naming the layer;
so are polynomials with NaN/infinite coefficients or a fitted range that is not a finite interval
(henn.ranges checks inputs against it).
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np
from numpy.polynomial import Polynomial

from henn import approximation, ranges
from henn.activations import ACTIVATIONS, APPROXIMATED, CORE_FORMS, FORMS, NONPOLYNOMIAL
from henn.approximation import Approximation
from henn.errors import InputError, UnsupportedOperation
from henn.ir.graph import Graph, Node
from henn.ir.ops import COMPOSED_OPS, LINEAR_OPS, Op
from henn.kernels.chebyshev import chain_depth
from henn.kernels.poly import polynomial_depth
from henn.passes import maxpool_form, sign_bits, smooth_degrees
from henn.program import CPOLY_LEVELS, GENERAL_TARGET
from henn.runtime.inputs import check_images

MAX_DEGREE = max(FORMS[f].max_degree or 0 for f in CORE_FORMS)


def run(graph: Graph, options=None) -> Graph:
    g = graph.copy()
    fits = fit_activations(g, options)
    g = _approximated(g, fits)
    for n in g.nodes:
        if n.op == Op.ACTIVATION:
            raise UnsupportedOperation(
                f"layer {n.name!r} is a {n.attrs['kind']} activation, which is not a polynomial and cannot be "
                f"evaluated on CKKS ciphertexts; supported: henn.Poly activations ({', '.join(ACTIVATIONS)}, or any "
                f"polynomial), and {', '.join(APPROXIMATED)} (approximated on their calibrated range): retrain "
                "with one of those (henn.training's PolyAct for a trained polynomial)"
            )
        if n.op == Op.POLY and n.name not in fits:
            check_poly(n.attrs, n.name)
        if n.op == Op.POLY and "form" not in n.attrs:
            general = not takes_affine(g, n.output)
            n.attrs.update(decompose(n.attrs["coefficients"], n.name, general=general, bound=_bound(n.attrs)))
        if n.op == Op.CHANNEL_POLY:
            degree = channel_poly_degree(n.params["coefficients"], n.name)
            n.attrs.update(degree=degree, levels=CPOLY_LEVELS[degree])
    return g


def fit_activations(g: Graph, options) -> dict[str, Approximation | dict]:
    """A polynomial for each non-polynomial activation henn approximates, on the range its inputs
    take over options.calibration (widened by henn.ranges.OBSERVED_SLACK); for each max pool, the
    composite relu of its composite max (henn.passes.maxpool_form)."""
    wanted = [n for n in g.nodes if n.op == Op.ACTIVATION and n.attrs["kind"] in APPROXIMATED]
    pools = [n for n in g.nodes if n.op == Op.MAXPOOL]
    if not wanted and not pools:
        return {}
    calibration = getattr(options, "calibration", None)
    if calibration is None:
        n = (wanted + pools)[0]
        what = (
            "a max pool, which henn evaluates by composite maxima"
            if n.op == Op.MAXPOOL
            else (f"a {n.attrs['kind']} activation, which henn approximates by a polynomial")
        )
        raise InputError(
            f"layer {n.name!r} is {what} on the range its inputs take: calibration images are needed to "
            "approximate it; pass calibration=<sample inputs like the training data> to henn.compile "
            "(henn compile: --calibration samples.npy)"
        )
    signs = [n for n in wanted if NONPOLYNOMIAL[n.attrs["kind"]].sign_form is not None]
    smooth = [n for n in wanted if n not in signs]
    degrees = _per_layer(options, "activation_degree", [n.name for n in smooth])
    bits = _per_layer(options, "activation_bits", [n.name for n in signs + pools])
    images = check_images(calibration, tuple(g.input_shape))
    bounds = ranges.observed_bounds(g, images, (Op.ACTIVATION, Op.MAXPOOL))
    fixed = _smooth_fits(smooth, bounds, degrees)  # the sign precision does not change them
    open_smooth = [n for n in smooth if degrees(n.name) is None]
    if open_smooth and smooth_degrees.applies(images):  # the degree rule, ReLUs and max pools at default precision
        signs_default = _sign_fits(signs, pools, bounds, lambda name: bits(name))
        target = dict(fixed)
        degree = smooth_degrees.choose(
            g, images, lambda cap: _approximated(g, {**_capped(open_smooth, target, cap), **signs_default})
        )
        g.meta = dataclasses.replace(g.meta, activation_degrees=degree)
        fixed = _capped(open_smooth, target, degree.degree)

    def fits_at(default: float | None) -> dict[str, Approximation | dict]:
        """Every fit, the sign forms the option leaves open at `default` bits."""
        return {**fixed, **_sign_fits(signs, pools, bounds, lambda name: default if bits(name) is None else bits(name))}

    if not any(bits(n.name) is None for n in signs + pools):
        return fits_at(None)
    chosen = sign_bits.choose(g, images, lambda b: _approximated(g, fits_at(b)))  # the precision rule
    g.meta = dataclasses.replace(g.meta, activation_bits=chosen)
    return fits_at(chosen.bits)


def _smooth_fits(nodes: list[Node], bounds: dict[str, tuple[float, float]], degrees) -> dict[str, Approximation]:
    """Chebyshev fits of these smooth activations on their observed bounds (degree: the option, else the
    lowest meeting henn.approximation.TARGET)."""
    fits = {}
    for n in nodes:
        kind, f = n.attrs["kind"], NONPOLYNOMIAL[n.attrs["kind"]].function
        assert f is not None  # every APPROXIMATED activation has a NumPy meaning
        lo, hi = approximation.interval(*bounds[n.name], ranges.OBSERVED_SLACK)
        degree = degrees(n.name)
        fits[n.name] = (
            approximation.choose(kind, f, lo, hi) if degree is None else approximation.fit(kind, f, lo, hi, degree)
        )
    return fits


def _capped(nodes: list[Node], fits: dict, cap: int) -> dict[str, Approximation]:
    """`fits`, with these smooth activations' at the lower of `cap` and the degree they have there."""
    out = dict(fits)
    for n in nodes:
        fit = fits[n.name]
        if fit.degrees[0] > cap:
            f = NONPOLYNOMIAL[n.attrs["kind"]].function
            assert f is not None
            fit = approximation.fit(n.attrs["kind"], f, fit.lo, fit.hi, cap)
        out[n.name] = fit
    return out


def _sign_fits(
    nodes: list[Node], pools: list[Node], bounds: dict[str, tuple[float, float]], bits
) -> dict[str, Approximation | dict]:
    """The composite-sign forms of these activations (ReLU, |x|) and max pools, bits(name) each."""
    fits: dict[str, Approximation | dict] = {
        n.name: maxpool_form.form(bounds[n.name], bits(n.name), n.attrs["kernel"]) for n in pools
    }
    for n in nodes:
        act = NONPOLYNOMIAL[n.attrs["kind"]]
        assert act.function is not None and act.sign_form is not None  # a sign-form activation
        lo, hi = approximation.symmetric_interval(*bounds[n.name], ranges.OBSERVED_SLACK)
        b = bits(n.name)
        fits[n.name] = approximation.composite(
            f"{n.attrs['kind']} (composite sign)",
            act.function,
            lo,
            hi,
            act.sign_form,
            approximation.SIGN_BITS if b is None else b,
        )
    return fits


def _approximated(g: Graph, fits: dict[str, Approximation | dict]) -> Graph:
    """g with these fits in place of its activations and max pools (as `run` puts them)."""
    h = g.copy()
    for n in h.nodes:
        fit = fits.get(n.name)
        if isinstance(fit, dict):
            n.attrs.update(fit)
        elif fit is not None:
            _replace(n, fit)
    return h


def _per_layer(options, option: str, layers: list[str]):
    """The option's value for a layer: one for all, or a dict by layer name (naming only `layers`)."""
    value = getattr(options, option, None)
    if isinstance(value, dict) and set(value) - set(layers):
        raise InputError(
            f"{option} names layers {sorted(set(value) - set(layers))}, which are not activations it applies to; "
            f"those are {layers}"
        )
    return lambda name: value.get(name) if isinstance(value, dict) else value


def _replace(n: Node, fit: Approximation) -> None:
    """The activation node becomes a chebyshev-form poly node evaluating the fit."""
    n.op = Op.POLY
    n.attrs = {
        "name": fit.kind,
        "range": (fit.lo, fit.hi),
        "approximates": fit.kind,
        "approximation_error": fit.error,
        "approximation_relative_error": fit.relative_error,
        **({} if fit.bits is None else {"bits": fit.bits}),
        **chebyshev_form(fit.components, -fit.centre, fit.half_width, fit.times_input),
    }


def channel_poly_degree(coefficients: np.ndarray, layer: str) -> int:
    """The degree a per-channel polynomial is evaluated at (henn.program's cpoly step: b x + c, or
    (a x + b) x + c; a constant counts as degree 1)."""
    if not np.all(np.isfinite(coefficients)):
        raise InputError(
            f"layer {layer!r}: per-channel polynomial coefficients are not finite: the model is "
            "damaged; re-export or retrain it"
        )
    nonzero = np.nonzero(np.any(coefficients != 0, axis=0))[0]
    degree = max(1, int(nonzero[-1]) if len(nonzero) else 0)
    if degree not in CPOLY_LEVELS:
        raise UnsupportedOperation(
            f"layer {layer!r}: per-channel polynomials of degree {degree} are not supported "
            f"(degrees {', '.join(map(str, CPOLY_LEVELS))}: AESPA folds to degree 2)"
        )
    return degree


def check_poly(attrs: dict, layer: str) -> None:
    """Finite coefficients, and a fitted range (if any) that is a finite interval lo < hi."""
    try:
        c = np.asarray(attrs["coefficients"], dtype=np.float64)
    except (TypeError, ValueError, OverflowError):
        c = np.array([np.nan])
    if c.ndim != 1 or not c.size or not np.all(np.isfinite(c)):
        raise InputError(
            f"layer {layer!r}: the polynomial activation's coefficients {attrs['coefficients']!r} are "
            "not a list of finite numbers: the model is damaged; re-export or retrain it"
        )
    rng = attrs.get("range")
    if rng is not None:
        ok = isinstance(rng, (tuple, list)) and len(rng) == 2 and all(isinstance(v, (int, float)) for v in rng)
        if not (ok and math.isfinite(rng[0]) and math.isfinite(rng[1]) and rng[0] < rng[1]):
            raise InputError(
                f"layer {layer!r}: the activation's fitted range {rng!r} is not a finite interval "
                "[lo, hi] with lo < hi: fix the model's range attribute or re-export it"
            )


def trim(coefficients) -> np.ndarray:
    c = np.asarray(coefficients, dtype=np.float64)
    top = np.max(np.abs(c)) if c.size else 0.0
    keep = np.nonzero(np.abs(c) > 1e-12 * max(top, 1e-300))[0]
    return c[: keep[-1] + 1] if keep.size else np.zeros(1)


def takes_affine(g: Graph, value: str) -> bool:
    """Whether every path from `value` reaches a Conv/Gemm, another activation or the output through
    pools and flattens only: merge_act_pool can then move a gain and offset there."""
    for n in g.consumers(value):
        if n.op in (Op.AVGPOOL, *COMPOSED_OPS):
            if not takes_affine(g, n.output):
                return False
        elif n.op not in LINEAR_OPS and n.op != Op.POLY:
            return False
    return True


def _bound(attrs: dict) -> float | None:
    rng = attrs.get("range")
    return max(abs(float(rng[0])), abs(float(rng[1]))) if rng is not None else None


def decompose(coefficients, layer: str = "", *, general: bool = False, bound: float | None = None) -> dict:
    """The evaluation form of the polynomial with these coefficients (constant term first): the
    general form above degree 4 or when asked (bound: max |x| expected, for its conditioning)."""
    c = trim(coefficients)
    deg = len(c) - 1
    if general or deg > MAX_DEGREE:
        return general_form(c, 0.0, bound)
    if deg <= 1:
        c1 = float(c[1]) if deg == 1 else 0.0
        return _form("identity", 0.0, 0.0, 0.0, c1, float(c[0]))
    if deg == 2:
        a = c[1] / (2 * c[2])
        return _form("square", a, 0.0, 0.0, c[2], c[0] - c[2] * a * a)
    shift = c[deg - 1] / (deg * c[deg])  # removes the x^(deg-1) term
    e = (Polynomial(c)(Polynomial([-shift, 1.0]))).coef  # q(u) = p(u - shift)
    e = np.concatenate([e, np.zeros(deg + 1 - len(e))])
    if deg == 3:
        return _form("cubic", shift, e[1] / e[3], 0.0, e[3], e[0])
    b = e[2] / (2 * e[4])
    return _form("quartic", shift, b, e[1] / e[4], e[4], e[0] - e[4] * b * b)


def general_form(coefficients, shift: float = 0.0, bound: float | None = None) -> dict:
    """The general form's attributes: p(u) = sum_k coefficients[k] u^k with u = x + shift, |u| <= bound
    expected (kernels.poly evaluates u / bound when bound > 1: one level, values kept O(1))."""
    b = float(bound) if bound is not None and bound > 1 else 1.0
    c = np.asarray(coefficients, dtype=np.float64)
    c = c[: len(trim(c * b ** np.arange(len(c))))]  # tiny next to the others where |u| reaches b
    coef = tuple(float(v) for v in c)
    return {
        **_form("general", shift, 0.0, 0.0, 1.0, 0.0),
        "coefficients": coef,
        "bound": b,
        "levels": polynomial_depth(c, GENERAL_TARGET, b),
    }


def chebyshev_form(components, shift: float, bound: float, times_input: bool) -> dict:
    """The chebyshev form's attributes: s_m(...s_1(u / bound)) [* u], u = x + shift (see the module docstring)."""
    comps = [np.asarray(c, dtype=np.float64) for c in components]
    return {
        **_form("chebyshev", shift, 0.0, 0.0, 1.0, 0.0),
        "coefficients": tuple(float(v) for c in comps for v in c),
        "degrees": tuple(len(c) - 1 for c in comps),
        "bound": float(bound),
        "times_input": bool(times_input),
        "levels": chain_depth(comps, shift=float(shift), bound=float(bound), times_input=bool(times_input)),
    }


def _form(form, shift, inner, tcoef, gain, offset) -> dict:
    vals = [float(v) + 0.0 for v in (shift, inner, tcoef, gain, offset)]  # + 0.0: no "-0" in dumps
    return dict(zip(("shift", "inner", "tcoef", "gain", "offset"), vals), form=form, levels=FORMS[form].levels or 0)
