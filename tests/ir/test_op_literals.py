"""IR ops are named by their enum (henn.ir.ops.Op) everywhere in src/henn: no node's op is compared with,
tested against or built from a string literal, so renaming an op or adding one is a change that the
spec table, mypy and this test follow (docs/adding-an-op.md)."""

from __future__ import annotations

import re
from pathlib import Path

import henn
from henn.ir.ops import Op

ROOT = Path(henn.__file__).parent
_LIT = '"(?:' + "|".join(op.value for op in Op) + ')"'
_COMPARE = re.compile(r"\.op\s*(?:==|!=)\s*" + _LIT + r"|" + _LIT + r"\s*(?:==|!=)\s*\w+\.op\b")
_MEMBER = re.compile(r"\.op\s+(?:not\s+)?in\s+[\(\[{]([^)\]}]*)[\)\]}]")
_BUILD = re.compile(r"(?:\bNode|_emit|_emit_named|_node|\.add|Embedding)\(\s*" + _LIT)


def _literal_ops(text: str) -> list[str]:
    members = [m for group in _MEMBER.findall(text) for m in re.findall(_LIT, group)]
    return _COMPARE.findall(text) + members + _BUILD.findall(text)


def test_no_op_is_named_by_a_string_literal():
    found = {
        str(p.relative_to(ROOT)): hits
        for p in sorted(ROOT.rglob("*.py"))
        if "ckks" not in p.parts and (hits := _literal_ops(p.read_text()))
    }
    assert not found, f"name ops by henn.ir.ops.Op members: {found}"


def test_the_checker_sees_each_form():
    text = 'n.op == "conv2d"\nif node.op in ("poly", Op.ADD): pass\nNode("flatten", "f", ["x"], "y")\n'
    assert len(_literal_ops(text)) == 3
