# Runs one guide program (see CMakeLists.txt): it must exit with 0 and, when the file EXPECTED
# exists, print each of its lines. Arguments: PROGRAM, EXPECTED.

execute_process(COMMAND ${PROGRAM} RESULT_VARIABLE status OUTPUT_VARIABLE output ERROR_VARIABLE errors)
message(STATUS "output:\n${output}${errors}")
if(NOT status EQUAL 0)
  message(FATAL_ERROR "${PROGRAM} exited with ${status}")
endif()

if(EXISTS ${EXPECTED})
  # Read line by line as text, not as a CMake list, so that `;` and `[` in a line are plain.
  file(READ ${EXPECTED} expected)
  while(NOT expected STREQUAL "")
    string(FIND "${expected}" "\n" end)
    string(SUBSTRING "${expected}" 0 ${end} line)
    math(EXPR next "${end} + 1")
    string(SUBSTRING "${expected}" ${next} -1 expected)
    string(FIND "${output}" "${line}" found)
    if(found EQUAL -1)
      message(FATAL_ERROR "the guide shows a line that the program does not print:\n${line}")
    endif()
  endwhile()
endif()
