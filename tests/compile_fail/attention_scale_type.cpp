// Rule: a layer may choose the factor of its scores, scale(), in its own value_type: a float
// layer's scale() returning double is an error naming the layer and both types.
// expect-error: shaped::nn::attention: a layer's scale\(\) returns its value_type
// expect-error: attention_scale_type<WideScale, float, double>
#include <shaped/shaped.hpp>

using B = shaped::dim<"B", 2>;
using T = shaped::dim<"T", 8>;
using C = shaped::dim<"C", 16>;

// One head of the chapter's kind, with a scale of its own.
struct WideScale : shaped::nn::causal_layer<WideScale> {
    using value_type = float;
    using channel_dim = C;
    using head_size_dim = C;
    using merged_dim = C;
    explicit WideScale(shaped::Generator& gen) : query(gen), key(gen), value(gen) {}
    BOOST_HANA_DEFINE_STRUCT(WideScale,
        (shaped::nn::Linear<C, C, false>, query),
        (shaped::nn::Linear<C, C, false>, key),
        (shaped::nn::Linear<C, C, false>, value));

#if defined(SHAPED_COMPILE_FAIL_CONTROL)
    float scale() const { return 0.5f; }
#else
    double scale() const { return 0.5; }
#endif
    template <class X>
    auto project(const X& x) const { return std::tuple{eval(query(x)), eval(key(x)), eval(value(x))}; }
    template <class P>
    static auto heads(P& p) {
        auto& [q, k, v] = p;
        return std::tuple{shaped::view_of(q), shaped::view_of(k), shaped::view_of(v)};
    }
    shaped::nn::no_position_encoding encode_positions;
    template <class M>
    static auto heads_of(M& merged) { return shaped::view_of(merged); }
    template <class M>
    M project_out(M merged) const { return merged; }
};

int main() {
    shaped::Generator gen(0);
    WideScale head(gen);
    auto y = head(shaped::randn<float, B, T, C>(gen));
    (void)y;
}
