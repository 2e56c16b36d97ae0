"""Byte units. GiB (2**30) and GB (10**9) are never mixed: every quantity says which."""

BYTES_PER_GIB = 2**30
BYTES_PER_MIB = 2**20
BYTES_PER_GB = 10**9


def gib(n_bytes: float) -> float:
    return n_bytes / BYTES_PER_GIB


def gb(n_bytes: float) -> float:
    return n_bytes / BYTES_PER_GB
