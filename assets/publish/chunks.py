"""Groups of models whose fit rows the site reads at once: whole models (every pair's
rows in one group), sorted by id, about `max_rows` fit rows a group, so that memory holds
one group's rows however many models the matrix holds (the fit matrix is stored sorted
by model, so a group's read skips the other groups' row groups)."""

import polars as pl

CHUNK_ROWS = 1_500_000


def model_groups(fit: pl.LazyFrame, max_rows: int = CHUNK_ROWS) -> list[list[str]]:
    sizes = fit.group_by("model_id").len().sort("model_id").collect().rows()
    groups: list[list[str]] = []
    rows = 0
    for m, n in sizes:
        if not groups or rows + n > max_rows:
            groups.append([])
            rows = 0
        groups[-1].append(m)
        rows += n
    return groups
