#pragma once
// The held-expression sweep shared by held_expression_*_test.cpp: every node kind, built by a
// producer and held in a variable as a non-const lvalue, a const lvalue or an rvalue, is the
// operand of a consumer, and must give the numbers of the same expression written inline. A
// node's forwarding constructor once took the place of its copy constructor, so a held node was
// wrapped in itself (a dangling temporary Tensor, or no compile); this sweep guards every pair.
// The consumers are split over eight files to keep each translation unit quick to compile.
// Under ASan, ASAN_OPTIONS=detect_stack_use_after_return=1 also reports a node that reads a
// temporary Tensor gone out of scope (gcc 12 leaves that check off by default).

#include <shaped/shaped.hpp>

#include <catch2/catch.hpp>

#include <cstddef>
#include <cstdint>
#include <limits>
#include <string_view>
#include <tuple>
#include <utility>
#include <vector>

namespace held {

using B = shaped::dim<"B", 2>;
using R = shaped::dim<"R", 4>;
using S = shaped::dim<"S", 4>;

// The tensors the producers read. Producers hold them by reference, so they live for the test.
struct inputs {
    shaped::Generator gen{20261201};
    shaped::Tensor<float, B, R, S> x = shaped::randn<float, B, R, S>(gen);
    shaped::Tensor<float, B, R, S> y = shaped::randn<float, B, R, S>(gen);
    shaped::Tensor<float, S, S> w = shaped::randn<float, S, S>(gen);
    shaped::Tensor<float, S> gamma = shaped::randn<float, S>(gen);
    shaped::Tensor<float, S> beta = shaped::randn<float, S>(gen);
    shaped::Tensor<float, B, R, S> q = shaped::randn<float, B, R, S>(gen);
    shaped::Tensor<float, B, R, S> k = shaped::randn<float, B, R, S>(gen);
    shaped::Tensor<float, B, R, S> v = shaped::randn<float, B, R, S>(gen);
    shaped::Tensor<float, R, R> ones = shaped::ones<float, R, R>();
};

inline const inputs& fixed_inputs() {
    static const inputs in;
    return in;
}

// ---- helpers for the consumers: partners built from the operand's own dims ------------------

template <class E>
using value_t = shaped::value_type_of<E>;
template <class E>
using dims_t = shaped::dims_of<E>;
template <class E>
inline constexpr std::size_t rank_v = shaped::rank_of<E>;
template <std::size_t I, class E>
using dim_t = shaped::dim_at<I, dims_t<E>>;
template <class E>
using first_dim = dim_t<0, E>;
template <class E>
using row_dim = dim_t<rank_v<E> - 2, E>;
template <class E>
using last_dim = dim_t<rank_v<E> - 1, E>;

template <class T, class List>
struct random_of;
template <class T, shaped::Dim... Ds>
struct random_of<T, shaped::dims<Ds...>> {
    static shaped::Tensor<T, Ds...> make(std::uint64_t seed) {
        shaped::Generator gen(seed);
        return shaped::randn<T, Ds...>(gen);
    }
};

// A Tensor of E's element type with the dims of List (E's own by default), from a fixed seed, so
// that the held and the inline forms meet the same partner.
template <class E, class List = dims_t<E>>
auto partner(std::uint64_t seed) {
    return random_of<value_t<E>, List>::make(seed);
}

// Ones of E's element type, (X, X) for E's row dim X: the source of the causal mask.
template <class E>
auto causal_ones() {
    return shaped::ones<value_t<E>, row_dim<E>, row_dim<E>>();
}

// The values of any expression, row-major, after evaluating it once.
template <class X>
std::vector<double> values_of(const X& x) {
    const auto t = shaped::eval(x);
    return std::vector<double>(t.data(), t.data() + t.size());
}

// ---- producers: one node kind each, from the fixed inputs -------------------------------------

#define HELD_PRODUCER(type_name, ...)                                    \
    struct type_name {                                                   \
        static constexpr std::string_view name = #type_name;             \
        static auto make(const inputs& in) { return __VA_ARGS__; }       \
    };

HELD_PRODUCER(tensor, shaped::Tensor<float, B, R, S>(in.x))
HELD_PRODUCER(view, in.x.view())
HELD_PRODUCER(slice_view, (shaped::slice<R, 1, 3>(in.x)))
HELD_PRODUCER(add, in.x + in.y)
HELD_PRODUCER(multiply, in.x * in.y)
HELD_PRODUCER(scalar_divide, 3.0f / (shaped::abs(in.y) + 1.0f))
HELD_PRODUCER(where_compare, shaped::where(in.x < in.y, in.x, in.y))
HELD_PRODUCER(exp, shaped::exp(in.x))
HELD_PRODUCER(gelu, shaped::gelu(in.x))
HELD_PRODUCER(maximum, shaped::maximum(in.x, 0.0f))
HELD_PRODUCER(cast_double, shaped::cast<double>(in.x))
HELD_PRODUCER(masked_fill, shaped::masked_fill(in.x, in.y > 0.0f, -1.0f))
HELD_PRODUCER(sum_by_name, shaped::sum<R>(in.x))
HELD_PRODUCER(max_last, shaped::max<-1>(in.x))
HELD_PRODUCER(var_by_name, shaped::var<R>(in.x))
HELD_PRODUCER(mean_keepdim, (shaped::mean<R, shaped::keepdim>(in.x)))
HELD_PRODUCER(softmax, shaped::softmax<-1>(in.x))
HELD_PRODUCER(log_softmax_by_name, shaped::log_softmax<R>(in.x))
HELD_PRODUCER(layer_norm, shaped::layer_norm(in.x, in.gamma, in.beta))
HELD_PRODUCER(rms_norm, shaped::rms_norm(in.x, in.gamma))
HELD_PRODUCER(tril, shaped::tril(in.x))
HELD_PRODUCER(mT, in.x.mT())
HELD_PRODUCER(transpose_by_name, (shaped::transpose<R, S>(in.x)))
HELD_PRODUCER(permute_by_position, (shaped::permute<2, 0, 1>(in.x)))
HELD_PRODUCER(rename, (shaped::rename<S, shaped::dim<"C", 4>>(in.x)))
HELD_PRODUCER(matmul, shaped::matmul(in.x, in.w))
HELD_PRODUCER(matmul_scaled, shaped::matmul(in.x, in.w) * 0.5f)
HELD_PRODUCER(matmul_biased, shaped::matmul(in.x, in.w.mT()) + in.beta)
HELD_PRODUCER(causal_attention, shaped::causal_attention(in.q, in.k, in.v, 0.5f))
HELD_PRODUCER(attention_pattern,
              shaped::matmul(shaped::softmax<-1>(shaped::masked_fill(shaped::matmul(in.q, in.k.mT()) * 0.5f,
                                                                     shaped::tril(in.ones) == 0.0f,
                                                                     -std::numeric_limits<float>::infinity())),
                             in.v))
HELD_PRODUCER(split_view, (shaped::split<S, shaped::dim<"H", 2>, shaped::dim<"W", 2>>(in.x)))
HELD_PRODUCER(unsqueeze_node, (shaped::unsqueeze<1, shaped::dim<"U", 1>>(in.x + in.y)))
HELD_PRODUCER(concat, (shaped::concat<R>(in.x, in.y)))
// Square with one dim name twice, so that the transposed node also converts to a Tensor of its
// operand's type: the case in which a held node once dangled instead of failing to compile. Its
// repeated name rules out the consumers that name a dim, so it has a sweep of its own.
HELD_PRODUCER(square_mT, in.w.mT())
#undef HELD_PRODUCER

// The chapter's attention in pieces: the weights held in a variable, then the matmul with v.
struct attention_in_pieces {
    static constexpr std::string_view name = "attention_in_pieces";
    static auto make(const inputs& in) {
        auto wei = shaped::softmax<-1>(shaped::masked_fill(shaped::matmul(in.q, in.k.mT()) * 0.5f,
                                                           shaped::tril(in.ones) == 0.0f,
                                                           -std::numeric_limits<float>::infinity()));
        return shaped::matmul(wei, in.v);
    }
};

// Every node kind once; the kinds that differ only in their operation (add and multiply, exp and
// gelu, sum, max and var) share one node template and kernel path, so a few of each stand for
// the rest and keep the sweep's compile time in bounds.
using producers = std::tuple<tensor, view, slice_view, add, multiply, scalar_divide, where_compare, exp, gelu, maximum,
                             cast_double, masked_fill, sum_by_name, max_last, var_by_name, mean_keepdim, softmax,
                             log_softmax_by_name, layer_norm, rms_norm, tril, mT, transpose_by_name,
                             permute_by_position, rename, matmul, matmul_scaled, matmul_biased, causal_attention,
                             attention_pattern, attention_in_pieces, split_view, unsqueeze_node, concat>;

// ---- the sweep ------------------------------------------------------------------------------

// One comparison, outside the templates so that its Catch2 machinery is compiled once.
inline void check_form(std::string_view producer, std::string_view consumer, std::string_view form,
                       const std::vector<double>& held, const std::vector<double>& inline_form, std::size_t& cases) {
    INFO("producer " << producer << ", consumer " << consumer << ", form " << form);
    CHECK(held == inline_form);
    ++cases;
}

// A consumer applied to a producer's result held as a non-const lvalue, a const lvalue and an
// rvalue, against the inline form consumer(producer(in)): the same kernels run on the same
// numbers, so the values are equal exactly. Not inlined: one pair per function keeps the
// optimiser's memory per pair rather than per sweep.
template <class Producer, class Consumer>
[[gnu::noinline]] void check_pair(const inputs& in, std::size_t& cases) {
    const auto inline_form = values_of(Consumer::apply(Producer::make(in)));
    {
        auto p = Producer::make(in);
        check_form(Producer::name, Consumer::name, "non-const lvalue", values_of(Consumer::apply(p)), inline_form,
                   cases);
    }
    {
        const auto p = Producer::make(in);
        check_form(Producer::name, Consumer::name, "const lvalue", values_of(Consumer::apply(p)), inline_form, cases);
    }
    {
        auto p = Producer::make(in);
        check_form(Producer::name, Consumer::name, "rvalue", values_of(Consumer::apply(std::move(p))), inline_form,
                   cases);
    }
}

// Runs every consumer of the tuple type Consumers on Producer's result in the three forms, and
// checks that none was skipped.
template <class Producer, class Consumers>
void run_sweep() {
    std::size_t cases = 0;
    [&]<class... Each>(std::tuple<Each...>*) {
        (check_pair<Producer, Each>(fixed_inputs(), cases), ...);
    }(static_cast<Consumers*>(nullptr));
    CHECK(cases == 3 * std::tuple_size_v<Consumers>);
}

// A consumer: a node kind built on the operand e (forwarded as given), evaluated before the
// partners it reads go out of scope.
#define HELD_CONSUMER(type_name, ...)                              \
    struct type_name {                                             \
        static constexpr std::string_view name = #type_name;       \
        template <class E>                                         \
        static auto apply(E&& e) {                                 \
            __VA_ARGS__                                            \
        }                                                          \
    };

}  // namespace held
