# Installation and the package config that find_package(shaped) reads.
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)
