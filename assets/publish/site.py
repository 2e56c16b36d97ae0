"""The `site` asset: the static compatibility site, rebuilt from the published tables on
every refresh (only the pages whose rows changed are rendered again)."""

import dagster as dg

from assets.publish import build, data, switch
from assets.resources import WarehouseResource


@dg.asset(
    group_name="publish",
    kinds={"html"},
    code_version="1",
    automation_condition=dg.AutomationCondition.eager(),
    deps=[
        "release",
        "fit_matrix",
        "fit_configurations",
        "cost_matrix",
        "cost_basis",
        "gpus",
        "models",
        "weights",
        "weight_formats",
        "engines",
        "gguf_published_sizes",
        "gpu_prices",
        "finetune",
        "quantized_releases",
        "format_quality_tiers",
    ],
    description="Static pages for every model x GPU pair of the fit matrix, every "
    "model and GPU, and a searchable index, rendered from the published "
    "tables; a page is rendered again only when the rows it shows change.",
)
def site(context: dg.AssetExecutionContext, warehouse: WarehouseResource) -> dg.MaterializeResult:
    out = warehouse.site()
    versions = data.table_versions(warehouse.root, warehouse.storage_options())
    now = switch.current(out)
    stats = build.current(now, versions) if now else None
    if stats is None:  # built beside the current build, switched to in one step
        new = switch.stage(out)
        try:
            stats = build.build_tables(warehouse.root, new, warehouse.storage_options())
        except BaseException:
            switch.discard(new)
            raise
        switch.switch(out, new)
    context.log.info(
        f"site: {stats.pages} pages, {stats.written} written, "
        f"{stats.parts_rendered} parts rendered, {stats.seconds} s"
    )
    return dg.MaterializeResult(
        metadata={
            "path": dg.MetadataValue.path(str(out / "index.html")),
            "site_version": stats.site_version,
            "pages": stats.pages,
            "pages_written": stats.written,
            "parts_rendered": stats.parts_rendered,
            "parts_reused": stats.parts_reused,
            "build_seconds": stats.seconds,
            "bytes_on_disk": stats.bytes_on_disk,
            "table_versions": {t: v["version"] for t, v in versions.items()},
        }
    )
