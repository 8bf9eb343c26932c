# Installation and the package config that find_package(shaped) reads.
#
# Installs the shaped library, its headers (include/shaped), and a CMake package in
# <libdir>/cmake/shaped: shapedConfig.cmake, shapedConfigVersion.cmake, shapedTargets*.cmake
# and ShapedBlas.cmake. A consumer then writes
#   find_package(shaped CONFIG REQUIRED)
#   target_link_libraries(app PRIVATE shaped::shaped)
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

# On by default only when shaped is the top-level project: a consumer that pulls shaped in
# with add_subdirectory does not get shaped's files in its own install.
option(SHAPED_INSTALL "Generate shaped's install rules" ${SHAPED_IS_TOP_LEVEL})
if(NOT SHAPED_INSTALL)
  return()
endif()

set(SHAPED_INSTALL_CMAKEDIR "${CMAKE_INSTALL_LIBDIR}/cmake/shaped"
    CACHE STRING "Where shaped's CMake package files are installed, relative to the prefix")
mark_as_advanced(SHAPED_INSTALL_CMAKEDIR)

# shaped links shaped_blas PUBLIC, so the export needs both. shaped_blas is exported empty
# (its OpenBLAS paths are BUILD_INTERFACE only); shapedConfig.cmake fills it in.
install(TARGETS shaped
  EXPORT shapedTargets
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
  RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR}
  INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(TARGETS shaped_blas EXPORT shapedTargets)

install(DIRECTORY ${PROJECT_SOURCE_DIR}/include/shaped
  DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})

install(EXPORT shapedTargets
  NAMESPACE shaped::
  FILE shapedTargets.cmake
  DESTINATION ${SHAPED_INSTALL_CMAKEDIR})

configure_package_config_file(
  ${CMAKE_CURRENT_LIST_DIR}/shapedConfig.cmake.in
  ${PROJECT_BINARY_DIR}/shapedConfig.cmake
  INSTALL_DESTINATION ${SHAPED_INSTALL_CMAKEDIR})

# 0.x releases may break their interface at every minor version.
write_basic_package_version_file(
  ${PROJECT_BINARY_DIR}/shapedConfigVersion.cmake
  VERSION ${PROJECT_VERSION}
  COMPATIBILITY SameMinorVersion)

install(FILES
  ${PROJECT_BINARY_DIR}/shapedConfig.cmake
  ${PROJECT_BINARY_DIR}/shapedConfigVersion.cmake
  ${CMAKE_CURRENT_LIST_DIR}/ShapedBlas.cmake
  DESTINATION ${SHAPED_INSTALL_CMAKEDIR})
