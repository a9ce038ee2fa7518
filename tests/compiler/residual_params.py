"""Small insecure parameter sets for the residual-network tests (registered once, by name)."""

from henn.ckks import ParametersLiteral, presets
from henn.ckks.bootstrap_params import BootstrapLiteral


def insecure(name: str, levels: int, boot: bool = False):
    """N = 2^11 (2^12 with bootstrapping, message ratio 2^12, 15 bits), a 60-bit prime and `levels`
    40-bit ones; registered under `name` (an insecure_ preset) the first time."""
    if name not in presets.names():
        bootstrap = BootstrapLiteral(log_message_ratio=12, precision_bits=15.0) if boot else None
        presets.register(
            name, ParametersLiteral(11 if not boot else 12, (60,) + (40,) * levels, (61, 61), 40, bootstrap=bootstrap)
        )
    return presets.get(name)
