# Runs EXE with the "|"-separated ARGS (under mpirun with 2 ranks unless it is
# gen-input) and passes only if it exits non-zero, in time, with stderr
# matching REGEX.
string(REPLACE "|" ";" args "${ARGS}")
string(REPLACE "|" ";" flags "${MPIRUN_FLAGS}")
get_filename_component(program ${EXE} NAME)
if(program STREQUAL "gen-input")
  set(command ${EXE} ${args})
else()
  set(command ${MPIRUN} ${flags} -np 2 ${EXE} ${args})
endif()
execute_process(COMMAND ${command} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err
                TIMEOUT 20)
if(rc STREQUAL "0")
  message(FATAL_ERROR "'${command}' succeeded but should fail\nstdout: ${out}\nstderr: ${err}")
endif()
if(NOT rc MATCHES "^[0-9]+$")
  message(FATAL_ERROR "'${command}' did not finish: ${rc}")
endif()
if(NOT err MATCHES "${REGEX}")
  message(FATAL_ERROR "'${command}' exited ${rc}, stderr does not match '${REGEX}':\n${err}")
endif()
message(STATUS "exit ${rc}: ${err}")
