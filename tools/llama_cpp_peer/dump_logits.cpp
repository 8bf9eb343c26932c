// llama.cpp's greedy ids and teacher-forced logits of a GGUF model, through llama.h's C API: the
// reference a GGUF loader is compared with. Built by tools/llama_cpp_peer.sh against the
// libllama it builds.
//
//   dump_logits MODEL.gguf N LOGITS.f32 [FORCED_IDS]
//
// Decodes N tokens greedily from BOS (token 1), one token a step through the KV cache, and prints
// their ids to stdout, one a line (the first of equal maxima, as run.c's argmax takes). Then, from
// an empty cache, one batch of N positions whose inputs are BOS and the first N-1 forced ids (the
// greedy ids just printed, or those of FORCED_IDS, a text file of ids one a line): the logits of
// every position, position i's predicting forced id i, are written to LOGITS.f32 as raw
// little-endian float32, N rows of n_vocab. stderr gets one line: how many positions' argmax is
// not the forced id.
//
// One thread; the KV cache in F32 and flash attention off: llama.cpp's CPU flash attention (on
// by default) rounds q and k to half precision, which moves stories260K's F32 logits by 0.14.
#include "llama.h"

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <vector>

static void errors_only(ggml_log_level level, const char * text, void *) {
    if (level == GGML_LOG_LEVEL_ERROR) std::fputs(text, stderr);
}

static int argmax(const float * row, int n) {
    int best = 0;
    for (int i = 1; i < n; ++i) if (row[i] > row[best]) best = i;
    return best;
}

int main(int argc, char ** argv) {
    if (argc != 4 && argc != 5) {
        std::fprintf(stderr, "usage: %s MODEL.gguf N LOGITS.f32 [FORCED_IDS]\n", argv[0]);
        return 1;
    }
    const int n = std::atoi(argv[2]);
    if (n < 1) { std::fprintf(stderr, "dump_logits: N must be positive\n"); return 1; }
    llama_log_set(errors_only, nullptr);
    llama_backend_init();

    llama_model_params model_params = llama_model_default_params();
    model_params.n_gpu_layers = 0;
    llama_model * model = llama_model_load_from_file(argv[1], model_params);
    if (!model) { std::fprintf(stderr, "dump_logits: cannot load %s\n", argv[1]); return 1; }
    const int n_vocab = llama_vocab_n_tokens(llama_model_get_vocab(model));

    llama_context_params context_params = llama_context_default_params();
    context_params.n_ctx = n;
    context_params.n_batch = context_params.n_ubatch = n;
    context_params.n_threads = context_params.n_threads_batch = 1;
    context_params.type_k = context_params.type_v = GGML_TYPE_F32;
    context_params.flash_attn_type = LLAMA_FLASH_ATTN_TYPE_DISABLED;
    context_params.no_perf = true;
    llama_context * ctx = llama_init_from_model(model, context_params);
    if (!ctx) { std::fprintf(stderr, "dump_logits: cannot make a context\n"); return 1; }

    const llama_token bos = 1;
    std::vector<llama_token> ids;
    for (llama_token token = bos; static_cast<int>(ids.size()) < n;) {
        if (llama_decode(ctx, llama_batch_get_one(&token, 1)) != 0) {
            std::fprintf(stderr, "dump_logits: llama_decode failed at step %zu\n", ids.size());
            return 1;
        }
        token = argmax(llama_get_logits_ith(ctx, -1), n_vocab);
        ids.push_back(token);
        std::printf("%d\n", token);
    }

    std::vector<llama_token> forced = ids;
    if (argc == 5) {
        forced.clear();
        std::ifstream in(argv[4]);
        for (llama_token id; static_cast<int>(forced.size()) < n && in >> id;) forced.push_back(id);
        if (static_cast<int>(forced.size()) != n) {
            std::fprintf(stderr, "dump_logits: %s has fewer than %d ids\n", argv[4], n);
            return 1;
        }
    }

    llama_memory_clear(llama_get_memory(ctx), true);
    llama_batch batch = llama_batch_init(n, 0, 1);
    for (int i = 0; i < n; ++i) {
        batch.token[i] = i == 0 ? bos : forced[i - 1];
        batch.pos[i] = i;
        batch.n_seq_id[i] = 1;
        batch.seq_id[i][0] = 0;
        batch.logits[i] = 1;
    }
    batch.n_tokens = n;
    if (llama_decode(ctx, batch) != 0) { std::fprintf(stderr, "dump_logits: batch decode failed\n"); return 1; }

    std::FILE * out = std::fopen(argv[3], "wb");
    if (!out) { std::fprintf(stderr, "dump_logits: cannot write %s\n", argv[3]); return 1; }
    int differ = 0;
    for (int i = 0; i < n; ++i) {
        const float * row = llama_get_logits_ith(ctx, i);
        differ += argmax(row, n_vocab) != forced[i];
        if (std::fwrite(row, sizeof(float), n_vocab, out) != static_cast<size_t>(n_vocab)) {
            std::fprintf(stderr, "dump_logits: short write to %s\n", argv[3]);
            return 1;
        }
    }
    std::fclose(out);
    std::fprintf(stderr, "dump_logits: %d of %d teacher-forced positions' argmax differ from the forced ids\n", differ, n);

    llama_batch_free(batch);
    llama_free(ctx);
    llama_model_free(model);
    llama_backend_free();
    return 0;
}
