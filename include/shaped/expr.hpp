#pragma once
// Layer 2: lazy expression nodes.
#include <shaped/expr/attention.hpp>
#include <shaped/expr/elementwise.hpp>
#include <shaped/expr/expression.hpp>
#include <shaped/expr/matmul.hpp>
#include <shaped/expr/reduce.hpp>
#include <shaped/expr/structure.hpp>
