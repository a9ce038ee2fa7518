"""Errors of the cluster path, in henn's hierarchy (henn.errors)."""

from __future__ import annotations

from henn.errors import CapacityError, HennError


class ClusterError(HennError):
    """Ray is missing, the cluster cannot be reached, or it lost the work of a set beyond its retries."""


class ClusterMemoryError(ClusterError, CapacityError):
    """No node of the cluster has the memory (or CPUs) one worker's program needs: raised before any work."""
