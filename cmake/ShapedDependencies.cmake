# Every dependency is a Debian package found by its CMake config; nothing is downloaded.
find_package(xtl REQUIRED)
find_package(xsimd REQUIRED)
find_package(xtensor REQUIRED)
find_package(OpenBLAS CONFIG REQUIRED)
# Boost.Hana's struct reflection, for modules (nn/module.hpp): headers only.
find_package(Boost 1.74 CONFIG REQUIRED)
# Parses safetensors headers; private to the compiled library (src/safetensors.cpp).
find_package(nlohmann_json 3.10 REQUIRED)

# OpenBLAS's Debian config sets variables, not a target: wrap them in one (ShapedBlas.cmake,
# which the installed shapedConfig.cmake uses too).
include(${CMAKE_CURRENT_LIST_DIR}/ShapedBlas.cmake)
if(NOT TARGET shaped_blas)
  add_library(shaped_blas INTERFACE)
  add_library(shaped::shaped_blas ALIAS shaped_blas)
  shaped_wrap_openblas(shaped_blas BUILD_INTERFACE)
endif()
