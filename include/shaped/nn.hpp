#pragma once
// Layer 5: layers with typed parameters.
#include <shaped/nn/attention.hpp>
#include <shaped/nn/block.hpp>
#include <shaped/nn/kv_cache.hpp>
#include <shaped/nn/layer_norm.hpp>
#include <shaped/nn/linear.hpp>
#include <shaped/nn/mlp.hpp>
