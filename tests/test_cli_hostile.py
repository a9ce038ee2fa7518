"""`henn` on hostile arguments and environments: a one-line error and a non-zero exit, never a
traceback; numbers (depths, threads, sizes) bounded before any work or allocation."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest

from henn import cli
from henn.commands import info


@pytest.fixture
def not_a_folder(tmp_path):
    f = tmp_path / "file"
    f.write_text("x")
    return f


def argv_cases(tmp, not_a_folder):
    out = str(tmp / "m.onnx")
    return [
        ["info", "--depth", "1000000000"],
        ["info", "--depth", "-1"],
        ["info", "--depth", "1e3"],
        ["info", "--slots", "0"],
        ["info", "--slots", str(10**30)],
        ["infer", "--threads", "0"],
        ["infer", "--threads", "-2"],
        ["infer", "--images", "0"],
        ["infer", "--batch-group", "0"],
        ["infer", "--json", str(not_a_folder / "r.json")],
        ["infer", "--json", str(tmp)],
        ["train", "--model", "mnist-cnn", "--activation", "square", "--out", out, "--threads", "0"],
        ["train", "--model", "mnist-cnn", "--activation", "square", "--out", out, "--epochs", "0"],
        ["train", "--model", "mnist-cnn", "--activation", "square", "--out", str(not_a_folder / "m.onnx")],
        ["profile", "primitives", "--repeats", "0"],
        ["profile", "primitives", "--warmup", "-1"],
        ["profile", "primitives", "--seed", "-1"],
        ["profile", "model", "--threads", "0,1"],
        ["profile", "kernels", "--dot-sizes", str(1 << 40)],
        ["profile", "primitives", "--out", str(tmp)],
        ["report", "r.json", "--out", str(not_a_folder)],
    ]


def test_bad_arguments_refused_at_parse_time(tmp_path, not_a_folder, capsys):
    for argv in argv_cases(tmp_path, not_a_folder):
        with pytest.raises(SystemExit) as exc:
            cli.main(argv)
        err = capsys.readouterr().err
        assert exc.value.code == 2 and "error: argument" in err and "Traceback" not in err, (argv, err)


@pytest.mark.parametrize(
    "argv,match",
    [
        (["profile", "primitives", "--backends", "plain", "--depths", "1-1000000000"], "within 1..177"),
        (["profile", "primitives", "--backends", "plain", "--depths", "0,1000000000"], "from 1 to 177"),
        (["profile", "primitives", "--backends", "plain", "--depths", "5-3"], "upward"),
    ],
)
def test_depth_ranges_bounded_before_building_them(argv, match, tmp_path, capsys):
    assert cli.main(argv + ["--out", str(tmp_path / "p.json")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("henn: error:") and match in err


@pytest.mark.parametrize("content", [b"[" * 100_000 + b"]" * 100_000, b"\xff\xfe", b"{", b'{"a": NaN}', b""])
def test_hostile_results_files(content, tmp_path, capsys):
    path = tmp_path / "r.json"
    path.write_bytes(content)
    assert cli.main(["report", str(path), "--out", str(tmp_path / "report")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("henn: error:") and "Traceback" not in err


@pytest.mark.parametrize("env", ["abc", "0", "-1", "1.5"])
def test_bad_henn_threads_is_an_error_before_any_work(env, monkeypatch, capsys):
    monkeypatch.setenv("HENN_THREADS", env)
    assert cli.main(["infer", "--backend", "plain", "--images", "1"]) == 2
    captured = capsys.readouterr()
    assert "HENN_THREADS" in captured.err and "Traceback" not in captured.err and "compiled" not in captured.out


def test_profile_whose_every_measurement_failed_exits_nonzero(tmp_path, capsys):
    out = tmp_path / "p.json"
    argv = [
        "profile",
        "primitives",
        "--backends",
        "plain",
        "--modes",
        "library",
        "--depths",
        "177",
        "--ops",
        "encode",
        "--no-isolate",
        "--no-progress",
        "--out",
        str(out),
    ]
    assert cli.main(argv) == 1
    assert "every measurement failed" in capsys.readouterr().err and out.is_file()


@pytest.mark.parametrize(
    "exc,code,match",
    [
        (PermissionError(13, "Permission denied", "/somewhere/r.json"), 2, r"Permission denied \(/somewhere/r.json\)"),
        (IsADirectoryError(21, "Is a directory", "/tmp"), 2, "Is a directory"),
        (RuntimeError("boom"), 1, "internal error: RuntimeError: boom"),
        (KeyError("k"), 1, "internal error: KeyError"),
    ],
)
def test_last_line_of_defence(exc, code, match, monkeypatch, capsys):
    def fail(args):
        raise exc

    monkeypatch.setattr(info, "run", fail)
    assert cli.main(["info"]) == code
    err = capsys.readouterr().err
    assert err.startswith("henn:") and "Traceback" not in err
    assert re.search(match, err)


def test_huge_depth_is_not_killed_for_memory():
    """Regression: `henn info --depth 1000000000` was killed for memory (a fresh process, as a user runs it)."""
    proc = subprocess.run(
        [sys.executable, "-m", "henn.cli", "info", "--depth", "1000000000"], capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 2 and "--depth" in proc.stderr and "Traceback" not in proc.stderr
