# The version every tool prints (--version): the project's version and the git id of the
# source. ppios_version.h and the installed copy of ppios-report are written at every build
# by write-version.cmake, but only when their text changes, so a new commit (or a change
# to a clean tree) rebuilds the few files that print it and nothing else.
#
# A source without git (a release tarball, a Spack stage) says `unknown`, unless the
# builder names the id: -DPPIOS_GIT_ID=<id>.
set(PPIOS_GIT_ID "" CACHE STRING "Git id the tools print with --version (empty: ask git at build time)")

set(PPIOS_GENERATED_DIR ${CMAKE_BINARY_DIR}/generated)
set(PPIOS_REPORT_BUILT ${CMAKE_BINARY_DIR}/bin/ppios-report)
add_custom_target(ppios_version_files ALL
  COMMAND ${CMAKE_COMMAND}
          -DSOURCE_DIR=${PROJECT_SOURCE_DIR}
          -DVERSION=${PROJECT_VERSION}
          -DGIT_ID=${PPIOS_GIT_ID}
          -DHEADER=${PPIOS_GENERATED_DIR}/ppios_version.h
          -DREPORT_IN=${PROJECT_SOURCE_DIR}/tools/ppios-report/ppios-report
          -DREPORT_OUT=${PPIOS_REPORT_BUILT}
          -P ${CMAKE_CURRENT_LIST_DIR}/write-version.cmake
  BYPRODUCTS ${PPIOS_GENERATED_DIR}/ppios_version.h ${PPIOS_REPORT_BUILT}
  COMMENT "ppios version and git id"
  VERBATIM)

add_library(ppios_version INTERFACE)
target_include_directories(ppios_version INTERFACE ${PPIOS_GENERATED_DIR})
add_dependencies(ppios_version ppios_version_files)
