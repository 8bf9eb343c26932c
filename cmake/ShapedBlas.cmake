# OpenBLAS's Debian config (find_package(OpenBLAS CONFIG)) sets variables, not a target.
# shaped_wrap_openblas(<target> [BUILD_INTERFACE]) puts OpenBLAS_INCLUDE_DIRS and
# OpenBLAS_LIBRARIES on the usage requirements of an INTERFACE target.
#
# The build tree passes BUILD_INTERFACE: the paths are then used while building but are not
# written into the installed shapedTargets.cmake, so an installed shaped does not hard-code
# this machine's OpenBLAS. shapedConfig.cmake calls the same function on the imported
# shaped::shaped_blas with the OpenBLAS that the consumer's own find_dependency found.
# This file is installed next to shapedConfig.cmake, so it must not depend on the source tree.
function(shaped_wrap_openblas target)
  set(build_only FALSE)
  if(ARGN STREQUAL "BUILD_INTERFACE")
    set(build_only TRUE)
  elseif(ARGN)
    message(FATAL_ERROR "shaped_wrap_openblas: unexpected arguments: ${ARGN}")
  endif()
  if(NOT OpenBLAS_LIBRARIES)
    message(FATAL_ERROR "shaped_wrap_openblas: OpenBLAS_LIBRARIES is empty; "
                        "call find_package(OpenBLAS CONFIG REQUIRED) first")
  endif()

  foreach(dir IN LISTS OpenBLAS_INCLUDE_DIRS)
    if(build_only)
      target_include_directories(${target} SYSTEM INTERFACE "$<BUILD_INTERFACE:${dir}>")
    else()
      target_include_directories(${target} SYSTEM INTERFACE "${dir}")
    endif()
  endforeach()
  foreach(lib IN LISTS OpenBLAS_LIBRARIES)
    if(build_only)
      target_link_libraries(${target} INTERFACE "$<BUILD_INTERFACE:${lib}>")
    else()
      target_link_libraries(${target} INTERFACE "${lib}")
    endif()
  endforeach()
endfunction()
