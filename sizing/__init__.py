"""The estimator as a library, for notebooks and services: the figures the published tables
hold, for one configuration or many, computed by the same expressions as the matrix.

    >>> from pathlib import Path
    >>> from sizing import Configuration, Device, estimate, parse_config
    >>> config = Path("data/snapshot/hub/models/Qwen/Qwen3-8B/config.json").read_text()
    >>> model = parse_config(config, "Qwen/Qwen3-8B")
    >>> rtx_4090 = Device("rtx_4090", memory_gib=23.99, vendor="NVIDIA", bandwidth_gb_s=1008)
    >>> out = estimate(model, Configuration("Q4_K_M", context=32768, kv_dtype="f16"), rtx_4090)
    >>> out.memory.verdict, round(out.memory.weights_gib, 2)
    ('fits', 4.68)
    >>> out.speed.speed_basis, out.draft is None
    ('calibrated', True)

`estimate` returns an `Estimate` (sizing.questions.result: memory, speed, cost, launch, and the vLLM
budget, draft, projector and MTP parts where they apply; `to_dict()` is the flat record the
CLI prints); `estimate_many` answers a list of (model, configuration, device, usage) in one pass;
`InvalidConfiguration` names every reason a configuration cannot run. These names are the
stable interface; the modules behind them may move.
"""

from sizing.engines.vllm import VllmSettings
from sizing.model.architecture import ConfigError, ModelArch
from sizing.model.config_parser import parse_config
from sizing.questions.estimate import (
    Configuration,
    Device,
    InvalidConfiguration,
    Usage,
    estimate,
    estimate_many,
)
from sizing.questions.result import Estimate

__all__ = [
    "ConfigError",
    "Configuration",
    "Device",
    "Estimate",
    "InvalidConfiguration",
    "ModelArch",
    "Usage",
    "VllmSettings",
    "estimate",
    "estimate_many",
    "parse_config",
]
