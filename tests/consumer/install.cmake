# Installs the built shaped into a fresh prefix: cmake -DSHAPED_BINARY_DIR=... -DSHAPED_PREFIX=...
# [-DSHAPED_CONFIG=...] -P install.cmake. Run by the consumer.install test.
foreach(var SHAPED_BINARY_DIR SHAPED_PREFIX)
  if(NOT ${var})
    message(FATAL_ERROR "install.cmake: ${var} is not set")
  endif()
endforeach()

file(REMOVE_RECURSE "${SHAPED_PREFIX}")
set(config_args)
if(SHAPED_CONFIG)
  set(config_args --config "${SHAPED_CONFIG}")
endif()
execute_process(
  COMMAND "${CMAKE_COMMAND}" --install "${SHAPED_BINARY_DIR}" --prefix "${SHAPED_PREFIX}"
          ${config_args}
  COMMAND_ERROR_IS_FATAL ANY)
