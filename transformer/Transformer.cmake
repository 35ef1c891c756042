# ppios-cc: the Clang LibTooling library (transformer/lib) and the driver (tools/ppios-cc).
# Facts about Clang 16 on Debian: ../../shared/TOOLCHAIN.md (shared libraries clang-cpp and
# LLVM, RTTI on, exceptions off, -resource-dir set by the driver).
# find_package(Clang 16 ...) ran in CMakeLists.txt.

add_library(ppios_transformer STATIC
  lib/CompilerDriver.cpp
  lib/FileScopeType.cpp
  lib/IoCallTable.cpp
  lib/PrefetchPlanner.cpp
  lib/PlannerBounds.cpp
  lib/PlannerCaptures.cpp
  lib/PlannerClones.cpp
  lib/PlannerFinish.cpp
  lib/PlannerHandles.cpp
  lib/PlannerSupport.cpp
  lib/PlannerValues.cpp
  lib/PlanVerifier.cpp
  lib/PlanVerifierBounds.cpp
  lib/PrefetchThreadEmitter.cpp
  lib/SideEffects.cpp
  lib/SourceText.cpp
  lib/StatementUnits.cpp
  lib/ThreadPlan.cpp
  lib/Transformer.cpp
)
target_include_directories(ppios_transformer PUBLIC ${CMAKE_CURRENT_SOURCE_DIR}/lib)
# ppios/interpose.def: the calls the link step routes to the runtime (-Wl,--wrap=...).
target_include_directories(ppios_transformer PRIVATE ${PROJECT_SOURCE_DIR}/runtime/include)
target_include_directories(ppios_transformer SYSTEM PUBLIC ${CLANG_INCLUDE_DIRS} ${LLVM_INCLUDE_DIRS})
separate_arguments(_llvm_definitions NATIVE_COMMAND "${LLVM_DEFINITIONS}")
target_compile_definitions(ppios_transformer PUBLIC ${_llvm_definitions})
# Clang's own headers (stddef.h, stdarg.h...) for the parses ppios-cc runs: those of the
# Clang it is built against, found from that installation, not a path written in the code.
set(PPIOS_CLANG_RESOURCE_DIR "${LLVM_LIBRARY_DIR}/clang/${LLVM_VERSION_MAJOR}")
if(NOT EXISTS "${PPIOS_CLANG_RESOURCE_DIR}/include/stddef.h")
  message(FATAL_ERROR "Clang's resource directory ${PPIOS_CLANG_RESOURCE_DIR} has no "
                      "include/stddef.h (install Debian's libclang-common-16-dev)")
endif()
target_compile_definitions(ppios_transformer PRIVATE
  PPIOS_CLANG_RESOURCE_DIR="${PPIOS_CLANG_RESOURCE_DIR}")
# -Wno-nonnull: GCC 12 warns inside LLVM 16 headers (ExternalASTSource.h) once inlined.
target_compile_options(ppios_transformer PUBLIC -fno-exceptions -Wno-nonnull)
target_link_libraries(ppios_transformer PUBLIC clang-cpp LLVM)
# ppios_version.h: what ppios-cc --version prints.
target_link_libraries(ppios_transformer PRIVATE ppios_version)

# Where the driver finds libppios and ppios.h: <prefix>/{lib,include} in an install tree,
# else this build tree (the path from bin/ to runtime/ is kept relative to the executable).
set(_ppios_cc_bin ${CMAKE_BINARY_DIR}/bin)
file(RELATIVE_PATH _ppios_lib_from_bin ${_ppios_cc_bin} ${CMAKE_BINARY_DIR}/runtime)
set_source_files_properties(lib/CompilerDriver.cpp PROPERTIES COMPILE_DEFINITIONS
  "PPIOS_CC_RUNTIME_MPI=\"${PPIOS_RUNTIME_MPI}\";PPIOS_CC_INSTALL_LIBDIR=\"${CMAKE_INSTALL_LIBDIR}\";PPIOS_CC_BUILD_LIBDIR_FROM_BIN=\"${_ppios_lib_from_bin}\";PPIOS_CC_SOURCE_INCLUDE_DIR=\"${PROJECT_SOURCE_DIR}/runtime/include\"")

add_executable(ppios-cc tools/ppios-cc/main.cpp)
target_link_libraries(ppios-cc PRIVATE ppios_transformer)
set_target_properties(ppios-cc PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${_ppios_cc_bin})
add_dependencies(ppios-cc ppios)
if(TARGET ppios_mpich)
  add_dependencies(ppios-cc ppios_mpich)
endif()
install(TARGETS ppios-cc EXPORT ppiosTargets RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})

if(EXISTS ${CMAKE_CURRENT_SOURCE_DIR}/tests/CMakeLists.txt)
  add_subdirectory(tests)
endif()
