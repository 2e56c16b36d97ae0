"""llama.cpp (llama-server): what it loads, how it lays out memory, how fast it runs and how
to launch it. Every term here has a namesake in sizing.engines.vllm; the formulas pick the
row's engine's term through sizing.engines.

Sources: common/common.h (batch defaults), src/llama-kv-cache*.cpp (cache cells), the
tools/server README (flags), docs/docker.md (images); fits in sizing.formulas.calibration.
"""

from __future__ import annotations

import shlex
from typing import TYPE_CHECKING

import polars as pl

from sizing.columns import col
from sizing.engines.base import FITS, ceil_to, fitted
from sizing.units import BYTES_PER_GIB, BYTES_PER_MIB

if TYPE_CHECKING:
    from sizing.model.architecture import ModelArch
    from sizing.questions.estimate import Configuration

NAME = "llama.cpp"
KV_DTYPES = ("f16", "q8_0", "q4_0")
DEFAULT_KV_DTYPE = "f16"
# The GGUF types the matrix sizes, from the most to the least faithful to the checkpoint.
FORMATS = (
    "Q8_0",
    "Q6_K",
    "Q5_K_M",
    "Q4_K_M",
    "UD-Q4_K_XL",
    "IQ4_XS",
    "Q3_K_M",
    "IQ3_XXS",
    "Q2_K",
    "UD-Q2_K_XL",
    "IQ2_M",
    "IQ2_XXS",
    "IQ1_M",
)
DEFAULT_FORMAT = "Q4_K_M"

# n_ubatch default 512 (common/common.h); with flash attention the KV size is padded to
# 256 cells; the iSWA cache holds pad256(min(n_ctx, n_swa*n_seq + n_ubatch)) cells
# (src/llama-kv-cache-iswa.cpp). Recurrent state is stored in F32.
UBATCH = 512
BATCH = 2048  # n_batch default (common/common.h): the largest llama_decode call
KV_PAD = 256
STATE_BYTES = 4
# `--fit` keeps 1024 MiB free per device (ggml-org/llama.cpp PR #16653).
FIT_MARGIN_BYTES = 1024 * BYTES_PER_MIB
# Memory a CUDA device context and cuBLAS take before any tensor: Ollama's measured
# per-GPU minimum for the CUDA backend, 457 MiB (ollama llm/memory.go).
DEVICE_CONTEXT_BYTES = 457 * BYTES_PER_MIB
# The compute buffer is ggml-alloc's peak (ggml/src/ggml-alloc.c: tensors freed after
# their last use, free blocks reused best-fit) over the worst-case graph llama_context
# reserves (src/llama-context.cpp sched_reserve): one micro-batch of n_ubatch tokens, each
# an output unless the caller caps n_outputs_max. The peak is either at the output (the
# F32 logits, n_vocab per output, beside one hidden-state row per token, the last layer's
# output: graph inputs such as the unused input-embedding slot live in host memory,
# ggml-backend.cpp) or in a layer's feed-forward (four hidden-state rows, three FFN-wide
# rows: gate, up, their product; a MoE layer whose experts are narrower than the hidden
# state also holds the k experts' outputs above them, k + 1 more hidden rows) while the
# F16 flash-attention mask, n_kv x n_ubatch, is live. Counts read from dry runs of
# llama.cpp's own allocator on this graph (data/catalogs/research/llama_cpp_compute_buffer.md).
ACTIVATION_BYTES = 4  # F32 activations and logits
MASK_BYTES = 2  # the KQ mask is F16 with flash attention
OUTPUT_PEAK_HIDDEN_ROWS = 1
LAYER_PEAK_HIDDEN_ROWS = 4
LAYER_PEAK_FFN_ROWS = 3

# The backend a vendor's GPUs run unless told otherwise: the build of its published server
# image (docs/docker.md: server-cuda, server-rocm, server-musa for Moore Threads,
# server-intel for SYCL; server-vulkan for any other GPU); Metal is the default on macOS.
# The estimate's --backend picks another (e.g. Vulkan on an AMD or NVIDIA card).
DEFAULT_BACKENDS = {
    "NVIDIA": "CUDA",
    "AMD": "ROCm",
    "Apple": "Metal",
    "Intel": "SYCL",
    "Moore Threads": "MUSA",
}
OTHER_BACKEND = "Vulkan"
BACKENDS = ("CUDA", "ROCm", "Vulkan", "Metal", "SYCL", "MUSA")
# The devices each backend targets (README "Supported backends": CUDA "Nvidia GPU", HIP
# "AMD GPU", Metal "Apple Silicon", SYCL "Intel GPU", MUSA "Moore Threads GPU", Vulkan
# "GPU"; None: any vendor's).
BACKEND_VENDORS = {
    "CUDA": ("NVIDIA",),
    "ROCm": ("AMD",),
    "Metal": ("Apple",),
    "SYCL": ("Intel",),
    "MUSA": ("Moore Threads",),
    "Vulkan": None,
}
# --split-mode over several GPUs: `layer` (the default) gives each GPU whole layers,
# which run one after another; `row` splits every weight matrix of the layers by rows
# across the GPUs and gathers each product on the main GPU, which holds the cache and
# runs attention (llama.cpp's README, "--split-mode").
LAYER, ROW = "layer", "row"
SPLIT_MODES = (LAYER, ROW)
# The row split's gathers cost a fixed time per layer and extra GPU (sizing.formulas.calibration.
# row_split_sync_seconds, in fits.json): fitted on the one public rig with row- and
# layer-split runs of the same build, 4x RTX 4090 over PCIe decoding Llama 3 70B Q4_K_M at
# 0, 32K and 64K tokens of context (llama.cpp PR #19378); the extra time is the same at
# every context (the cache is read once either way). Its figures say they are transferred
# from that rig.
ROW_SPLIT_SYNC_SECONDS = FITS["row_split_sync_seconds"]
ROW_SPLIT_RIG = "4x RTX 4090, PCIe"
BUILDS = {
    "CUDA": "CUDA build (ghcr.io/ggml-org/llama.cpp:server-cuda)",
    "ROCm": "ROCm build (ghcr.io/ggml-org/llama.cpp:server-rocm)",
    "MUSA": "MUSA build (ghcr.io/ggml-org/llama.cpp:server-musa)",
    "SYCL": "SYCL build (ghcr.io/ggml-org/llama.cpp:server-intel)",
    "Metal": "Metal build (the default on macOS)",
    "Vulkan": "Vulkan build (ghcr.io/ggml-org/llama.cpp:server-vulkan)",
}

# Speed fits (`llm-sizing calibrate --write` on data/catalogs/speed_measurements*.csv,
# in fits.json with the runs and GPUs each rests on), per backend; "" is the engine's fit
# pooled over backends, which a backend without a fit of its own (SYCL, MUSA: no
# measurement) is transferred. Decode: a share of the bandwidth and a per-layer overhead
# per backend (ROCm's and Metal's overheads are well above CUDA's), one efficiency for
# every weight format (its quantized matrix-vector kernels are the norm, not the
# exception: most of its runs are Q4_K_M and Q8_0).
DECODE_WEIGHT_KINDS: dict[str, str] = {}
# Its CUDA decode on HBM cards has a fit of its own (sizing.engines.memory_class): on the
# A100 PCIe, A100 SXM4 and H100 PCIe it reaches a smaller share of the bandwidth than GDDR
# cards on the same build (XiongjieDai/GPU-Benchmarks-on-LLM-Inference, build 2824;
# ggerganov's A100 80GB PCIe and RTX 4090 runs in llama.cpp PRs #6017 and #4766).
DECODE_MEMORY_CLASSES = ("HBM",)
DECODE_FIT = fitted(NAME, "decode")
# Prefill: a share of the dense FP16 peak per backend on llama-bench runs of 512 to
# 8,192-token prompts on 1 to 8 GPUs; CUDA with a cap in TFLOPS per watt of TDP per kind of
# weights (16-bit, quantized), the others as the median share of the peak (too few GPUs for
# a cap: Strix Halo and discrete Radeons share ROCm's and Vulkan's). SYCL and MUSA,
# unmeasured, take the pooled fit.
PREFILL_FIT = fitted(NAME, "prefill")
# The median error of each fit on sources (campaigns, repositories, authors) left out of it:
# the band its figures carry.
DECODE_HELD_OUT_ERROR = fitted(NAME, "decode_held_out_error")
PREFILL_HELD_OUT_ERROR = fitted(NAME, "prefill_held_out_error")


# Memory -----------------------------------------------------------------------------


def kv_cells_full(context: pl.Expr, batch: pl.Expr) -> pl.Expr:
    """llama-server's default, one KV stream per slot, each padded to KV_PAD cells."""
    return ceil_to(context, KV_PAD) * batch


def kv_cells_window(context: pl.Expr, batch: pl.Expr) -> pl.Expr:
    """The iSWA cache: the window plus one micro-batch per stream, padded."""
    return ceil_to(pl.min_horizontal(context, col("kv_window_tokens") + UBATCH), KV_PAD) * batch


def full_cell_extra_bytes() -> pl.Expr:
    """Cache entries take their elements' bytes, no more (indexer keys in the cache type)."""
    return pl.lit(0.0)


def window_cell_extra_bytes() -> pl.Expr:
    return pl.lit(0.0)


def sparse_entry_extra_bytes() -> pl.Expr:
    return pl.lit(0.0)


def host_expert_bytes() -> pl.Expr:
    """`--n-cpu-moe`: the routed experts of the first layers stay in host memory
    (sizing.formulas.offload gives their share of the expert bytes)."""
    return col("expert_bytes") * col("cpu_moe_expert_share")


def conv_state_bytes() -> pl.Expr:
    return pl.lit(STATE_BYTES)


def kv_split() -> pl.Expr:
    """Layers are split across GPUs: each holds its layers' share of the cache."""
    return col("n_gpus")


def kv_offload_share() -> pl.Expr:
    """The cache of a layer left on the CPU (`-ngl` below the layer count) stays in host
    memory with it: the offloaded share of layers takes its share of the cache."""
    return col("offload_frac")


def full_layer_replication() -> pl.Expr:
    return pl.lit(1.0)


def compute_buffer_bytes(outputs: pl.Expr, ubatch: pl.Expr, kv_cells: pl.Expr) -> pl.Expr:
    """One device's compute buffer with flash attention and the whole model on it: the
    larger of the output peak (`outputs` rows of logits) and the feed-forward peak (with
    the mask over `kv_cells` cached tokens)."""
    output_peak = (
        col("vocab") * outputs + OUTPUT_PEAK_HIDDEN_ROWS * col("hidden") * ubatch
    ) * ACTIVATION_BYTES
    k = col("n_experts_active")
    narrow_experts = (k > 0) & (col("hidden") * k > col("ffn_active_width"))
    moe_rows = pl.when(narrow_experts).then((k + 1) * col("hidden")).otherwise(0.0)
    layer_width = (
        LAYER_PEAK_HIDDEN_ROWS * col("hidden")
        + LAYER_PEAK_FFN_ROWS * col("ffn_active_width")
        + moe_rows
    )
    layer_peak = layer_width * ubatch * ACTIVATION_BYTES + kv_cells * ubatch * MASK_BYTES
    return pl.max_horizontal(output_peak, layer_peak)


def runtime_bytes() -> pl.Expr:
    """The device context plus the compute buffer of llama-server's defaults in the
    matrix: flash attention on, n_ubatch = UBATCH, every micro-batch token an output (what
    llama.cpp reserves unless the caller caps n_outputs_max: llama-cli, llama-bench, and
    llama-server before PR #23861, 2026-05; since then llama-server reserves one output
    per slot, so this bounds it from above). The runtime depends on no context, so the
    mask (MASK_BYTES x UBATCH per cached token, live only at the feed-forward peak) is
    left out."""
    return DEVICE_CONTEXT_BYTES + compute_buffer_bytes(pl.lit(UBATCH), pl.lit(UBATCH), pl.lit(0.0))


def weights_held_bytes() -> pl.Expr:
    """The GGUF file's tensors, as stored."""
    return col("weights_bytes")


def weights_on_device_bytes() -> pl.Expr:
    """An input-only token embedding stays in host memory (the input layer runs on the
    CPU); a tied one is duplicated onto the GPU as the output head."""
    return col("weights_bytes") - col("input_embd_bytes")


def usable_bytes(share: pl.Expr) -> pl.Expr:
    """The device (the GPU's `share` of unified memory) less `--fit`'s margin."""
    return col("gpu_memory_gib") * BYTES_PER_GIB * share - FIT_MARGIN_BYTES


def cache_allocation_tokens() -> int:
    """Cells are allocated one token at a time."""
    return 1


def runtime_basis() -> pl.Expr:
    """Estimated: the device context is Ollama's per-GPU minimum, and the compute buffer,
    exact on the llama-family logs of 2025 and 2026, is exceeded by up to a third by
    some older builds' (tests/sizing/test_compute_buffer.py)."""
    return pl.lit("estimated")


def usable_basis() -> pl.Expr:
    """The device total and the fit margin are both exact."""
    return pl.lit("exact")


# Kernels ----------------------------------------------------------------------------


def kernel_basis() -> pl.Expr:
    """No documented gate: llama.cpp's backends run every GGUF type it sizes."""
    return pl.lit("not gated (llama.cpp)")


# Speed ------------------------------------------------------------------------------


def row_split() -> pl.Expr:
    """Whether the row's GPUs split each weight matrix by rows (`-sm row`, SPLIT_MODES)."""
    return ((pl.col("split_mode") == ROW) & (col("n_gpus") > 1)).fill_null(False)


def row_split_fit() -> pl.Expr:
    """What a row-split figure adds to its fit's name: the rig its gathers were measured on."""
    return pl.lit(f" + row split from {ROW_SPLIT_RIG}")


def decode_parallelism() -> pl.Expr:
    """The layer split runs layers one GPU after another: several GPUs decode no faster
    than one. The row split reads every weight matrix on every GPU at once."""
    return pl.when(row_split()).then(col("n_gpus").cast(pl.Float64)).otherwise(1.0)


def decode_kv_parallelism() -> pl.Expr:
    """The cache is read one GPU after another (layer split) or on the main GPU, which
    runs attention (row split): never faster than on one GPU."""
    return pl.lit(1.0)


def decode_comm_seconds() -> pl.Expr:
    """The row split gathers every split matrix product on the main GPU: a
    synchronisation per layer and extra GPU (ROW_SPLIT_SYNC_SECONDS)."""
    return (
        pl.when(row_split())
        .then(col("n_layers") * (col("n_gpus") - 1) * ROW_SPLIT_SYNC_SECONDS)
        .otherwise(0.0)
    )


def default_backend() -> pl.Expr:
    """The backend of the vendor's published build (DEFAULT_BACKENDS), else Vulkan."""
    return pl.col("vendor").replace_strict(
        DEFAULT_BACKENDS, default=OTHER_BACKEND, return_dtype=pl.String
    )


def decode_weight_kind() -> pl.Expr:
    """No kind of weights with a decode efficiency of its own (DECODE_WEIGHT_KINDS)."""
    return pl.lit(None, pl.String)


def sparse_kernels() -> pl.Expr:
    """Sparse attention skips the unpicked entries only in the CUDA build."""
    return pl.col("backend") == "CUDA"


def mla_absorbed() -> pl.Expr:
    """MLA's attention runs absorbed in prefill as in decode: MQA over the cached latent
    (src/models/deepseek2.cpp since PR #12801, 2025-04; "MLA with the absorption
    optimization converts into MQA"), whose products are 544 wide per head for DeepSeek-V3
    against 160 decompressed (the speed checks give a run of an older build its
    decompressed width: assets.quality.speed_checks)."""
    return pl.lit(True)


# The most GPUs a layer split's prefill pipeline gains on in today's builds: two. On more,
# the host's blocking synchronisations between the GPUs' parts (PR #19922's analysis) take
# what the pipeline gives. PR #19922's baseline (ROCm, 2026) prefills gpt-oss 120B at 0.72x
# and 0.62x its 2-GPU speed on 4 and 8 GPUs, and Spare Cores' b4753 runs
# (speed_measurements_more.csv, 13 card types on cloud servers) reach n m / (m + n - 1) on 2
# GPUs but 1.2x one GPU on 4 and 1.0x on 8. The builds of May 2024 gained on every GPU
# (XiongjieDai's b2796-b2843 runs, Llama 3 8B F16 and Q4_K_M, pp4096 against one card's: 4
# RTX 4090s 2.3-2.4x, 6 RTX 3090s 2.4-2.8x, 8 RTX 4090s 2.5-2.9x; n m / (m + n - 1) with
# m = 4: 2.3, 2.7, 2.9); a run's build sets the input `pipeline_gpus` where it differs
# (assets.quality.speed_checks).
PIPELINE_GPUS = 2


def prefill_parallelism(p: pl.Expr) -> pl.Expr:
    """The micro-batches of one batch run through the GPUs as a pipeline
    (ggml-org/llama.cpp PR #6017): on up to `pipeline_gpus` GPUs (null: PIPELINE_GPUS), n
    work on m = ceil(min(p, n_batch) / n_ubatch) micro-batches (micro_batch) at once, with
    the pipeline's fill and drain, n m / (m + n - 1) (a 512-token prompt: 1); on one GPU or
    more than that, 1. The row split's prefill is not sized (null): on the one public rig
    (PR #19378) it ran 4 to 6x slower than the layer split."""
    n = col("n_gpus")
    m = (pl.min_horizontal(p, BATCH) / micro_batch()).ceil()
    pipelined = (n > 1) & (n <= col("pipeline_gpus").fill_null(PIPELINE_GPUS))
    gain = pl.when(pipelined).then(n * m / (m + n - 1)).otherwise(1.0)
    return pl.when(row_split()).then(None).otherwise(gain)


# The CUDA build multiplies quantized weights with its own int8 kernels (MMQ) on cards with
# int8 tensor cores, compute capability 7.5 and up: PR #8075 (2024-06-23) made them the
# default ("unless there is no int8 tensor core MMQ implementation available but FP16
# tensor cores are (V100, RDNA3) or __dp4a is unavailable (P100 or older)"); older builds
# dequantized to FP16 for cuBLAS. Their rate follows SMs x clock, not the FP16 tensor
# peak: Spare Cores' b4753 runs prefill as fast on the A100 PCIe as on the SXM4 (300 and
# 400 W), and faster on the A10G (80 SMs) than on the A10 (72), whose tensor peak is 1.8x.
# The rate per SM and clock is that of the GeForce and workstation tensor cores since
# Ampere, 1,024 dense FP16 FLOPs, whose catalog peak is SMs x clock x 1,024 (RTX 3090: 82
# SMs x 1.695 GHz = 142 TFLOPS); the data-centre cards' wider tensor cores do not speed
# MMQ up (nor do the A10G's narrower ones slow it). Where the catalog has no SM count or
# clock, the FP16 peak stands.
MMQ_MIN_COMPUTE_CAPABILITY = 7.5
MMQ_FLOPS_PER_SM_CLOCK = 1024
# PR #8075's exceptions: FP16 tensor cores without int8 ones (7.0 up to MMQ's 7.5: the
# V100), and no __dp4a (below 6.1: the P100).
FP16_TENSOR_MIN_COMPUTE_CAPABILITY = 7.0
DP4A_MIN_COMPUTE_CAPABILITY = 6.1


def dequantized_matmuls() -> pl.Expr:
    """Whether quantized weights are dequantized to FP16 for cuBLAS at prompt sizes: on CUDA
    cards with FP16 tensor cores but no int8 ones (compute capability 7.0, the V100), on
    those without __dp4a (below 6.1, the P100), PR #8075's exceptions, and on every card in
    a build before it (the input `dequantizing_build`). ggml-cuda's cuBLAS path
    (ggml_cuda_op_mul_mat_cublas: "convert src0 and src1 to fp16, multiply as fp16")
    writes each weight matrix to an FP16 buffer before the product, once per micro-batch:
    memory time besides the product's (sizing.formulas.speed.prefill_parts)."""
    cc = col("compute_capability")
    fp16_only = (cc >= FP16_TENSOR_MIN_COMPUTE_CAPABILITY) & (cc < MMQ_MIN_COMPUTE_CAPABILITY)
    no_dp4a = cc < DP4A_MIN_COMPUTE_CAPABILITY
    old_build = pl.col("dequantizing_build").fill_null(False)
    return ((pl.col("backend") == "CUDA") & (fp16_only | no_dp4a | old_build)).fill_null(False)


def quantized_matmul_tflops() -> pl.Expr:
    """The rate quantized weights' matmuls run at: MMQ's SMs x clock x
    MMQ_FLOPS_PER_SM_CLOCK on CUDA cards with int8 tensor cores, else the FP16 dense peak."""
    mmq = (pl.col("backend") == "CUDA") & (col("compute_capability") >= MMQ_MIN_COMPUTE_CAPABILITY)
    # SMs x MHz x FLOPs per SM and clock / 1e6 = TFLOPS
    rate = col("sm_count") * col("boost_clock_mhz") * MMQ_FLOPS_PER_SM_CLOCK / 1e6
    return pl.when(mmq & rate.is_not_null()).then(rate).otherwise(col("fp16_dense_tflops"))


def micro_batch() -> pl.Expr:
    """The tokens of one prompt step: the input `ubatch` (a run's -ub), else UBATCH."""
    return col("ubatch").fill_null(UBATCH)


def prefill_weight_reads(p: pl.Expr) -> pl.Expr:
    """The weights are read once per micro-batch."""
    return (p / micro_batch()).ceil()


def prefill_step_tokens(p: pl.Expr) -> pl.Expr:
    return pl.min_horizontal(p, micro_batch())


# Launch -----------------------------------------------------------------------------


def build(backend: str) -> str:
    return BUILDS[backend]


def launch_command(m: ModelArch, c: Configuration, gguf_repo: str | None) -> str:
    """llama-server with only flags it accepts for this configuration: `-hf REPO:QUANT`
    pulls a GGUF of that type, `-c` is the total context of all slots, `-np` the slots,
    `-ngl` the layers on the GPU, `-fa on` flash attention, `-ctk/-ctv` the KV types (a
    quantized V cache needs flash attention), `-sm row` a row split, `-ts` the split, then
    a draft model, a projector, MTP, expert offload and YaRN. Names are shell-quoted."""
    source = (
        f"-hf {shlex.quote(f'{gguf_repo}:{c.weight_format}')}"
        if gguf_repo
        else f"-m model-{c.weight_format}.gguf"
    )
    gpu_layers = 999 if c.offload_frac == 0 else round(m.n_layers * (1 - c.offload_frac))
    parts = [
        f"llama-server {source}",
        f"-c {c.context * c.batch}",
        f"-np {c.batch}",
        f"-ngl {gpu_layers}",
        "-fa on",
    ]
    if c.kv_dtype != DEFAULT_KV_DTYPE:
        parts.append(f"-ctk {c.kv_dtype} -ctv {c.kv_dtype}")
    if c.n_gpus > 1 and c.split_mode == ROW:
        parts.append(f"-sm {ROW}")
    if c.n_gpus > 1:
        parts.append("-ts " + ",".join(["1"] * c.n_gpus))
    if c.draft_model is not None:
        parts.append(f"--model-draft <{c.draft_model.name} GGUF> -ngld 999")
    if c.mmproj is not None:
        parts.append(f"--mmproj <{m.name} mmproj {c.mmproj} GGUF>")
    if c.mtp:  # PR #22673: a GGUF converted with its MTP layers (nextn_predict_layers)
        parts.append("--spec-type draft-mtp")
    if c.n_cpu_moe:
        parts.append(f"--n-cpu-moe {c.n_cpu_moe}")
    if c.rope_scaling is not None and m.rope_recipe is not None:
        # As the Qwen3 cards give them ("llama-server ... --rope-scaling yarn
        # --rope-scale 4 --yarn-orig-ctx 32768").
        r = m.rope_recipe
        parts.append(
            f"--rope-scaling {r.rope_type} --rope-scale {r.factor:g} "
            f"--yarn-orig-ctx {r.original_max_position_embeddings}"
        )
    return " \\\n  ".join(parts)
