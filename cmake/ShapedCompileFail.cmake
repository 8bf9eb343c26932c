# Compile-fail tests. Each case is a source file whose `// expect-error: REGEX` lines name what
# the compiler must print; the test compiles it with exactly the flags a program linking
# shaped::shaped gets (taken from compile_commands.json), and passes when the compile fails,
# every regex matches a line of the output, and the output is at most
# SHAPED_MAX_DIAGNOSTIC_LINES lines. With CONTROL, the same file compiled with
# -DSHAPED_COMPILE_FAIL_CONTROL must succeed: a case that fails for the wrong reason (a typo)
# fails its control.

set(CMAKE_EXPORT_COMPILE_COMMANDS ON)
set(SHAPED_MAX_DIAGNOSTIC_LINES 15 CACHE STRING "Most lines a shape diagnostic may take")
set(SHAPED_COMPILE_FAIL_SCRIPT ${CMAKE_CURRENT_LIST_DIR}/ShapedRunCompileFail.cmake)

function(shaped_add_compile_fail test_name source)
  cmake_parse_arguments(PARSE_ARGV 2 arg "CONTROL" "" "")
  string(MAKE_C_IDENTIFIER "${test_name}" target)
  # Never built by default: the test compiles it with the recorded command.
  add_library(${target} OBJECT EXCLUDE_FROM_ALL ${source})
  target_link_libraries(${target} PRIVATE shaped::shaped)
  add_test(NAME ${test_name}
           COMMAND ${CMAKE_COMMAND} -DSOURCE=${source} -DBUILD_DIR=${CMAKE_BINARY_DIR}
                   -DMAX_LINES=${SHAPED_MAX_DIAGNOSTIC_LINES} -DCONTROL=${arg_CONTROL}
                   -P ${SHAPED_COMPILE_FAIL_SCRIPT})
  set_tests_properties(${test_name} PROPERTIES LABELS compile_fail)
endfunction()
