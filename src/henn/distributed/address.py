"""Where the cluster is: `ray` (the cluster of $RAY_ADDRESS, else a Ray instance on this machine) or
`ray://HOST:PORT` (a running cluster's Ray Client server, port 10001 by default). Parsing needs no Ray."""

from __future__ import annotations

from dataclasses import dataclass

from henn.errors import InputError

SCHEME = "ray"
CLIENT_PREFIX = "ray://"


@dataclass(frozen=True)
class ClusterAddress:
    """address: None for `ray` (ray.init() decides: $RAY_ADDRESS or a local instance), else `ray://HOST:PORT`."""

    address: str | None = None

    def __str__(self) -> str:
        return self.address or SCHEME

    @classmethod
    def parse(cls, text: str | ClusterAddress) -> ClusterAddress:
        if isinstance(text, ClusterAddress):
            return text
        if not isinstance(text, str):
            raise InputError(f"cluster={text!r}: give 'ray' or 'ray://HOST:PORT'")
        text = text.strip()
        if text == SCHEME:
            return cls(None)
        if text.startswith(CLIENT_PREFIX):
            host, sep, port = text[len(CLIENT_PREFIX) :].rpartition(":")
            if not sep:
                host, port = port, "10001"
            if not host or not port.isdigit() or not 0 < int(port) < 65536:
                raise InputError(f"cluster {text!r}: give ray://HOST:PORT (the head's Ray Client port, e.g. 10001)")
            return cls(f"{CLIENT_PREFIX}{host}:{int(port)}")
        raise InputError(f"cluster {text!r}: give 'ray' (this machine or $RAY_ADDRESS) or 'ray://HOST:PORT'")
