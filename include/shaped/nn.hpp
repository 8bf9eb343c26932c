#pragma once
// Layer 5: layers with typed parameters.
// The checks first, so that a failed one is reported under the shortest chain of includes.
#include <shaped/nn/diagnostics.hpp>
#include <shaped/nn/attention.hpp>
#include <shaped/nn/attention_modifiers.hpp>
#include <shaped/nn/block.hpp>
#include <shaped/nn/causal_layer.hpp>
#include <shaped/nn/causal_self_attention.hpp>
#include <shaped/nn/differentiated.hpp>
#include <shaped/nn/dropout.hpp>
#include <shaped/nn/embedding.hpp>
// Before grouped_query_attention.hpp, which includes it: its check then fires one include shallower.
#include <shaped/nn/rotary.hpp>
#include <shaped/nn/grouped_query_attention.hpp>
#include <shaped/nn/kv_cache.hpp>
#include <shaped/nn/layer_norm.hpp>
#include <shaped/nn/linear.hpp>
#include <shaped/nn/llama_block.hpp>
#include <shaped/nn/mlp.hpp>
#include <shaped/nn/module.hpp>
#include <shaped/nn/ring_kv_cache.hpp>
#include <shaped/nn/rms_norm.hpp>
#include <shaped/nn/swiglu.hpp>
