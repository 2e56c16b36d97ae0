"""The reference page's models (data/catalogs/reference_page.csv): each is sized from its own
config, sized as a named stand-in, or says why not, so the coverage table never falls back
to its generic 'no config.json in the bundled snapshot'."""

import polars as pl
import pytest

from tests.conftest import ROOT

PAGE = pl.read_csv(ROOT / "data" / "catalogs" / "reference_page.csv", infer_schema_length=0)
MODELS = PAGE.filter(pl.col("kind") == "model")
HUB = ROOT / "data" / "snapshot" / "hub"
BUNDLED = {str(p.parent.relative_to(HUB / "models")) for p in HUB.glob("models/*/*/config.json")}
# The reasons the coverage table shows for models not found (read as the pipeline's
# SnapshotResource.missing_models does; assets are not imported here, Dagster is slow to load).
MISSING = dict(
    pl.concat(
        [pl.read_csv(f, infer_schema_length=0) for f in sorted(HUB.glob("missing-*.csv"))]
    ).iter_rows()
)


@pytest.mark.parametrize("row", list(MODELS.iter_rows(named=True)), ids=lambda r: r["name_on_page"])
def test_every_model_is_sized_or_says_why_not(row):
    if row["sized_as"]:
        assert row["sized_as"] in BUNDLED and row["note"], "a stand-in names its source"
    elif row["id"] in BUNDLED:
        assert not row["note"], "a bundled model needs no excuse"
    else:
        assert row["note"] or MISSING.get(row["id"]), "missing without a reason"


def test_stand_ins_are_not_also_bundled():
    """A model sized from its own config is not also listed as someone else's stand-in."""
    stand_ins = MODELS.filter(pl.col("sized_as").is_not_null())
    assert not set(stand_ins.get_column("id")) & BUNDLED
