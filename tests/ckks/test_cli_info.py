"""`henn info`: every backend with its version, and the parameters each would choose."""

from __future__ import annotations

import re

import pytest

from henn import cli
from henn.ckks import backends
from henn.ckks.selection import select_parameters

BACKENDS = ["plain", "seal", "lattigo", "gpu"]


@pytest.fixture(scope="module")
def info_output():
    import contextlib
    import io

    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        rc = cli.main(["info", "--depth", "7"])
    return rc, buf.getvalue()


def test_info_runs(info_output):
    rc, out = info_output
    assert rc == 0
    assert out.startswith("backends:")
    assert "parameters for depth 7:" in out
    fixed = select_parameters(7, mode="fixed")
    line = next(ln for ln in out.splitlines() if "fixed (shared)" in ln)
    assert fixed.describe() in line and "depth=7" in line
    assert "unavailable" not in out


def test_info_lists_every_discovered_backend(info_output):
    _, out = info_output
    for name, (ok, info) in backends.available().items():
        assert re.search(rf"^  {re.escape(name)}\s+{'ok' if ok else 'MISSING'}\s+{re.escape(info)}$", out, re.M), name


@pytest.mark.parametrize("name", BACKENDS)
def test_info_backend_version_and_parameters(info_output, name):
    _, out = info_output
    found = backends.available()
    assert name in found, f"backend {name!r} is not discovered (known: {sorted(found)})"
    ok, version = found[name]
    assert ok, f"backend {name!r} is not available: {version}"
    assert re.search(rf"^  {name}\s+ok\s+{re.escape(version)}$", out, re.M)
    line = next((ln for ln in out.splitlines() if ln.strip().startswith(f"library: {name} ")), None)
    assert line is not None, f"no parameters line for {name}:\n{out}"
    params = select_parameters(7, backend=name)
    assert params.describe() in line and "depth=7" in line and "INSECURE" not in line


def test_info_options(capsys):
    assert cli.main(["info", "--depth", "2", "--slots", "16384", "--log-scale", "30"]) == 0
    out = capsys.readouterr().out
    line = next(ln for ln in out.splitlines() if "fixed (shared)" in ln)
    assert "depth=2" in line and "slots=16384" in line and "scale=2^30" in line


def test_info_bad_depth_reported(capsys):
    with pytest.raises(SystemExit) as exc:
        cli.main(["info", "--depth", "0"])
    assert exc.value.code == 2 and "--depth: 0 is out of range" in capsys.readouterr().err


def test_info_lists_the_bootstrapping_backends_and_their_presets(info_output):
    _, out = info_output
    assert re.search(r"^bootstrapping: .*\bgpu\b.*\bopenfhe\b", out, re.M)
    assert re.search(r"^  boot-n16-openfhe .*\[lattigo, openfhe, plain\]$", out, re.M)
    assert re.search(r"^  boot-n16 .*\[lattigo, plain\]$", out, re.M)  # no 40-bit levels from 31-bit words
    assert re.search(r"^  boot-n16-gpu .*\[gpu, lattigo, openfhe, plain\]$", out, re.M)
