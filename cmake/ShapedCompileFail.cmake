# Compile-fail tests. Each case is a source file whose `// expect-error: REGEX` lines name what
# the compiler must print; the test compiles it with exactly the flags a program linking
# shaped::shaped gets (taken from compile_commands.json), plus -fsyntax-only (diagnostics need no
# code), and passes when the compile fails with exactly one error, every regex matches a line of
# the output, and the output is at most SHAPED_MAX_DIAGNOSTIC_LINES lines.
#
# With CONTROL, the same file compiled with -DSHAPED_COMPILE_FAIL_CONTROL must succeed: a case
# that fails for the wrong reason (a typo) fails its control. A case that also has a
# SHAPED_COMPILE_FAIL_NESTED form (the failing call inside a larger expression, an eval or an
# assignment) gets a second test, <name>.nested, which compiles that form and must print the same
# diagnostic, still one error.
#
# A case whose first line of code is `#include <shaped/shaped.hpp>` compiles with the suite's
# precompiled shaped.hpp (the target shaped_precompiled, when it exists), ~5x faster, and its
# diagnostic is written back to what the plain compile prints (ShapedRunCompileFail.cmake). With
# COMPARE_PLAIN, a third test, <name>.plain, compiles the case both ways and requires the two
# diagnostics to be the same text, so that the rewriting stays true.

set(CMAKE_EXPORT_COMPILE_COMMANDS ON)
set(SHAPED_MAX_DIAGNOSTIC_LINES 10 CACHE STRING "Most lines a shape diagnostic may take")
set(SHAPED_COMPILE_FAIL_SCRIPT ${CMAKE_CURRENT_LIST_DIR}/ShapedRunCompileFail.cmake)

function(shaped_add_compile_fail test_name source)
  cmake_parse_arguments(PARSE_ARGV 2 arg "CONTROL;COMPARE_PLAIN" "" "")
  string(MAKE_C_IDENTIFIER "${test_name}" target)
  # Never built by default: the test compiles it with the recorded command.
  add_library(${target} OBJECT EXCLUDE_FROM_ALL ${source})
  target_link_libraries(${target} PRIVATE shaped::shaped)
  if(TARGET shaped_precompiled)
    target_precompile_headers(${target} REUSE_FROM shaped_precompiled)
  endif()
  set(run ${CMAKE_COMMAND} -DSOURCE=${source} -DBUILD_DIR=${CMAKE_BINARY_DIR}
          -DMAX_LINES=${SHAPED_MAX_DIAGNOSTIC_LINES})
  add_test(NAME ${test_name} COMMAND ${run} -DCONTROL=${arg_CONTROL} -P ${SHAPED_COMPILE_FAIL_SCRIPT})
  set_tests_properties(${test_name} PROPERTIES LABELS compile_fail)
  file(STRINGS ${source} nested REGEX "SHAPED_COMPILE_FAIL_NESTED")
  if(nested)
    add_test(NAME ${test_name}.nested
             COMMAND ${run} -DDEFINE=SHAPED_COMPILE_FAIL_NESTED -P ${SHAPED_COMPILE_FAIL_SCRIPT})
    set_tests_properties(${test_name}.nested PROPERTIES LABELS compile_fail)
  endif()
  if(arg_COMPARE_PLAIN)
    add_test(NAME ${test_name}.plain COMMAND ${run} -DCOMPARE_PLAIN=ON -P ${SHAPED_COMPILE_FAIL_SCRIPT})
    set_tests_properties(${test_name}.plain PROPERTIES LABELS compile_fail)
  endif()
endfunction()
