"""`henn compile` -> `henn serve` -> `henn predict`, as a user runs them, and noise flooding."""

from __future__ import annotations

import dataclasses
import json
import re

import numpy as np
import pytest
from deploy_support import ZOO, ServerProcess, compile_file, digits

import henn
from henn import cli
from henn.deploy import Artefact, Client, Server
from henn.deploy.flood import check_bits
from henn.errors import InputError


def test_compile_serve_predict(tmp_path, capsys):
    path = tmp_path / "m.henn"
    argv = ["compile", str(ZOO), "--input-shape", "1,28,28", "--backend", "plain", "--out", str(path)]
    assert cli.main(argv) == 0
    out = capsys.readouterr().out
    assert "evaluation keys to upload: at most" in out and "per request: 7 ciphertexts in" in out
    assert Artefact.load(path).program.mode == "single"
    with ServerProcess(path, tmp_path / "store") as server:
        argv = [
            "predict",
            "--server",
            server.url,
            "--images",
            "3",
            "--flood-bits",
            "12",
            "--json",
            str(tmp_path / "r.json"),
        ]
        assert cli.main(argv) == 0
    out = capsys.readouterr().out
    assert "accuracy 1.0000" in out and "per request:" in out and "keys:" in out
    result = json.loads((tmp_path / "r.json").read_text())
    assert result["images"] == 3 and result["requests"] == 3 and result["flood_bits"] == 12
    assert result["request_bytes_each"] > 0 and result["key_bytes"] > 0


@pytest.mark.parametrize(
    "argv",
    [
        ["compile", str(ZOO), "--input-shape", "1,x,28", "--out", "m.henn"],
        ["compile", str(ZOO), "--input-shape", "0,28,28", "--out", "m.henn"],
        ["predict", "--server", "http://127.0.0.1:1", "--flood-bits", "0"],
        ["serve", "m.henn", "--port", "70000"],
        ["serve", "m.henn", "--max-header-bytes", "100"],
        ["serve", "m.henn", "--read-timeout", "0"],
        ["serve", "m.henn", "--max-uploads", "0"],
        ["serve", "m.henn", "--min-rate", "0"],
        ["data", "fetch", "imagenet"],
    ],
)
def test_bad_arguments_are_refused_at_parse_time(argv, capsys):
    with pytest.raises(SystemExit) as exc:
        cli.main(argv)
    assert exc.value.code == 2 and "error:" in capsys.readouterr().err


def test_a_server_that_cannot_be_reached_is_one_clear_error(capsys):
    assert cli.main(["predict", "--server", "http://127.0.0.1:9", "--images", "1"]) == 2
    assert "cannot reach the henn server" in capsys.readouterr().err


def test_flooding_hides_the_low_bits_and_keeps_the_predictions(tmp_path):
    cm, path = compile_file(tmp_path / "m.henn")
    x, labels = digits(4)
    server = Server.load(path)
    results = {}
    for bits in (None, 6):
        client = Client.load(path, flood_bits=bits, seed=5)
        client.generate_keys()
        session = server.open_session(server.read_keys(client.key_blobs()))
        results[bits] = np.concatenate(
            [client.decrypt(server.evaluate(session, client.encrypt(x[i : i + 1])), 1) for i in range(4)]
        )
    noise = results[6] - results[None]
    assert 0.5 * 2**-6 < noise.std() < 2 * 2**-6  # N(0, 2^-12) per logit
    assert (results[6].argmax(1) == labels).all()
    for bad in (0, 41, 2.5, True):
        with pytest.raises(InputError):
            check_bits(bad)


def test_compile_places_bootstraps_from_calibration_inputs(tmp_path, capsys):
    images, _ = digits(203)
    np.save(tmp_path / "cal.npy", images[:200])
    path = tmp_path / "deep.henn"
    argv = ["compile", str(ZOO), "--input-shape", "1,28,28", "--backend", "plain", "--params", "insecure_boot_n12"]
    assert cli.main([*argv, "--bootstrap", "--calibration", str(tmp_path / "cal.npy"), "--out", str(path)]) == 0
    art = Artefact.load(path)
    out = capsys.readouterr().out
    assert f"{art.program.bootstraps} bootstraps placed (ranges from 200 calibration inputs)" in out
    assert art.program.bootstraps >= 2 and art.checks.bootstraps is not None
    client, server = Client.load(path), Server.load(path)
    client.generate_keys()
    session = server.open_session(server.read_keys(client.key_blobs()))
    x = images[200:203]  # not among the calibration inputs
    got = np.concatenate([client.decrypt(server.evaluate(session, client.encrypt(x[i : i + 1])), 1) for i in range(3)])
    ref = henn.compile(str(ZOO), (1, 28, 28), backend="plain").reference(x)
    assert np.abs(got - ref).max() < 0.05 and (got.argmax(1) == ref.argmax(1)).all()
    with pytest.raises(InputError, match="beyond the bound"):  # the file's own bootstrap bound check, alone
        dataclasses.replace(art.checks, graph=None, input_bounds=None).run(x * 40.0)
    with pytest.raises(InputError, match=r"outside -0.1 .. 1.1 \(the calibration inputs' range\)"):  # weight-free
        art.client_part().checks.run(x * 40.0)
    assert art.describe()["options"]["calibration_inputs"] == 200 and art.describe()["options"]["bootstrap"]


@pytest.mark.parametrize(
    "calibration, message",
    [
        (None, "--bootstrap needs --calibration"),
        (np.zeros((4, 28, 28)), r"have shape \(4, 28, 28\): give \(n, 1, 28, 28\)"),
        (np.full((2, 1, 28, 28), np.nan), "NaN or infinite"),
        (np.array(["a", "b"]), "give real numbers|have shape"),
        (b"not a numpy file", "cannot read calibration inputs"),
    ],
)
def test_compile_refuses_missing_or_bad_calibration_inputs(tmp_path, capsys, calibration, message):
    argv = ["compile", str(ZOO), "--input-shape", "1,28,28", "--backend", "plain", "--params", "insecure_boot_n12"]
    argv += ["--bootstrap", "--out", str(tmp_path / "m.henn")]
    if isinstance(calibration, bytes):
        (tmp_path / "c.npy").write_bytes(calibration)
        argv += ["--calibration", str(tmp_path / "c.npy")]
    elif calibration is not None:
        np.save(tmp_path / "c.npy", calibration)
        argv += ["--calibration", str(tmp_path / "c.npy")]
    assert cli.main(argv) == 2
    assert re.search(message, capsys.readouterr().err)
    assert not (tmp_path / "m.henn").exists()
