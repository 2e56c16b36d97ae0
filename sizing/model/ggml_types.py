"""ggml tensor types: elements per block and bytes per block.

Source: ggml's type traits (ggml/src/ggml.c `type_traits`), mirrored in
gpustack/gguf-parser-go@8dc7a62:ggml.go `_GGMLTypeTraits`; MXFP4 and NVFP4 from
current ggml. A tensor row of `ne0` elements takes `ne0 / block * bytes` bytes and
must hold a whole number of blocks (llama-quant.cpp falls back to another type
when it does not).
"""

from dataclasses import dataclass


@dataclass(frozen=True)
class GgmlType:
    name: str
    block_elems: int
    block_bytes: int

    @property
    def bits_per_weight(self) -> float:
        return 8 * self.block_bytes / self.block_elems

    def row_fits(self, ne0: int) -> bool:
        return ne0 % self.block_elems == 0

    def tensor_bytes(self, n_elems: int) -> int:
        return n_elems // self.block_elems * self.block_bytes


GGML_TYPES: dict[str, GgmlType] = {
    t.name: t
    for t in (
        GgmlType("F32", 1, 4),
        GgmlType("F16", 1, 2),
        GgmlType("BF16", 1, 2),
        GgmlType("Q8_0", 32, 34),
        GgmlType("Q6_K", 256, 210),
        GgmlType("Q5_K", 256, 176),
        GgmlType("Q5_1", 32, 24),
        GgmlType("Q5_0", 32, 22),
        GgmlType("Q4_K", 256, 144),
        GgmlType("Q4_1", 32, 20),
        GgmlType("Q4_0", 32, 18),
        GgmlType("Q3_K", 256, 110),
        GgmlType("Q2_K", 256, 84),
        # i-quants: the block structs of ggml/src/ggml-common.h (QK_K = 256, QK4_NL = 32;
        # ggml_half = 2 bytes), sizes as its static_asserts spell them.
        GgmlType("IQ4_XS", 256, 136),  # d + scales_h (2+2) + scales_l[QK_K/64] + qs[QK_K/2]
        GgmlType("IQ4_NL", 32, 18),  # d + qs[QK4_NL/2]
        GgmlType("IQ3_S", 256, 110),  # d + 13*(QK_K/32) (qs, qh, signs) + scales[QK_K/64]
        GgmlType("IQ3_XXS", 256, 98),  # d + 3*(QK_K/8)
        GgmlType("IQ2_S", 256, 82),  # d + qs[QK_K/4] + qh, scales[QK_K/32] each
        GgmlType("IQ2_XS", 256, 74),  # d + uint16 qs[QK_K/8] + scales[QK_K/32]
        GgmlType("IQ2_XXS", 256, 66),  # d + uint16 qs[QK_K/8]
        GgmlType("IQ1_M", 256, 56),  # qs[QK_K/8] + qh[QK_K/16] + scales[QK_K/32], no d
        GgmlType("IQ1_S", 256, 50),  # d + qs[QK_K/8] + uint16 qh[QK_K/32]
        GgmlType("MXFP4", 32, 17),
        GgmlType("NVFP4", 64, 36),
    )
}
