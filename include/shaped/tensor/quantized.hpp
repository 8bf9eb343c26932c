#pragma once
// Weight storage formats as types: ggml's block-quantized formats (Q8_0, Q4_0, Q4_K, Q6_K) with
// its exact block layouts, and F32, F16 (IEEE half) and BF16 storage, as GGUF files hold them.
//
// A format is a type (shaped::q8_0, ...) that says its block (the struct stored), its block
// width (elements a block holds), its bytes a block, its ggml type id and name, and converts a
// row: dequantize_row (blocks to floats, as ggml's dequantize_row_*) and quantize_row (floats to
// blocks, ggml's reference quantizer: quantize_row_*_ref, no importance matrix). Both give ggml's
// bytes and floats exactly (tests/unit/quantized_test.cpp, against fixtures from ggml's own code):
// the row functions live in src/quantized.cpp, compiled with no multiply-add fused, as ggml-base
// is compiled.
//
// A quantized weight's rows divide into blocks: its row dim (the last, contiguous one) is a
// multiple of the block width. QuantizedMatrix<Format, Rows, Cols> holds rows x blocks and checks
// that at compile time for a static row dim (at run time, with the same words, for a dynamic one);
// quantize<Format>(tensor) and dequantize(matrix) convert whole matrices.

#include <shaped/core/diagnostics.hpp>
#include <shaped/core/dim.hpp>
#include <shaped/core/shape.hpp>
#include <shaped/core/shape_error.hpp>
#include <shaped/tensor/tensor.hpp>

#include <array>
#include <bit>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>
#include <type_traits>
#include <vector>

namespace shaped {

// ggml's tensor types with their ids, as GGUF files store them (ggml.h's enum ggml_type), spelled
// as ggml names them ("q4_K"). Ids 4, 5, 31-33 and 36-38 were types that ggml has since removed.
// The formats below are the ones shaped computes with; io/gguf.hpp knows every id's block size.
enum class ggml_type : std::uint32_t {
    f32 = 0, f16 = 1, q4_0 = 2, q4_1 = 3, q5_0 = 6, q5_1 = 7, q8_0 = 8, q8_1 = 9,
    q2_K = 10, q3_K = 11, q4_K = 12, q5_K = 13, q6_K = 14, q8_K = 15,
    iq2_xxs = 16, iq2_xs = 17, iq3_xxs = 18, iq1_s = 19, iq4_nl = 20, iq3_s = 21, iq2_s = 22, iq4_xs = 23,
    i8 = 24, i16 = 25, i32 = 26, i64 = 27, f64 = 28, iq1_m = 29, bf16 = 30,
    tq1_0 = 34, tq2_0 = 35, mxfp4 = 39, nvfp4 = 40, q1_0 = 41, q2_0 = 42,
};

// ---- F16 and BF16 -----------------------------------------------------------------------------
// An IEEE binary16 and a bfloat16, as their bits.
struct half {
    std::uint16_t bits;
    friend constexpr bool operator==(half, half) = default;
};
struct bfloat16 {
    std::uint16_t bits;
    friend constexpr bool operator==(bfloat16, bfloat16) = default;
};

// Exact: every half is a float. ggml's GGML_FP16_TO_FP32 (ggml-impl.h, after Maratyszcza's FP16),
// NaN payloads shifted into the float's.
constexpr float half_to_float(half h) {
    const std::uint32_t w = std::uint32_t{h.bits} << 16;
    const std::uint32_t sign = w & 0x80000000u;
    const std::uint32_t two_w = w + w;
    const float normalized = std::bit_cast<float>((two_w >> 4) + (0xE0u << 23)) * 0x1.0p-112f;
    const float denormalized = std::bit_cast<float>((two_w >> 17) | (126u << 23)) - 0.5f;
    const std::uint32_t magnitude =
        two_w < (1u << 27) ? std::bit_cast<std::uint32_t>(denormalized) : std::bit_cast<std::uint32_t>(normalized);
    return std::bit_cast<float>(sign | magnitude);
}

// Rounded to nearest, ties to even; overflow to infinity; every NaN to the quiet NaN 0x7E00 with
// its sign. ggml's GGML_FP32_TO_FP16: the float unit does the rounding, adding the value (scaled
// so that the half's last mantissa bit lands on the float's) to a power of two. The products
// are by powers of two, exact, so fusing them with the addition changes nothing.
constexpr half float_to_half(float f) {
    const std::uint32_t w = std::bit_cast<std::uint32_t>(f);
    const float magnitude = std::bit_cast<float>(w & 0x7FFFFFFFu);
    float base = (magnitude * 0x1.0p+112f) * 0x1.0p-110f;
    const std::uint32_t shl1_w = w + w;
    const std::uint32_t sign = w & 0x80000000u;
    std::uint32_t bias = shl1_w & 0xFF000000u;
    if (bias < 0x71000000u) bias = 0x71000000u;
    base = std::bit_cast<float>((bias >> 1) + 0x07800000u) + base;
    const std::uint32_t bits = std::bit_cast<std::uint32_t>(base);
    const std::uint32_t exp_bits = (bits >> 13) & 0x00007C00u;
    const std::uint32_t mantissa_bits = bits & 0x00000FFFu;
    const std::uint32_t nonsign = exp_bits + mantissa_bits;
    return half{static_cast<std::uint16_t>((sign >> 16) | (shl1_w > 0xFF000000u ? 0x7E00u : nonsign))};
}

// Exact: a bfloat16 is a float's upper half.
constexpr float bfloat16_to_float(bfloat16 b) { return std::bit_cast<float>(std::uint32_t{b.bits} << 16); }

// Rounded to nearest, ties to even; a NaN keeps its upper bits and is made quiet; subnormals are
// kept. ggml's GGML_FP32_TO_BF16 (ggml_compute_fp32_to_bf16).
constexpr bfloat16 float_to_bfloat16(float f) {
    const std::uint32_t u = std::bit_cast<std::uint32_t>(f);
    if ((u & 0x7FFFFFFFu) > 0x7F800000u) return bfloat16{static_cast<std::uint16_t>((u >> 16) | 64u)};
    return bfloat16{static_cast<std::uint16_t>((u + (0x7FFFu + ((u >> 16) & 1u))) >> 16)};
}

// ---- ggml's blocks (ggml-common.h) ------------------------------------------------------------
// The elements of a K-quant super-block.
inline constexpr std::size_t qk_k = 256;

// 32 weights: x = d * q, q in [-127, 127].
struct block_q8_0 {
    half d;
    std::int8_t qs[32];
};

// 32 weights: x = d * (q - 8), q in [0, 15]; byte j holds element j in its low nibble and
// element j + 16 in its high one.
struct block_q4_0 {
    half d;
    std::uint8_t qs[16];
};

// 256 weights in 8 sub-blocks of 32: x = d * scale_j * q - dmin * min_j, q in [0, 15]; the 8
// scales and 8 mins are 6 bits each, packed in 12 bytes (get_scale_min_k4); qs holds 64 elements
// in each 32 bytes, the first 32 in the low nibbles.
struct block_q4_K {
    half d;
    half dmin;
    std::uint8_t scales[12];
    std::uint8_t qs[128];
};

// 256 weights in 16 sub-blocks of 16: x = d * scale_j * (q - 32), q in [0, 63]: its low 4 bits
// in ql, its high 2 in qh.
struct block_q6_K {
    std::uint8_t ql[128];
    std::uint8_t qh[64];
    std::int8_t scales[16];
    half d;
};

static_assert(sizeof(half) == 2 && alignof(half) == 2 && sizeof(bfloat16) == 2);
static_assert(sizeof(block_q8_0) == 34 && offsetof(block_q8_0, qs) == 2);
static_assert(sizeof(block_q4_0) == 18 && offsetof(block_q4_0, qs) == 2);
static_assert(sizeof(block_q4_K) == 144 && offsetof(block_q4_K, dmin) == 2 && offsetof(block_q4_K, scales) == 4 &&
              offsetof(block_q4_K, qs) == 16);
static_assert(sizeof(block_q6_K) == 210 && offsetof(block_q6_K, qh) == 128 && offsetof(block_q6_K, scales) == 192 &&
              offsetof(block_q6_K, d) == 208);
static_assert(std::is_trivially_copyable_v<block_q8_0> && std::is_trivially_copyable_v<block_q4_0> &&
              std::is_trivially_copyable_v<block_q4_K> && std::is_trivially_copyable_v<block_q6_K>);

// ---- the row conversions (src/quantized.cpp) --------------------------------------------------
// Each takes a whole number of blocks: n elements, n / block width blocks (the formats' members
// below check that).
namespace detail {
void quantize_row_q8_0(const float* x, block_q8_0* y, std::size_t n);
void quantize_row_q4_0(const float* x, block_q4_0* y, std::size_t n);
void quantize_row_q4_K(const float* x, block_q4_K* y, std::size_t n);
void quantize_row_q6_K(const float* x, block_q6_K* y, std::size_t n);
void dequantize_row_q8_0(const block_q8_0* x, float* y, std::size_t n);
void dequantize_row_q4_0(const block_q4_0* x, float* y, std::size_t n);
void dequantize_row_q4_K(const block_q4_K* x, float* y, std::size_t n);
void dequantize_row_q6_K(const block_q6_K* x, float* y, std::size_t n);
void float_row_to_half(const float* x, half* y, std::size_t n);
void half_row_to_float(const half* x, float* y, std::size_t n);
void float_row_to_bfloat16(const float* x, bfloat16* y, std::size_t n);
void bfloat16_row_to_float(const bfloat16* x, float* y, std::size_t n);
void copy_float_row(const float* x, float* y, std::size_t n);
// Sub-block j's 6-bit scale and min, of the 12 bytes of a block_q4_K (ggml's get_scale_min_k4).
void get_scale_min_k4(int j, const std::uint8_t* q, std::uint8_t* d, std::uint8_t* m);

// The run-time checks of a row's conversion: its length a multiple of the block width, its blocks
// as many as it needs.
void check_row_blocks(std::string_view operation, std::size_t elements, std::size_t block_width, std::size_t blocks);
}  // namespace detail

// ---- the formats ------------------------------------------------------------------------------
namespace detail {
template <class Block, std::size_t Width, std::size_t Bytes, ggml_type Type, fixed_string Name,
          auto Quantize, auto Dequantize>
struct storage_format {
    using block_type = Block;
    static constexpr std::size_t block_width = Width;
    static constexpr std::size_t bytes_per_block = Bytes;
    static constexpr ggml_type type = Type;
    static constexpr std::string_view name = Name.view();
    static_assert(sizeof(Block) == Bytes);

    // `blocks` to floats: out holds blocks.size() * block_width.
    static void dequantize_row(std::span<const Block> blocks, std::span<float> out) {
        check_row_blocks("dequantize_row", out.size(), Width, blocks.size());
        Dequantize(blocks.data(), out.data(), out.size());
    }
    // Floats to blocks, by ggml's reference quantizer: in.size() a multiple of block_width, out
    // holding in.size() / block_width blocks.
    static void quantize_row(std::span<const float> in, std::span<Block> out) {
        check_row_blocks("quantize_row", in.size(), Width, out.size());
        Quantize(in.data(), out.data(), in.size());
    }
};
}  // namespace detail

// clang-format off
struct f32 : detail::storage_format<float, 1, 4, ggml_type::f32, "f32",
                                    detail::copy_float_row, detail::copy_float_row> {};
struct f16 : detail::storage_format<half, 1, 2, ggml_type::f16, "f16",
                                    detail::float_row_to_half, detail::half_row_to_float> {};
struct bf16 : detail::storage_format<bfloat16, 1, 2, ggml_type::bf16, "bf16",
                                     detail::float_row_to_bfloat16, detail::bfloat16_row_to_float> {};
struct q8_0 : detail::storage_format<block_q8_0, 32, 34, ggml_type::q8_0, "q8_0",
                                     detail::quantize_row_q8_0, detail::dequantize_row_q8_0> {};
struct q4_0 : detail::storage_format<block_q4_0, 32, 18, ggml_type::q4_0, "q4_0",
                                     detail::quantize_row_q4_0, detail::dequantize_row_q4_0> {};
struct q4_K : detail::storage_format<block_q4_K, qk_k, 144, ggml_type::q4_K, "q4_K",
                                     detail::quantize_row_q4_K, detail::dequantize_row_q4_K> {};
struct q6_K : detail::storage_format<block_q6_K, qk_k, 210, ggml_type::q6_K, "q6_K",
                                     detail::quantize_row_q6_K, detail::dequantize_row_q6_K> {};
// clang-format on

// What the code above a format relies on: a block, its width and bytes, a type id and a name, and
// the two row conversions.
template <class F>
concept StorageFormat = requires(std::span<const typename F::block_type> blocks, std::span<float> out,
                                 std::span<const float> in, std::span<typename F::block_type> into) {
    typename F::block_type;
    requires std::is_trivially_copyable_v<typename F::block_type>;
    requires F::block_width > 0;
    requires F::bytes_per_block == sizeof(typename F::block_type);
    { F::type } -> std::convertible_to<ggml_type>;
    { F::name } -> std::convertible_to<std::string_view>;
    F::dequantize_row(blocks, out);
    F::quantize_row(in, into);
};

// The bytes of `elements` elements stored in format F (elements a multiple of its block width).
template <StorageFormat F>
constexpr std::size_t storage_bytes(std::size_t elements) {
    return elements / F::block_width * F::bytes_per_block;
}

// ---- a weight's rows divide into blocks -------------------------------------------------------
// Whether RowDim's rows divide into F's blocks: true for a static extent the block width divides,
// and for a dynamic one (checked when its extent is known).
namespace detail {
template <class F, class RowDim>
consteval bool rows_divide() {
    if constexpr (RowDim::is_static) return RowDim::extent % F::block_width == 0;
    else return true;
}
}  // namespace detail

template <class F, class RowDim>
concept rows_divide_into_blocks = StorageFormat<F> && Dim<RowDim> && detail::rows_divide<F, RowDim>();

#define SHAPED_RULE_ROW_BLOCKS "the format's block width must divide the row dim (the last, contiguous one)"
#define SHAPED_RULE_ROW_BLOCK_COUNT "the blocks given must hold the row's elements exactly"

namespace diag {
// The block width of a format, as a diagnostic shows it.
template <std::size_t Width>
struct block_width {};

// A quantize of a weight whose row dim the block width does not divide: the format, its block
// width, the row dim.
template <class... Shown>
struct rows_divide_into_blocks : failed {
    static_assert(sizeof...(Shown) == 0, "shaped::quantize: " SHAPED_RULE_ROW_BLOCKS);
};
}  // namespace diag

namespace detail {
// The rule, asserted in place where nothing has a return type to carry a check: the format, its
// block width and the row dim are its arguments, so that both compilers print all three.
template <class F, class Width, class RowDim>
inline constexpr bool block_width_divides_row = rows_divide_into_blocks<F, RowDim>;

template <StorageFormat F, Dim RowDim>
void check_row_dim(std::string_view operation, std::size_t extent) {
    if (extent % F::block_width != 0)
        throw_rule(operation, SHAPED_RULE_ROW_BLOCKS,
                   message({"row dim ", message_part::dim_extent{RowDim::name.view(), extent}, ", ", F::name,
                            " blocks of ", F::block_width}));
}
}  // namespace detail

// ---- a quantized matrix -----------------------------------------------------------------------
// Rows x Cols weights stored row-major in format F: each row its Cols / block_width blocks, the
// rows one after another (as a GGUF tensor of ggml dims [Cols, Rows] lies in its file).
template <StorageFormat F, Dim Rows, Dim Cols>
class QuantizedMatrix {
    static_assert(detail::block_width_divides_row<F, diag::block_width<F::block_width>, Cols>,
                  "shaped::QuantizedMatrix: " SHAPED_RULE_ROW_BLOCKS);

public:
    using format = F;
    using block_type = typename F::block_type;
    // As a module's parameter (nn/module.hpp) sees it: elements are blocks, dims the weights'.
    using value_type = block_type;
    using dims_type = dims<Rows, Cols>;
    using rows_dim = Rows;
    using row_dim = Cols;
    static constexpr std::size_t block_width = F::block_width;

    // Both extents static: zero blocks.
    QuantizedMatrix()
        requires(Rows::is_static && Cols::is_static)
        : QuantizedMatrix(std::array<std::size_t, 2>{Rows::extent, Cols::extent}) {}

    // Zero blocks of the given extents, checked against the static ones; the row dim's against
    // the block width.
    explicit QuantizedMatrix(const std::array<std::size_t, 2>& extents) : rows_(extents[0]), cols_(extents[1]) {
        detail::check_extents_fit("QuantizedMatrix", dims<Rows, Cols>{}, extents);
        detail::check_row_dim<F, Cols>("QuantizedMatrix", cols_);
        blocks_.resize(rows_ * blocks_per_row());
    }

    std::size_t rows() const { return rows_; }
    std::size_t cols() const { return cols_; }
    std::array<std::size_t, 2> extents() const { return {rows_, cols_}; }
    std::size_t blocks_per_row() const { return cols_ / block_width; }
    std::size_t bytes() const { return blocks_.size() * sizeof(block_type); }

    // The blocks, as a parameter's elements.
    block_type* data() { return blocks_.data(); }
    const block_type* data() const { return blocks_.data(); }
    std::size_t size() const { return blocks_.size(); }

    std::span<block_type> blocks() { return blocks_; }
    std::span<const block_type> blocks() const { return blocks_; }
    std::span<block_type> row(std::size_t r) { return blocks().subspan(r * blocks_per_row(), blocks_per_row()); }
    std::span<const block_type> row(std::size_t r) const {
        return blocks().subspan(r * blocks_per_row(), blocks_per_row());
    }

    // Row r as floats: out holds cols().
    void dequantize_row(std::size_t r, std::span<float> out) const { F::dequantize_row(row(r), out); }
    // Row r from floats, by ggml's reference quantizer: in holds cols().
    void quantize_row(std::size_t r, std::span<const float> in) { F::quantize_row(in, row(r)); }

private:
    std::size_t rows_;
    std::size_t cols_;
    std::vector<block_type> blocks_;
};

// A float matrix in format F, each row by ggml's reference quantizer. F's block width must divide
// the row dim: a compile error naming the format, its block width and the dim otherwise.
template <StorageFormat F, Dim Rows, Dim Cols>
    requires rows_divide_into_blocks<F, Cols>
QuantizedMatrix<F, Rows, Cols> quantize(const Tensor<float, Rows, Cols>& weight) {
    QuantizedMatrix<F, Rows, Cols> out(weight.extents());
    const std::size_t cols = out.cols();
    for (std::size_t r = 0; r < out.rows(); ++r) out.quantize_row(r, weight.elements().subspan(r * cols, cols));
    return out;
}

template <StorageFormat F, Dim Rows, Dim Cols>
    requires(!rows_divide_into_blocks<F, Cols>)
diag::rows_divide_into_blocks<F, diag::block_width<F::block_width>, Cols> quantize(const Tensor<float, Rows, Cols>&);

// A failed operand stays failed, without a second error.
template <StorageFormat F, Failed E>
failed quantize(E&&);

// The floats a quantized matrix stands for.
template <StorageFormat F, Dim Rows, Dim Cols>
Tensor<float, Rows, Cols> dequantize(const QuantizedMatrix<F, Rows, Cols>& matrix) {
    auto out = Tensor<float, Rows, Cols>::for_overwrite(matrix.extents());
    const std::size_t cols = matrix.cols();
    for (std::size_t r = 0; r < matrix.rows(); ++r) matrix.dequantize_row(r, out.elements().subspan(r * cols, cols));
    return out;
}

template <Failed E>
failed dequantize(E&&);

// ---- the product with a quantized matrix ------------------------------------------------------
// linear(x, W) = x @ W^T for a quantized W (Out, In), as torch.nn.functional.linear(x, W): x
// (..., In) -> (..., Out), lazy. It runs by the kernels of kernels/quantized_matmul.hpp, which
// read W's blocks as they lie. W is held by reference, as a node holds a Tensor operand: it must
// outlive the expression.
template <class X, StorageFormat F, Dim Rows, Dim Cols>
class quantized_linear_node : public expression_base {
public:
    using value_type = float;
    using matrix_type = QuantizedMatrix<F, Rows, Cols>;
    using dims_type = replace_at<rank_of<X> - 1, Rows, dims_of<X>>;
    static constexpr bool owns_storage = false;
    static constexpr std::size_t rank = dims_type::rank;

    template <operand_for<X> A>
    quantized_linear_node(A&& x, const matrix_type& matrix) : x_(std::forward<A>(x)), matrix_(&matrix) {
        const std::size_t in = x_.extents()[rank - 1];
        if (in != matrix.cols())
            detail::throw_dims_do_not_meet("linear", "x's last dim must be the matrix's row dim", "x",
                                           dim_at<rank - 1, dims_of<X>>::name.view(), in, "matrix", Cols::name.view(),
                                           matrix.cols());
    }

    std::array<std::size_t, rank> extents() const {
        auto e = x_.extents();
        e[rank - 1] = matrix_->rows();
        return e;
    }
    const X& operand() const { return x_; }
    const matrix_type& matrix() const { return *matrix_; }

private:
    X x_;
    const matrix_type* matrix_;
};

template <Expression X, StorageFormat F, Dim Rows, Dim Cols>
    requires(std::is_same_v<value_type_of<X>, float> && rank_of<X> >= 1 &&
             can_meet<dim_at<rank_of<X> - 1, dims_of<X>>, Cols>)
auto linear(X&& x, const QuantizedMatrix<F, Rows, Cols>& matrix) {
    return quantized_linear_node<operand_t<X&&>, F, Rows, Cols>(std::forward<X>(x), matrix);
}

}  // namespace shaped
