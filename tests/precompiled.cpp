// The translation unit that builds the precompiled shaped.hpp of the guide's programs, the users'
// programs and the compile-fail cases (tests/CMakeLists.txt): CMake builds a target's header only
// for a source that uses it.
