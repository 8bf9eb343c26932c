#pragma once
// Layer 1: dims, shapes, shape algebra and diagnostics. No xtensor here.
#include <shaped/core/diagnostics.hpp>
#include <shaped/core/dim.hpp>
#include <shaped/core/dims.hpp>
#include <shaped/core/extents.hpp>
#include <shaped/core/fixed_string.hpp>
#include <shaped/core/shape.hpp>
#include <shaped/core/shape_error.hpp>
