"""The static compatibility site: pages rendered from the published tables."""
