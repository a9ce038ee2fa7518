"""The sweep on tiny settings (plain backend, insecure presets): records, timing rule, failures."""

from __future__ import annotations

from functools import partial

import pytest

from henn.errors import InputError
from henn.profile import harness, primitives, results
from henn.profile.harness import Config, Settings, configurations, parse_depths, sweep, time_call


def _doc(suite, records):
    doc = results.new_document(suite, command="pytest", settings={})
    doc["records"] = records
    results.validate(doc)
    return doc


def test_parse_depths():
    assert parse_depths("1-3,5") == [1, 2, 3, 5]
    assert parse_depths("7") == [7]
    for bad in ("", "a-b", "0-2", "3,x"):
        with pytest.raises(InputError):
            parse_depths(bad)


def test_settings_checked():
    with pytest.raises(InputError, match="--repeats"):
        Settings(repeats=0)
    with pytest.raises(InputError, match="--warmup"):
        Settings(warmup=-1)
    assert Settings(repeats=2, min_repeats=5).min_repeats == 2


def test_time_call_budget_and_repeats():
    calls = []
    lat, mem = time_call(lambda: calls.append(1), Settings(repeats=7, min_repeats=2, warmup=1, budget_s=0.0))
    assert lat["repeats"] == 2 and lat["warmup"] == 1 and len(calls) == 3  # budget 0: stop at min_repeats
    lat, _ = time_call(lambda: None, Settings(repeats=5, min_repeats=1, warmup=0, budget_s=100.0))
    assert lat["repeats"] == 5
    assert lat["min"] <= lat["q1"] <= lat["median"] <= lat["q3"] <= lat["max"]
    assert mem["peak_rss_bytes"] > 0


def test_configurations_order():
    cfgs = configurations(["a", "b"], ["library", "fixed"], [1, 2], ["insecure_short_d2"])
    assert cfgs[0] == Config("a", "library", 1) and cfgs[4] == Config("a", "preset", None, "insecure_short_d2")
    assert len(cfgs) == 10


def test_primitives_on_plain_preset(fast):
    recs, interrupted = sweep(
        "primitives",
        configurations(["plain"], [], [], ["insecure_short_d2"]),
        primitives.run,
        fast,
        progress=False,
        isolate=False,
    )
    assert not interrupted
    by_op = {r["op"]: r for r in recs}
    # parameters without bootstrap parameters: every op but bootstrapping's
    assert set(primitives.OPS) - set(primitives.BOOTSTRAP_OPS) | {"sizes"} == set(by_op)
    assert all(r["status"] == "ok" for r in recs), [r["error_message"] for r in recs if r["status"] != "ok"]
    mul = by_op["multiply_relin"]
    assert mul["mode"] == "preset" and mul["depth"] == 2 and mul["params"]["log_n"] == 10
    assert {e["input"] for e in mul["error"]} == {"ones", "random"}
    assert all(e["bits"] > 40 for e in mul["error"])  # plain backend without noise: exact up to rounding
    assert mul["throughput"] == pytest.approx(512 / mul["latency"]["median"])
    assert by_op["rotate_hoisted"]["extra"]["steps"] == [1, 2]
    summed = by_op["rotate_sum"]["extra"]
    assert (summed["ops_per_call"], summed["steps"], summed["native_sum"]) == (2, [1, 2], False)  # plain loops
    assert by_op["keygen_galois"]["throughput"] is None
    assert by_op["sizes"]["sizes"]["ciphertext_bytes"] > 512 * 16
    _doc("primitives", recs)


def test_failing_backends_do_not_stop_the_sweep(fake_backends, fast):
    cfgs = configurations(["broken_open", "broken_mul", "nosuch", "plain"], [], [], ["insecure_short_d2"])
    recs, _ = sweep(
        "primitives",
        cfgs,
        partial(primitives.run, ops=("add", "multiply_relin", "rescale")),
        fast,
        progress=False,
        isolate=False,
    )
    by = {(r["backend"], r["op"]): r for r in recs}
    assert by[("broken_open", "open")]["status"] == "failed"
    assert "library refused to start" in by[("broken_open", "open")]["error_message"]
    assert by[("broken_mul", "add")]["status"] == "ok"
    assert by[("broken_mul", "multiply_relin")]["status"] == "failed"
    assert "native multiply exploded" in by[("broken_mul", "multiply_relin")]["error_message"]
    assert "native multiply exploded" in by[("broken_mul", "rescale")]["error_message"]  # needs the product
    assert "unknown backend" in by[("nosuch", "open")]["error_message"]
    assert all(by[("plain", op)]["status"] == "ok" for op in ("add", "multiply_relin", "rescale"))
    _doc("primitives", recs)


def test_suite_bug_is_recorded(fake_backends, fast):
    def body(be, rec, settings):
        raise ValueError("bug in a suite")

    recs, _ = sweep(
        "kernels", configurations(["plain"], [], [], ["insecure_short_d2"]), body, fast, progress=False, isolate=False
    )
    assert recs[-1]["op"] == "suite" and "bug in a suite" in recs[-1]["error_message"]


def test_isolated_sweep_runs_in_a_child_process(fast):
    recs, _ = sweep(
        "primitives",
        configurations(["plain"], [], [], ["insecure_short_d2"]),
        partial(primitives.run, ops=("add",)),
        fast,
        progress=False,
        isolate=True,
    )
    assert [r["op"] for r in recs] == ["add"] and recs[0]["status"] == "ok"


def test_library_and_fixed_modes_select_parameters(fast):
    recs, _ = sweep(
        "primitives",
        configurations(["plain"], ["library", "fixed"], [1]),
        partial(primitives.run, ops=("add",)),
        fast,
        progress=False,
        isolate=False,
    )
    assert [(r["mode"], r["depth"], r["status"]) for r in recs] == [("library", 1, "ok"), ("fixed", 1, "ok")]
    assert recs[0]["params"]["log_n"] == 13 and not recs[0]["params"]["insecure"]
    throughput = harness.throughput(4096, recs[0]["latency"])
    assert throughput is not None and throughput > 0


def test_bootstrap_ops_on_a_bootstrapping_preset(fast):
    recs, _ = sweep(
        "primitives",
        configurations(["plain"], [], [], ["insecure_boot_n12"]),
        partial(primitives.run, ops=primitives.BOOTSTRAP_OPS),
        fast,
        progress=False,
        isolate=False,
    )
    assert all(r["status"] == "ok" for r in recs), [r["error_message"] for r in recs if r["status"] != "ok"]
    boots = [r for r in recs if r["op"] == "bootstrap"]
    assert sorted(r["threads"] for r in boots) == [1, 2]
    for r in boots:
        assert r["extra"]["levels_left"] == 3 and r["extra"]["bootstrap_depth"] == 15
        assert r["error"][0]["bits"] > 40  # the plain backend without noise: exact
    assert [r["op"] for r in recs].count("keygen_bootstrap") == 1
    _doc("primitives", recs)
