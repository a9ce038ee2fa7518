"""`henn compile` -> `henn serve` -> `henn predict`, as a user runs them, and noise flooding."""

from __future__ import annotations

import json

import numpy as np
import pytest
from deploy_support import ZOO, ServerProcess, compile_file, digits

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
