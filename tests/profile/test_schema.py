"""The results schema: the schema itself, valid and invalid documents, writing and reading."""

from __future__ import annotations

import copy
import json
import math
from pathlib import Path

import jsonschema
import pytest

from henn.errors import InputError
from henn.profile import results

FIXTURES = Path(__file__).parent / "fixtures"


def _valid_doc():
    doc = results.new_document("primitives", command="henn profile primitives", settings={"repeats": 2})
    doc["records"] = [
        results.record(
            "primitives",
            "seal",
            "multiply_relin",
            mode="library",
            depth=1,
            params={"log_n": 13, "log_qp": 160.0, "log_q": [60, 40], "log_p": [60], "log_scale": 40, "slots": 4096},
            latency={
                "median": 0.001,
                "min": 0.0009,
                "max": 0.002,
                "q1": 0.00095,
                "q3": 0.0011,
                "repeats": 3,
                "warmup": 1,
            },
            throughput=4.1e6,
            error=[{"input": "ones", "relative_pct": 1e-6, "bits": 24.5}],
            memory={"peak_rss_bytes": 10, "method": "vmhwm"},
        ),
        results.failed("primitives", "lattigo", "open", RuntimeError("bridge missing"), mode="fixed", depth=1),
    ]
    return doc


def test_schema_is_valid_draft_2020_12():
    jsonschema.Draft202012Validator.check_schema(results.schema())
    assert results.schema()["properties"]["schema_version"] == {"const": 1}


def test_valid_document_and_fixtures():
    results.validate(_valid_doc())
    files = sorted(FIXTURES.glob("*.json"))
    assert files, "fixtures missing"
    for path in files:
        results.read_results(path)


@pytest.mark.parametrize(
    "breakage, needle",
    [
        (lambda d: d["records"][0].pop("latency"), "latency"),
        (lambda d: d["records"][1].update(error_message=None), "error_message"),
        (lambda d: d["records"][0].update(error_message="should be null"), "error_message"),
        (lambda d: d["records"][0].update(status="maybe"), "status"),
        (lambda d: d["records"][0]["latency"].update(median=-1.0), "median"),
        (lambda d: d["records"][0].update(suite="unknown"), "suite"),
        (lambda d: d["records"][0]["error"][0].update(input="zeros"), "input"),
        (lambda d: d["run"].pop("machine"), "machine"),
        (lambda d: d["records"][0].update(surprise=1), "surprise"),
    ],
)
def test_invalid_records_are_refused(breakage, needle):
    doc = copy.deepcopy(_valid_doc())
    breakage(doc)
    with pytest.raises(InputError) as info:
        results.validate(doc)
    assert needle in str(info.value) and "schema" in str(info.value)


def test_other_schema_version_says_what_to_do():
    doc = _valid_doc()
    doc["schema_version"] = 2
    with pytest.raises(InputError, match="re-run `henn profile`"):
        results.validate(doc)


def test_write_cleans_nan_and_refuses_invalid(tmp_path):
    doc = _valid_doc()
    doc["records"][0]["throughput"] = math.nan
    path = results.write_results(tmp_path / "sub" / "r.json", doc)
    assert json.loads(path.read_text())["records"][0]["throughput"] is None
    assert results.read_results(path)["schema_version"] == 1
    doc["records"][0]["status"] = "broken"
    with pytest.raises(InputError):
        results.write_results(tmp_path / "bad.json", doc)
    assert not (tmp_path / "bad.json").exists()


def test_read_errors(tmp_path):
    with pytest.raises(InputError, match="does not exist"):
        results.read_results(tmp_path / "missing.json")
    (tmp_path / "x.json").write_text("{not json")
    with pytest.raises(InputError, match="cannot read"):
        results.read_results(tmp_path / "x.json")
