#pragma once
// Layer 6: reading and writing tensors, every shape checked on load.
#include <shaped/io/npy.hpp>
#include <shaped/io/npy_format.hpp>
#include <shaped/io/safetensors.hpp>
