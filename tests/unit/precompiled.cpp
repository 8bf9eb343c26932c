// The translation unit that builds the test executables' precompiled header (shaped.hpp and
// catch.hpp, tests/CMakeLists.txt): CMake builds a target's header only for a source that uses
// it, and main.cpp cannot.
