// Rule: a layer's mask_mod() says whether a query sees a key, given the batch row, the head and
// both positions: a mask that takes the head where the batch row goes is one error naming the
// layer, the part and the mask.
// expect-error: shaped::nn::attention: a layer's score_mod\(\) returns a function
// expect-error: attention_modifier<SwappedDocuments, shaped::diag::modifier_part::mask_mod
#include <shaped/shaped.hpp>

using B = shaped::dim<"B", 2>;
using T = shaped::dim<"T", 8>;
using C = shaped::dim<"C", 16>;

// One head of the chapter's kind, with a modifier of its own.
struct SwappedDocuments : shaped::nn::causal_layer<SwappedDocuments> {
    using value_type = float;
    using channel_dim = C;
    using head_size_dim = C;
    using merged_dim = C;
    explicit SwappedDocuments(shaped::Generator& gen) : query(gen), key(gen), value(gen) {}
    BOOST_HANA_DEFINE_STRUCT(SwappedDocuments,
        (shaped::nn::Linear<C, C, false>, query),
        (shaped::nn::Linear<C, C, false>, key),
        (shaped::nn::Linear<C, C, false>, value));

#if defined(SHAPED_COMPILE_FAIL_CONTROL)
    auto mask_mod() const {
        return [](shaped::batch_index b, shaped::head_index, shaped::query_position q, shaped::key_position kv) {
            return q.value / (4 + b.value) == kv.value / (4 + b.value);
        };
    }
#else
    auto mask_mod() const {
        return [](shaped::head_index, shaped::batch_index b, shaped::query_position q, shaped::key_position kv) {
            return q.value / (4 + b.value) == kv.value / (4 + b.value);
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
    SwappedDocuments head(gen);
    auto y = head(shaped::randn<float, B, T, C>(gen));
    (void)y;
}
