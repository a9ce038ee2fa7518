"""`henn infer` without `--cluster`, in a process of its own: Ray is never imported (with it:
test_batch.py::test_infer_on_the_cluster)."""

from __future__ import annotations

from cluster_support import INFER, henn_process


def test_infer_without_cluster_never_imports_ray():
    out = henn_process(*INFER)
    assert out.returncode == 0, out.stderr
    assert "ray imported: False" in out.stdout and "cluster" not in out.stdout


def test_a_bad_cluster_address_is_refused_while_parsing():
    out = henn_process(*INFER, "--cluster", "spark://head:7077")
    assert out.returncode == 2 and "give 'ray'" in out.stderr
