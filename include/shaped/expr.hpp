#pragma once
// Layer 2: lazy expression nodes.
// The checks first, so that a failed one is reported under the shortest chain of includes.
#include <shaped/expr/diagnostics.hpp>
#include <shaped/expr/attention.hpp>
#include <shaped/expr/elementwise.hpp>
#include <shaped/expr/expression.hpp>
#include <shaped/expr/gather.hpp>
#include <shaped/expr/matmul.hpp>
#include <shaped/expr/reduce.hpp>
#include <shaped/expr/structure.hpp>
#include <shaped/expr/window.hpp>
