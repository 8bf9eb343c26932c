#pragma once
// Layer 6: reading and writing tensors, every shape checked on load. io/core.hpp is what the
// formats share; .npy, safetensors and GGUF are peers built on it.
#include <shaped/io/core.hpp>
#include <shaped/io/gguf.hpp>
#include <shaped/io/npy.hpp>
#include <shaped/io/npy_format.hpp>
#include <shaped/io/safetensors.hpp>
