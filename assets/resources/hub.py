"""The Hugging Face Hub as a resource."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

import dagster as dg

if TYPE_CHECKING:
    from huggingface_hub import HfApi


class HubResource(dg.ConfigurableResource):
    """The Hub client. The token comes from HF_TOKEN in the environment only."""

    offline: bool = True
    endpoint: str = "https://huggingface.co"
    discover_authors: list[str] = []  # organisations whose top models are added
    discover_top_n: int = 0
    min_downloads: int = 10_000
    timeout_s: float = 20.0
    # The whole fetch's deadline: models not reached by then keep their last good facts
    # and are reported failed, so a hanging Hub costs minutes, not hours.
    deadline_s: float = 900.0

    def api(self) -> HfApi:
        from huggingface_hub import HfApi  # here: an offline refresh never imports it

        return HfApi(endpoint=self.endpoint, token=os.environ.get("HF_TOKEN") or False)

    def discovered(self, api: HfApi) -> list[str]:
        found = []
        for author in self.discover_authors:
            for m in api.list_models(
                author=author,
                pipeline_tag="text-generation",
                sort="downloads",
                limit=self.discover_top_n,
            ):
                if (m.downloads or 0) >= self.min_downloads:
                    found.append(m.id)
        return found
