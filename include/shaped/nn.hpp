#pragma once
// Layer 5: layers with typed parameters.
#include <shaped/nn/linear.hpp>
