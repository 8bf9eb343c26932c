# Every dependency is a Debian package found by its CMake config; nothing is downloaded.
find_package(xtl REQUIRED)
find_package(xsimd REQUIRED)
find_package(xtensor REQUIRED)
find_package(Boost 1.74 REQUIRED)  # header-only: Boost.Hana
find_package(OpenBLAS CONFIG REQUIRED)

# OpenBLAS's Debian config sets variables, not a target: wrap them in one.
if(NOT TARGET shaped_blas)
  add_library(shaped_blas INTERFACE)
  target_include_directories(shaped_blas SYSTEM INTERFACE ${OpenBLAS_INCLUDE_DIRS})
  target_link_libraries(shaped_blas INTERFACE ${OpenBLAS_LIBRARIES})
endif()
