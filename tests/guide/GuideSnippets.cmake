# Turns the code blocks of a markdown guide into test programs, at configure time.
#
# The blocks under one heading (## or ###) make one program, in order: each ```cpp block is a
# run of statements inside main(), after `#include <shaped/shaped.hpp>` and the standard headers
# snippets use (<iostream>, <fstream>, ...), and sees the names the blocks before it declared;
# `#line` directives make the compiler name the guide's lines. An HTML comment on the line
# before a block changes what it is:
#   <!-- guide-test: compile-fail "REGEX" ... -->  the section's blocks so far, then this one,
#       must not compile, and each REGEX must match a line of the diagnostic (compile-fail test)
#   <!-- guide-test: output -->  (before a plain ``` block) each of its lines must be printed
#       by the section's program
#   <!-- guide-test: top-level -->  the block declares what main() cannot (a class with member
#       templates, as a layer has): it goes before main(), after the section's earlier ones
#   <!-- guide-test: skip BECAUSE -->  the block is not compiled; say why in BECAUSE
# A marker not followed by a block, one it does not know, or two headings that make one name
# stop the configure.
#
# shaped_guide_snippets(<markdown> <out dir>) writes <out dir>/<name>.cpp for each program, and
# <out dir>/<name>.expected (one line of expected output a line) where output is shown, and sets
#   SHAPED_GUIDE_RUN   the names of the programs that must compile and run
#   SHAPED_GUIDE_FAIL  the names of the programs that must not compile
# A name is the heading's words in lower case joined by `_` (with `.compile_fail`, and `_2`, ...
# from the second on, for compile-fail blocks).

function(shaped_guide_snippets markdown out_dir)
  file(READ ${markdown} text)
  file(RELATIVE_PATH markdown_name ${PROJECT_SOURCE_DIR} ${markdown})
  # CMake lists split at `;`, but not inside `[...]` nor after `\`: code has all three, so
  # they travel encoded as control characters and are decoded when written.
  _shaped_guide_transcode(text ENCODE)
  string(REPLACE "\n" ";" lines "${text}")

  set(run_names "")
  set(fail_names "")
  set(sections_with_code "")
  set(section introduction)
  set(top "")          # a section's top-level blocks
  set(body "")
  set(expected "")
  set(fail_count 0)
  set(marker "")
  set(fence "")        # cpp or plain, inside a block
  set(line_number 0)
  foreach(line IN LISTS lines)
    math(EXPR line_number "${line_number} + 1")
    if(fence STREQUAL "")
      if(line MATCHES "^##+ (.*)$")
        _shaped_guide_flush()
        _shaped_guide_name(section "${CMAKE_MATCH_1}")
        set(top "")
        set(body "")
        set(expected "")
        set(fail_count 0)
      elseif(line MATCHES "^<!-- guide-test: (.*) -->$")
        set(marker "${CMAKE_MATCH_1}")
        set(marker_line ${line_number})
        if(NOT marker MATCHES "^(compile-fail( \"[^\"]+\")+|output|top-level|skip .+)$")
          message(FATAL_ERROR "${markdown_name}:${line_number}: unknown guide-test marker `${marker}`")
        endif()
      elseif(line MATCHES "^```(.*)$")
        if(CMAKE_MATCH_1 STREQUAL "cpp")
          set(fence cpp)
        else()
          set(fence plain)
        endif()
        set(block "")
        math(EXPR block_line "${line_number} + 1")
      elseif(NOT marker STREQUAL "" AND NOT line STREQUAL "")
        message(FATAL_ERROR "${markdown_name}:${marker_line}: the guide-test marker is not followed by a code block")
      endif()
    elseif(line MATCHES "^```$")
      _shaped_guide_close_block()
      set(fence "")
      set(marker "")
    else()
      string(APPEND block "${line}\n")
    endif()
  endforeach()
  _shaped_guide_flush()
  set(SHAPED_GUIDE_RUN ${run_names} PARENT_SCOPE)
  set(SHAPED_GUIDE_FAIL ${fail_names} PARENT_SCOPE)
endfunction()

# The two macros below work on shaped_guide_snippets' variables.

# A block has ended: add it to the section's program, or make it a test of its own.
macro(_shaped_guide_close_block)
  set(located "#line ${block_line} \"${markdown_name}\"\n${block}")
  if(marker MATCHES "^skip ")
    # Not compiled, as the marker says.
  elseif(fence STREQUAL "plain")
    if(marker STREQUAL "output")
      string(APPEND expected "${block}")
    elseif(NOT marker STREQUAL "")
      message(FATAL_ERROR "${markdown_name}:${marker_line}: `${marker}` needs a ```cpp block")
    endif()
  elseif(marker STREQUAL "")
    string(APPEND body "${located}")
  elseif(marker STREQUAL "top-level")
    string(APPEND top "${located}")
  elseif(marker MATCHES "^compile-fail")
    math(EXPR fail_count "${fail_count} + 1")
    set(fail_name ${section}.compile_fail)
    if(fail_count GREATER 1)
      string(APPEND fail_name _${fail_count})
    endif()
    string(REGEX MATCHALL "\"[^\"]+\"" regexes "${marker}")
    set(expectations "")
    foreach(regex IN LISTS regexes)
      string(REGEX REPLACE "^\"(.*)\"$" "// expect-error: \\1\n" regex "${regex}")
      string(APPEND expectations "${regex}")
    endforeach()
    # The control (see ShapedCompileFail.cmake) compiles the section without this block.
    _shaped_guide_write(${fail_name}.cpp "${top}"
      "${expectations}${body}#ifndef SHAPED_COMPILE_FAIL_CONTROL\n${located}#endif\n")
    list(APPEND fail_names ${fail_name})
  else()
    message(FATAL_ERROR "${markdown_name}:${marker_line}: `${marker}` needs a plain ``` block")
  endif()
endmacro()

# A section has ended: write its program, if it has one.
macro(_shaped_guide_flush)
  if(NOT top STREQUAL "" OR NOT body STREQUAL "" OR fail_count GREATER 0)
    if(section IN_LIST sections_with_code)
      message(FATAL_ERROR "${markdown_name}: two sections with code are named `${section}`")
    endif()
    list(APPEND sections_with_code ${section})
  endif()
  if(NOT top STREQUAL "" OR NOT body STREQUAL "")
    _shaped_guide_write(${section}.cpp "${top}" "${body}")
    if(NOT expected STREQUAL "")
      _shaped_guide_write(${section}.expected "" "${expected}" RAW)
    endif()
    list(APPEND run_names ${section})
  elseif(NOT expected STREQUAL "")
    message(FATAL_ERROR "${markdown_name}: section `${section}` shows output but has no program")
  endif()
endmacro()

# Writes out_dir/<file>: a program of `top` before main() and `code` inside it (or, with RAW,
# `code` as it is), decoded. The file is left alone when unchanged, so that an edit to one
# section rebuilds only its test.
function(_shaped_guide_write file top code)
  if("${ARGN}" STREQUAL "RAW")
    set(content "${code}")
  else()
    set(content "// Generated from ${markdown_name} by tests/guide/GuideSnippets.cmake: edit the guide.\n")
    string(APPEND content "#include <shaped/shaped.hpp>\n\n#include <cstdint>\n#include <fstream>\n#include <iostream>\n#include <limits>\n#include <string>\n\n")
    string(APPEND content "${top}int main() {\n${code}}\n")
  endif()
  _shaped_guide_transcode(content DECODE)
  file(WRITE ${out_dir}/${file}.new "${content}")
  file(COPY_FILE ${out_dir}/${file}.new ${out_dir}/${file} ONLY_IF_DIFFERENT)
  file(REMOVE ${out_dir}/${file}.new)
endfunction()

# A heading as a test name: "A layer's parameters" -> a_layers_parameters.
function(_shaped_guide_name out heading)
  string(TOLOWER "${heading}" name)
  string(REGEX REPLACE "['`]" "" name "${name}")
  string(REGEX REPLACE "[^a-z0-9]+" "_" name "${name}")
  string(REGEX REPLACE "^_|_$" "" name "${name}")
  set(${out} ${name} PARENT_SCOPE)
endfunction()

# Encodes (ENCODE) or decodes (DECODE) `;`, `[`, `]` and `\` in the variable named `variable`.
function(_shaped_guide_transcode variable direction)
  set(text "${${variable}}")
  foreach(pair 59:1 91:2 93:3 92:4)
    string(REPLACE ":" ";" pair ${pair})
    list(GET pair 0 character)
    list(GET pair 1 encoding)
    string(ASCII ${character} character)
    string(ASCII ${encoding} encoding)
    if(direction STREQUAL "ENCODE")
      string(REPLACE "${character}" "${encoding}" text "${text}")
    else()
      string(REPLACE "${encoding}" "${character}" text "${text}")
    endif()
  endforeach()
  set(${variable} "${text}" PARENT_SCOPE)
endfunction()
