#pragma once
// shaped: compile-time shape-checked tensors for attention models. One header per layer.
#include <shaped/core.hpp>
#include <shaped/expr.hpp>
#include <shaped/tensor.hpp>
#include <shaped/kernels.hpp>
#include <shaped/nn.hpp>
#include <shaped/io.hpp>
