#pragma once
// Layer 3: Tensor, View, factories, printing.
#include <shaped/tensor/factories.hpp>
#include <shaped/tensor/print.hpp>
#include <shaped/tensor/random.hpp>
#include <shaped/tensor/reshape.hpp>
#include <shaped/tensor/tensor.hpp>
#include <shaped/tensor/view.hpp>
