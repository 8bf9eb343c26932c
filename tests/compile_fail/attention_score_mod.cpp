// Rule: a layer's score_mod() is called with the score and its coordinates, each of its own type:
// a modifier that takes the key's position where the query's goes (ALiBi's distance the wrong
// way round) is one error naming the layer, the part and the modifier, not scores biased backwards.
// expect-error: shaped::nn::attention: a layer's score_mod\(\) returns a function score\(value_type s, batch_index
// expect-error: attention_modifier<SwappedAlibi, shaped::diag::modifier_part::score_mod
#include <shaped/shaped.hpp>

using B = shaped::dim<"B", 2>;
using T = shaped::dim<"T", 8>;
using C = shaped::dim<"C", 16>;

// One head of the chapter's kind, with a modifier of its own.
struct SwappedAlibi : shaped::nn::causal_layer<SwappedAlibi> {
    using value_type = float;
    using channel_dim = C;
    using head_size_dim = C;
    using merged_dim = C;
    explicit SwappedAlibi(shaped::Generator& gen) : query(gen), key(gen), value(gen) {}
    BOOST_HANA_DEFINE_STRUCT(SwappedAlibi,
        (shaped::nn::Linear<C, C, false>, query),
        (shaped::nn::Linear<C, C, false>, key),
        (shaped::nn::Linear<C, C, false>, value));

#if defined(SHAPED_COMPILE_FAIL_CONTROL)
    auto score_mod() const {
        return [](float s, shaped::batch_index, shaped::head_index, shaped::query_position q, shaped::key_position kv) {
            return s - 0.5f * static_cast<float>(q - kv);
        };
    }
#else
    auto score_mod() const {
        return [](float s, shaped::batch_index, shaped::head_index, shaped::key_position kv, shaped::query_position q) {
            return s - 0.5f * static_cast<float>(q - kv);
        };
    }
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
    SwappedAlibi head(gen);
    auto y = head(shaped::randn<float, B, T, C>(gen));
    (void)y;
}
