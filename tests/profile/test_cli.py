"""`henn profile ...` and `henn report ...` through the command line."""

from __future__ import annotations

from henn.cli import main
from henn.profile.results import read_results


def test_profile_primitives_and_report(tmp_path, capsys):
    out = tmp_path / "p.json"
    rc = main(
        [
            "profile",
            "primitives",
            "--backends",
            "plain",
            "nosuch",
            "--depths",
            "none",
            "--preset",
            "insecure_short_d2",
            "--repeats",
            "2",
            "--min-repeats",
            "1",
            "--warmup",
            "0",
            "--hoisted-steps",
            "2",
            "--no-progress",
            "--no-isolate",
            "--out",
            str(out),
        ]
    )
    assert rc == 0
    doc = read_results(out)
    assert doc["run"]["suite"] == "primitives" and "--preset insecure_short_d2" in doc["run"]["command"]
    assert {r["status"] for r in doc["records"] if r["backend"] == "plain"} == {"ok"}
    assert [r["status"] for r in doc["records"] if r["backend"] == "nosuch"] == ["failed"]
    assert "measurements (1 failed)" in capsys.readouterr().out
    rc = main(["report", str(out), "--out", str(tmp_path / "rep")])
    assert rc == 0 and (tmp_path / "rep" / "report.html").exists()


def test_profile_needs_something_to_do(tmp_path, capsys):
    rc = main(["profile", "kernels", "--backends", "plain", "--depths", "none", "--out", str(tmp_path / "k.json")])
    assert rc == 2 and "--depths" in capsys.readouterr().err


def test_profile_kernels_on_a_preset(tmp_path):
    out = tmp_path / "k.json"
    rc = main(
        [
            "profile",
            "kernels",
            "--backends",
            "plain",
            "--depths",
            "none",
            "--preset",
            "insecure_short_d4",
            "--kernels",
            "dot_product",
            "mul_chain",
            "--dot-sizes",
            "16",
            "--repeats",
            "1",
            "--no-progress",
            "--no-isolate",
            "--out",
            str(out),
        ]
    )
    assert rc == 0
    ops = [r["op"] for r in read_results(out)["records"]]
    assert ops == ["dot_product"] + ["mul_chain"] * 4
