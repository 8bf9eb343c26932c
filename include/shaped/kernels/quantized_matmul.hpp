#pragma once
// y = x @ W^T for a weight W stored in one of shaped's formats (tensor/quantized.hpp), compiled
// once in src/quantized_matmul.cpp. W is never dequantized whole:
//
//   a few rows of x (decoding)   every weight row's blocks read once, as they lie. Q8_0 and
//                                Q4_0: with AVX-512, each block dequantized in registers and
//                                multiplied by x in floats; with AVX2 only, x quantized to Q8_0
//                                once, as ggml does, and integer dot products (VNNI's vpdpbusd
//                                where there is one, else maddubs and madd). Measured on an
//                                AVX-512 EPYC (bench/quantized_bench.cpp), the two run at the
//                                same speed there (about 31 GB/s of Q8_0 blocks on one core),
//                                and the float way keeps x unrounded: stories260K's Q8_0 KL from
//                                F32, over 256 steps decoded, 0.024 against the integer way's
//                                0.041 (llama.cpp's: 0.038). With 8-wide vectors the float way is
//                                1.7x slower, so AVX2 takes the integer one; and Q4_0 takes it
//                                with AVX-512 VNNI and VBMI too (four blocks a 512-bit register,
//                                two vpdpbusd, nothing scalar: streaming a stories110M's layers
//                                from memory, 2.6x the float way's speed; decoding stories260K's
//                                Q4_0 file, KL from F32 2.167 against the float way's 2.172 and
//                                llama.cpp's 2.152). Q6_K with VNNI: x quantized to Q8_K as ggml
//                                does, 64 weights a vpdpbusd, 3x the float way (its sub-block
//                                scales cost the float way a multiply each 16). Other K-quants,
//                                and Q6_K without VNNI, dequantized in registers (AVX-512) or a
//                                row at a time into a buffer of one row, in L1, and dotted in
//                                floats; F16 in registers
//   many rows (prefill)          tiles of W's rows dequantized into a buffer of tile_rows rows,
//                                each multiplied by all of x with one BLAS GEMM
//
// quantized_matmul_reference is the same product the slow way (W dequantized, then a plain
// double-accumulated loop): the tests' yardstick for every way.

#include <shaped/tensor/quantized.hpp>

#include <cstddef>

namespace shaped::kernels {

// From this many rows of x up, the product runs through dequantized tiles and GEMM (measured:
// bench/quantized_bench.cpp).
inline constexpr std::size_t quantized_gemm_rows = 8;

// The weight as the kernels see it: its format's ggml id, its blocks, rows (out) and row
// length (in, a multiple of the block width).
struct quantized_weight {
    ggml_type type;
    const void* blocks;
    std::size_t rows;
    std::size_t cols;
};

template <StorageFormat F, Dim Rows, Dim Cols>
quantized_weight weight_of(const QuantizedMatrix<F, Rows, Cols>& w) {
    return {F::type, w.blocks().data(), w.rows(), w.cols()};
}

// y (n, w.rows) = x (n, w.cols) @ W^T, x and y contiguous rows.
void quantized_matmul(const quantized_weight& w, const float* x, std::size_t n, float* y);
// Each way on its own (for the tests and the bench): the way for few rows this machine takes
// (rows), either of its two (integer, registers; registers without AVX-512 is the row-buffer
// way), and the tiles.
void quantized_matmul_rows(const quantized_weight& w, const float* x, std::size_t n, float* y);
void quantized_matmul_integer(const quantized_weight& w, const float* x, std::size_t n, float* y);
void quantized_matmul_registers(const quantized_weight& w, const float* x, std::size_t n, float* y);
void quantized_matmul_tiles(const quantized_weight& w, const float* x, std::size_t n, float* y);
void quantized_matmul_reference(const quantized_weight& w, const float* x, std::size_t n, float* y);

}  // namespace shaped::kernels
