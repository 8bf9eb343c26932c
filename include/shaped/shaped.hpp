#pragma once
// shaped: compile-time shape-checked tensors for attention models.
#include <shaped/core.hpp>
#include <shaped/expr.hpp>
#include <shaped/kernels.hpp>
#include <shaped/nn.hpp>
#include <shaped/tensor.hpp>
