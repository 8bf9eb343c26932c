// The baseline's forward pass (llama_baseline.hpp), in a file of its own so that it is compiled
// as llama2.c's README tells its users to compile run.c: -Ofast -march=native
// (bench/CMakeLists.txt). Fast-math lets the compiler reassociate a dot product's sum, and so
// vectorise the loops below as it vectorises run.c's; built -O3 without it, each sum is one
// serial chain of scalar adds. The logits then differ from an -O3 build's in their last bits.
#include "llama_baseline.hpp"

#include <cmath>
#include <cstddef>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

namespace bench::llama {

namespace {

// o = weight * x / sqrt(mean(x^2) + 1e-5); o may be x.
void rmsnorm(float* o, const float* x, const float* weight, std::size_t size) {
    float ss = 0.0f;
    for (std::size_t j = 0; j < size; j++) ss += x[j] * x[j];
    ss /= static_cast<float>(size);
    ss += 1e-5f;
    ss = 1.0f / std::sqrt(ss);
    for (std::size_t j = 0; j < size; j++) o[j] = weight[j] * (ss * x[j]);
}

// x[0, size) = softmax(x[0, size)).
void softmax(float* x, std::size_t size) {
    float max_val = x[0];
    for (std::size_t i = 1; i < size; i++)
        if (x[i] > max_val) max_val = x[i];
    float sum = 0.0f;
    for (std::size_t i = 0; i < size; i++) {
        x[i] = std::exp(x[i] - max_val);
        sum += x[i];
    }
    for (std::size_t i = 0; i < size; i++) x[i] /= sum;
}

// xout (d,) = W (d, n) @ x (n,): the one loop nest every matmul of the forward pass goes through.
void matmul(float* xout, const float* x, const float* w, std::size_t n, std::size_t d) {
    for (std::size_t i = 0; i < d; i++) {
        float val = 0.0f;
        for (std::size_t j = 0; j < n; j++) val += w[i * n + j] * x[j];
        xout[i] = val;
    }
}

}  // namespace

const float* forward(Transformer& t, int token, int pos) {
    const Config& p = t.config;
    const Weights& w = t.weights;
    RunState& s = t.state;
    if (token < 0 || static_cast<std::size_t>(token) >= p.vocab_size)
        throw std::out_of_range("bench::llama::forward: token " + std::to_string(token) + " is not below vocab_size " +
                                std::to_string(p.vocab_size));
    if (pos < 0 || static_cast<std::size_t>(pos) >= p.seq_len)
        throw std::out_of_range("bench::llama::forward: position " + std::to_string(pos) + " is not below seq_len " +
                                std::to_string(p.seq_len));
    const std::size_t dim = p.dim, kv_dim = p.kv_dim(), hidden_dim = p.hidden_dim, head_size = p.head_size();
    const std::size_t kv_mul = p.n_heads / p.n_kv_heads;  // query heads per key/value head
    const auto position = static_cast<std::size_t>(pos);
    float* x = s.x.data();

    std::memcpy(x, w.token_embedding + static_cast<std::size_t>(token) * dim, dim * sizeof(float));

    for (std::size_t l = 0; l < p.n_layers; l++) {
        // attention RMSNorm
        rmsnorm(s.xb.data(), x, w.rms_att + l * dim, dim);

        // q, and this position's key and value straight into the cache
        const std::size_t loff = l * p.seq_len * kv_dim;
        float* k = s.key_cache.data() + loff + position * kv_dim;
        float* v = s.value_cache.data() + loff + position * kv_dim;
        matmul(s.q.data(), s.xb.data(), w.wq + l * dim * dim, dim, dim);
        matmul(k, s.xb.data(), w.wk + l * kv_dim * dim, dim, kv_dim);
        matmul(v, s.xb.data(), w.wv + l * kv_dim * dim, dim, kv_dim);

        // rotary embedding of q and k: elements i and i + 1 of each head rotated by pos * freq,
        // computed in float as run.c computes it
        for (std::size_t i = 0; i < dim; i += 2) {
            const std::size_t head_dim = i % head_size;
            const float freq = 1.0f / std::pow(10000.0f, static_cast<float>(head_dim) / static_cast<float>(head_size));
            const float val = static_cast<float>(pos) * freq;
            const float fcr = std::cos(val);
            const float fci = std::sin(val);
            const int rotn = i < kv_dim ? 2 : 1;  // q and k, or q alone past k's width
            for (int r = 0; r < rotn; r++) {
                float* vec = r == 0 ? s.q.data() : k;
                const float v0 = vec[i];
                const float v1 = vec[i + 1];
                vec[i] = v0 * fcr - v1 * fci;
                vec[i + 1] = v0 * fci + v1 * fcr;
            }
        }

        // grouped-query attention over positions 0 .. pos, head by head
        for (std::size_t h = 0; h < p.n_heads; h++) {
            const float* q = s.q.data() + h * head_size;
            float* att = s.att.data() + h * p.seq_len;
            const std::size_t kv_head = (h / kv_mul) * head_size;
            for (std::size_t step = 0; step <= position; step++) {
                const float* key = s.key_cache.data() + loff + step * kv_dim + kv_head;
                float score = 0.0f;
                for (std::size_t i = 0; i < head_size; i++) score += q[i] * key[i];
                score /= std::sqrt(static_cast<float>(head_size));
                att[step] = score;
            }
            softmax(att, position + 1);
            float* xb = s.xb.data() + h * head_size;
            std::memset(xb, 0, head_size * sizeof(float));
            for (std::size_t step = 0; step <= position; step++) {
                const float* value = s.value_cache.data() + loff + step * kv_dim + kv_head;
                const float a = att[step];
                for (std::size_t i = 0; i < head_size; i++) xb[i] += a * value[i];
            }
        }

        // output projection and residual
        matmul(s.xb2.data(), s.xb.data(), w.wo + l * dim * dim, dim, dim);
        for (std::size_t i = 0; i < dim; i++) x[i] += s.xb2[i];

        // FFN RMSNorm, then w2(silu(w1 x) * w3 x) and residual
        rmsnorm(s.xb.data(), x, w.rms_ffn + l * dim, dim);
        matmul(s.hb.data(), s.xb.data(), w.w1 + l * hidden_dim * dim, dim, hidden_dim);
        matmul(s.hb2.data(), s.xb.data(), w.w3 + l * hidden_dim * dim, dim, hidden_dim);
        for (std::size_t i = 0; i < hidden_dim; i++) {
            float val = s.hb[i];
            val *= 1.0f / (1.0f + std::exp(-val));
            val *= s.hb2[i];
            s.hb[i] = val;
        }
        matmul(s.xb.data(), s.hb.data(), w.w2 + l * dim * hidden_dim, hidden_dim, dim);
        for (std::size_t i = 0; i < dim; i++) x[i] += s.xb[i];
    }

    // final RMSNorm and the classifier
    rmsnorm(x, x, w.rms_final, dim);
    matmul(s.logits.data(), x, w.classifier, dim, p.vocab_size);
    return s.logits.data();
}

int argmax(const float* v, std::size_t n) {
    std::size_t best = 0;
    for (std::size_t i = 1; i < n; i++)
        if (v[i] > v[best]) best = i;
    return static_cast<int>(best);
}

std::vector<int> greedy(Transformer& t, int first, std::size_t steps, std::vector<float>* logits) {
    if (steps > t.config.seq_len)
        throw std::out_of_range("bench::llama::greedy: " + std::to_string(steps) + " steps do not fit seq_len " +
                                std::to_string(t.config.seq_len));
    std::vector<int> ids;
    ids.reserve(steps);
    int token = first;
    for (std::size_t pos = 0; pos < steps; pos++) {
        const float* out = forward(t, token, static_cast<int>(pos));
        if (logits) logits->insert(logits->end(), out, out + t.config.vocab_size);
        token = argmax(out, t.config.vocab_size);
        ids.push_back(token);
    }
    return ids;
}

}  // namespace bench::llama
