// Section 3 of the chapter, "KV cache": generation makes one token at a time. Each new token's
// query reads the keys and values kept from the tokens before it (and its own); only the key and
// value are kept for the steps after. Old queries are never needed again, so none is stored.
#include <shaped/shaped.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <iostream>

using B = shaped::dim<"B", 1>;   // batch
using T = shaped::dim<"T">;      // time: as many positions as there are so far
using C = shaped::dim<"C", 6>;   // channels
using H = shaped::dim<"H", 16>;  // head size
using S = shaped::dim<"S", 8>;   // the cache's capacity
using Held = shaped::dim<"S">;   // the positions the cache holds

// The largest difference between the n positions of `cached` and positions from .. from + n - 1
// of `recomputed`.
template <class Cached, class Recomputed>
double max_difference(const Cached& cached, const Recomputed& recomputed, std::size_t from) {
    double worst = 0;
    const auto e = cached.extents();
    for (std::size_t b = 0; b < e[0]; ++b)
        for (std::size_t i = 0; i < e[1]; ++i)
            for (std::size_t d = 0; d < e[2]; ++d)
                worst = std::max(worst, static_cast<double>(std::abs(cached(b, i, d) - recomputed(b, from + i, d))));
    return worst;
}

int main() {
    std::cout << "3. KV cache\n\n";
    shaped::Generator gen(1337);
    shaped::nn::Head<C, H> head(gen);
    const auto x = shaped::randn<float, B, T, C>(gen, T{S::extent});  // the tokens, embedded
    const float scale = shaped::nn::attention_scale<H>;
    bool all_match = true;

    // Keys and values for S positions, allocated once; nothing is allocated per token.
    shaped::nn::KVCache<float, B, S, H> cache;
    std::cout << "cache: capacity " << S::extent << ", " << cache.bytes << " bytes\n\n";

    // Prefill: the prompt runs through the head once, and its keys and values fill the cache.
    const std::size_t prompt = 3;
    const auto prefilled = head(shaped::slice<T>(x, 0, prompt), cache);
    std::cout << "prefill " << prompt << " tokens: out " << prefilled.shape() << ", cache length " << cache.length()
              << "\n\n";

    for (std::size_t t = prompt; t < S::extent; ++t) {
        const auto token = shaped::slice<T>(x, t, t + 1);  // (B, 1, C)
        // The new token's query, key and value. The query is used here, once.
        const shaped::Tensor<float, B, T, H> q = head.query(token);
        const shaped::Tensor<float, B, T, H> k = head.key(token);
        const shaped::Tensor<float, B, T, H> v = head.value(token);
        // Appended first, the new key and value are simply the cache's last: one row written,
        // nothing concatenated.
        cache.append(k, v);
        // The query against every cached key. The newest position may see them all: no mask.
        const shaped::Tensor<float, B, T, Held> wei = shaped::softmax<-1>(shaped::matmul(q, cache.keys().mT()) * scale);
        const shaped::Tensor<float, B, T, H> out = shaped::matmul(wei, cache.values());

        // Without a cache: the whole prefix again, every position's query, key and value.
        const auto recomputed = head(shaped::slice<T>(x, 0, t + 1));
        const double difference = max_difference(out, recomputed, t);
        all_match = all_match && difference <= 1e-5;
        std::cout << "step " << t << ": cache length " << cache.length() << "\nwei=\n" << wei << "\n";
        std::printf("max |cached - recomputed| = %.1e\n\n", difference);
    }

    // The same through nn::MultiHeadAttention, a few tokens at a time: each chunk is causal
    // among its own tokens and sees the whole cache.
    using NH = shaped::dim<"NH", 3>;
    using HS = shaped::dim<"HS", 2>;
    shaped::nn::MultiHeadAttention<C, NH, HS> attention(gen);
    shaped::nn::MultiHeadAttention<C, NH, HS>::cache_type<B, S> heads_cache;
    std::cout << "multi-head attention, " << NH::extent << " heads, in chunks:\n";
    for (std::size_t from = 0, n = 1; from < S::extent; from += n, ++n) {
        n = std::min(n, S::extent - from);
        const auto out = attention(shaped::slice<T>(x, from, from + n), heads_cache);
        const double difference = max_difference(out, attention(shaped::slice<T>(x, 0, from + n)), from);
        all_match = all_match && difference <= 1e-5;
        std::printf("  %zu new tokens: cache length %zu, max |cached - recomputed| = %.1e\n", n,
                    heads_cache.length(), difference);
    }

    // A full cache refuses more, says why, and stays as it was.
    try {
        attention(shaped::slice<T>(x, 0, 1), heads_cache);
    } catch (const shaped::nn::cache_overflow& e) {
        std::cout << "\none more token: " << e.what() << "\ncache length still " << heads_cache.length() << "\n";
    }
    std::cout << (all_match ? "\ncached decoding matches the full recompute at every step\n"
                            : "\ncached decoding DIFFERS from the full recompute\n");
    return all_match ? 0 : 1;
}
