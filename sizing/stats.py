"""The mean and median of a numeric Series as a float. Polars types a Series' `mean()` and
`median()` as any Python value (a date column's median is a date); of a numeric Series
they are a number, or None when it holds no value."""

import polars as pl


def _number(value: object) -> float | None:
    if value is None:
        return None
    if not isinstance(value, int | float):
        raise TypeError(f"not a number: {value!r}")
    return float(value)


def mean(values: pl.Series) -> float | None:
    return _number(values.mean())


def median(values: pl.Series) -> float | None:
    return _number(values.median())
