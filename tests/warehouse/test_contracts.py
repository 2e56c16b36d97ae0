"""The contracts' key check: exact whatever the hash of the keys does."""

import polars as pl
import pytest

from warehouse import tables
from warehouse.tables import TableContract

CONTRACT = TableContract(
    "pairs",
    keys=("model_id", "gpu_id", "n_gpus"),
    schema={"model_id": pl.String(), "gpu_id": pl.String(), "n_gpus": pl.Int64()},
)
DISTINCT = pl.DataFrame(
    {
        "model_id": ["a", "b", "a", "b", None],
        "gpu_id": ["b", "a", "a", "b", "a"],
        "n_gpus": [1, 1, 1, 1, 1],
    }
)
# Two rows repeat the first one's key.
REPEATED = pl.concat([DISTINCT, DISTINCT.head(1), DISTINCT.head(1)])


@pytest.mark.parametrize("lazy", [False, True])
def test_a_repeated_key_is_refused_and_distinct_keys_pass(lazy):
    def frame(df: pl.DataFrame) -> pl.DataFrame | pl.LazyFrame:
        return df.lazy() if lazy else df

    assert CONTRACT.check(frame(DISTINCT)) == []
    assert CONTRACT.check(frame(REPEATED)) == [
        "3 rows share a key ('model_id', 'gpu_id', 'n_gpus')"
    ]


def test_keys_whose_hashes_collide_are_counted_exactly(monkeypatch):
    """Every key hashing alike (the worst collision): distinct keys still pass and repeats
    are still counted, by the exact count after the hashes disagree with the rows."""
    monkeypatch.setattr(tables, "key_hash", lambda keys: pl.lit(0, pl.UInt64))
    assert CONTRACT.check(DISTINCT) == []
    assert CONTRACT.check(REPEATED) == ["3 rows share a key ('model_id', 'gpu_id', 'n_gpus')"]


def test_values_swapped_between_key_columns_hash_apart():
    """(a, b) and (b, a): the columns' own seeds keep an xor of their hashes from
    cancelling (with one seed both rows would hash alike, and every such table would take
    the exact count)."""
    hashes = DISTINCT.head(2).select(tables.key_hash(CONTRACT.keys)).to_series()
    assert hashes.n_unique() == 2
