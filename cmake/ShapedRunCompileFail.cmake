# Runs one compile-fail case; see ShapedCompileFail.cmake. Arguments: SOURCE, BUILD_DIR,
# MAX_LINES, CONTROL, DEFINE (a macro to compile the case with, for its nested form) and
# COMPARE_PLAIN (compile it with and without the precompiled header, and compare).

file(READ ${BUILD_DIR}/compile_commands.json commands)
string(JSON count LENGTH "${commands}")
math(EXPR last "${count} - 1")
set(command "")
file(REAL_PATH "${SOURCE}" source_path)
foreach(i RANGE ${last})
  string(JSON file GET "${commands}" ${i} file)
  file(REAL_PATH "${file}" file_path)
  if(file_path STREQUAL source_path)
    string(JSON command GET "${commands}" ${i} command)
    string(JSON directory GET "${commands}" ${i} directory)
    break()
  endif()
endforeach()
if(command STREQUAL "")
  message(FATAL_ERROR "no compile command recorded for ${SOURCE}")
endif()

# Compile to nowhere, and only as far as the diagnostics: templates are still instantiated under
# -fsyntax-only, so every shape check fires, but no code is generated or optimised.
separate_arguments(argv UNIX_COMMAND "${command}")
list(FIND argv "-o" out)
math(EXPR out_file "${out} + 1")
list(REMOVE_AT argv ${out_file})
list(INSERT argv ${out_file} /dev/null)
list(INSERT argv 1 -fsyntax-only)

# plain_argv: the case as a user's program compiles, without the suite's precompiled header (its
# arguments, GCC's `-include H` and Clang's `-Xclang -include(-pch) -Xclang H`, go).
set(plain_argv "")
set(header "")
foreach(arg IN LISTS argv)
  if(arg MATCHES "cmake_pch\\.hxx")
    if(arg MATCHES "cmake_pch\\.hxx$")
      set(header ${arg})
    endif()
    foreach(flag RANGE 2)
      list(GET plain_argv -1 previous)
      if(previous MATCHES "^-(Xclang|include|include-pch)$")
        list(POP_BACK plain_argv)
      endif()
    endforeach()
  elseif(NOT arg STREQUAL "-Winvalid-pch")
    list(APPEND plain_argv ${arg})
  endif()
endforeach()
list(FIND argv "-c" at)
math(EXPR at "${at} + 1")
list(GET argv ${at} case_path)
set(control_argv ${argv})
if(DEFINE)
  list(INSERT argv 1 -D${DEFINE})
  list(INSERT plain_argv 1 -D${DEFINE})
endif()

# When the case's first line of code is `#include <shaped/shaped.hpp>`, nothing the header holds
# can differ from what the case sees: it compiles with the header, and each include chain the
# compiler prints is written back to start at that line of the case.
set(precompiled FALSE)
file(READ ${SOURCE} text)
string(FIND "${text}" "#include <shaped/shaped.hpp>" include_at)
if(header AND include_at GREATER -1)
  string(SUBSTRING "${text}" 0 ${include_at} before)
  string(REGEX REPLACE "//[^\n]*" "" code_before "${before}")
  if(code_before MATCHES "^[ \t\r\n]*$")
    set(precompiled TRUE)
    string(REGEX MATCHALL "\n" newlines_before "${before}")
    list(LENGTH newlines_before include_line)
    math(EXPR include_line "${include_line} + 1")
  endif()
endif()

# compile(<status var> <output var> <arguments>...): the status and what the compiler printed, with the
# precompiled header's lines written back to the case's include line. GCC prints
# "from <header>:N,\n<spaces>from <command-line>:" where the plain compile prints
# "from <case>:L:", Clang "In file included from <built-in>:N:\nIn file included from
# <header>:N:" where it prints "In file included from <case>:L:".
function(compile status_var output_var)
  execute_process(COMMAND ${ARGN} WORKING_DIRECTORY ${directory}
                  RESULT_VARIABLE status OUTPUT_VARIABLE out ERROR_VARIABLE err)
  set(output "${out}${err}")
  if(precompiled AND "${ARGN}" MATCHES "cmake_pch")
    string(REPLACE "${header}" "<precompiled header>" output "${output}")
    set(located "${case_path}:${include_line}:")
    string(REGEX REPLACE "from <precompiled header>:[0-9]+,\n +from <command-line>:"
           "from ${located}" output "${output}")
    string(REGEX REPLACE
           "In file included from <built-in>:[0-9]+:\nIn file included from <precompiled header>:[0-9]+:"
           "In file included from ${located}" output "${output}")
    if(output MATCHES "<precompiled header>|<command-line>|<built-in>")
      message(FATAL_ERROR "the precompiled header's lines are left in the diagnostic:\n${output}")
    endif()
  endif()
  set(${status_var} ${status} PARENT_SCOPE)
  set(${output_var} "${output}" PARENT_SCOPE)
endfunction()

if(precompiled)
  compile(status output ${argv})
else()
  compile(status output ${plain_argv})
endif()
if(COMPARE_PLAIN)
  if(NOT precompiled)
    message(FATAL_ERROR "${SOURCE} compiles without the precompiled header: nothing to compare")
  endif()
  compile(plain_status plain_output ${plain_argv})
  if(NOT plain_output STREQUAL output)
    message(FATAL_ERROR "with the precompiled header, the diagnostic reads\n${output}\n"
                        "but without it\n${plain_output}")
  endif()
endif()
if(status EQUAL 0)
  message(FATAL_ERROR "${SOURCE} compiled, but it must not")
endif()

string(REGEX REPLACE "\n$" "" trimmed "${output}")
string(REGEX MATCHALL "\n" newlines "${trimmed}")
list(LENGTH newlines lines)
math(EXPR lines "${lines} + 1")
message(STATUS "diagnostic (${lines} lines):\n${output}")
if(lines GREATER MAX_LINES)
  message(FATAL_ERROR "the diagnostic takes ${lines} lines, more than ${MAX_LINES}")
endif()

# One error: a failed check must not cascade into the expression around it.
string(REGEX MATCHALL "(^|\n)[^\n]*error: " errors "${trimmed}")
list(LENGTH errors error_count)
if(NOT error_count EQUAL 1)
  message(FATAL_ERROR "the diagnostic has ${error_count} errors, not one")
endif()

file(STRINGS ${SOURCE} expectations REGEX "// expect-error: ")
if(NOT expectations)
  message(FATAL_ERROR "${SOURCE} has no `// expect-error:` line")
endif()
string(REPLACE "\n" ";" output_lines "${trimmed}")
foreach(line IN LISTS expectations)
  string(REGEX REPLACE ".*// expect-error: " "" regex "${line}")
  set(found FALSE)
  foreach(o IN LISTS output_lines)
    if(o MATCHES "${regex}")
      set(found TRUE)
      break()
    endif()
  endforeach()
  if(NOT found)
    message(FATAL_ERROR "no line of the diagnostic matches `${regex}`")
  endif()
endforeach()

if(CONTROL)
  list(INSERT control_argv 1 -DSHAPED_COMPILE_FAIL_CONTROL)
  execute_process(COMMAND ${control_argv} WORKING_DIRECTORY ${directory}
                  RESULT_VARIABLE status OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT status EQUAL 0)
    message(FATAL_ERROR "the control (-DSHAPED_COMPILE_FAIL_CONTROL) does not compile:\n${out}${err}")
  endif()
endif()
