"""Inputs: what a refresh reads from outside the warehouse, as Dagster sees it. The
snapshot's files and the curated catalogs are observable source assets whose data version
is a hash of their bytes; the code (the sizing library, the assets, the warehouse, the
installed libraries they run on) is every asset's code version. An asset whose code
version and inputs' data versions are those of its last materialization is fresh in
Dagster's own terms, and `llm-sizing refresh --offline` does not run it."""
