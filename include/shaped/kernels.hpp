#pragma once
// Layer 4: where expressions are lowered and run.
// The checks first, so that a failed one is reported under the shortest chain of includes.
#include <shaped/kernels/diagnostics.hpp>
#include <shaped/kernels/attention.hpp>
#include <shaped/kernels/concat.hpp>
#include <shaped/kernels/evaluate.hpp>
#include <shaped/kernels/lower.hpp>
#include <shaped/kernels/matmul.hpp>
#include <shaped/kernels/overlap.hpp>
#include <shaped/kernels/parallel.hpp>
#include <shaped/kernels/recognise.hpp>
#include <shaped/kernels/reduce.hpp>
#include <shaped/kernels/strided.hpp>
