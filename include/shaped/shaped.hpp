#pragma once
// shaped: compile-time shape-checked tensors for attention models. One header per layer.
// Every layer's checks first, then the headers that assert a rule in place (in a constructor or
// a class), so that a failed one is reported under the shortest chain of includes (a line of the
// diagnostic per header in the chain).
#include <shaped/core/diagnostics.hpp>
#include <shaped/expr/diagnostics.hpp>
#include <shaped/tensor/diagnostics.hpp>
#include <shaped/kernels/diagnostics.hpp>
#include <shaped/nn/diagnostics.hpp>
#include <shaped/expr/window.hpp>
#include <shaped/tensor/tensor.hpp>
#include <shaped/tensor/quantized.hpp>
#include <shaped/nn/module.hpp>
#include <shaped/nn/kv_cache.hpp>
#include <shaped/nn/ring_kv_cache.hpp>
#include <shaped/nn/attention.hpp>

#include <shaped/core.hpp>
#include <shaped/expr.hpp>
#include <shaped/tensor.hpp>
#include <shaped/kernels.hpp>
#include <shaped/nn.hpp>
#include <shaped/io.hpp>
#include <shaped/text.hpp>
#include <shaped/models.hpp>
#include <shaped/train.hpp>
