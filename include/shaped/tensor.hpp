#pragma once
// Layer 3: Tensor, View, factories, printing.
// The checks first, so that a failed one is reported under the shortest chain of includes.
#include <shaped/tensor/diagnostics.hpp>
#include <shaped/tensor/einsum.hpp>
#include <shaped/tensor/factories.hpp>
#include <shaped/tensor/layout.hpp>
#include <shaped/tensor/print.hpp>
#include <shaped/tensor/quantized.hpp>
#include <shaped/tensor/random.hpp>
#include <shaped/tensor/reshape.hpp>
#include <shaped/tensor/tensor.hpp>
#include <shaped/tensor/view.hpp>
#include <shaped/tensor/view_of.hpp>
