# Runs one kernel under mpirun with NPROCS ranks over several inputs and
# chunk sizes. Each run must print exactly one result line, equal to the one
# the reference program computes from the whole file, then exactly one TIME
# line; DSCAL's output file must equal the reference's byte for byte.
string(REPLACE "|" ";" flags "${MPIRUN_FLAGS}")
string(TOUPPER ${KERNEL} NAME)
set(dir ${WORK}/${KERNEL}.np${NPROCS})
file(REMOVE_RECURSE ${dir})
file(MAKE_DIRECTORY ${dir})
set(scalar -7)

# input,chunk[,extra kernel arguments]
set(cases
  main.txt,4093          # prime, far from a line length
  main.txt,1000003       # does not divide the file or a rank's share
  main.txt,64M,--compute-factor,3  # one chunk per rank, computation repeated
  small.txt,1            # every line straddles chunks
  edge.txt,1
  edge.txt,5
  empty.txt,1M
  tiny.txt,1)            # fewer lines than ranks
if(KERNEL STREQUAL "grep")
  list(APPEND cases "main.txt,4093,--pattern,9\\n-" "edge.txt,3,--pattern,99\\n9")
endif()

function(expected_line input extra out_var)
  set(args ${KERNEL} ${WORK}/${input})
  if(KERNEL STREQUAL "dscal")
    list(APPEND args ${scalar} ${dir}/expected-${input})
  elseif(extra MATCHES "^--pattern;")
    list(GET extra 1 pattern)
    list(APPEND args "${pattern}")
  endif()
  execute_process(COMMAND ${REFERENCE} ${args}
                  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "reference ${args} failed: ${err}")
  endif()
  string(STRIP "${out}" out)
  set(${out_var} "${out}" PARENT_SCOPE)
endfunction()

foreach(case IN LISTS cases)
  string(REPLACE "," ";" parts "${case}")
  list(GET parts 0 input)
  list(GET parts 1 chunk)
  set(extra "")
  list(LENGTH parts count)
  if(count GREATER 2)
    list(SUBLIST parts 2 -1 extra)
  endif()
  expected_line(${input} "${extra}" expected)

  set(kernel_args --chunk ${chunk} ${extra})
  if(KERNEL STREQUAL "dscal")
    list(APPEND kernel_args --scalar ${scalar} -o ${dir}/out-${input})
  endif()
  set(command ${MPIRUN} ${flags} -np ${NPROCS} ${EXE} ${kernel_args} ${WORK}/${input})
  execute_process(COMMAND ${command} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err
                  TIMEOUT 40)
  if(NOT rc STREQUAL "0")
    message(FATAL_ERROR "'${command}' failed (${rc}):\n${out}\n${err}")
  endif()

  string(REPLACE "\n" ";" lines "${out}")
  set(results "")
  set(times "")
  foreach(line IN LISTS lines)
    if(line MATCHES "^${NAME} result=")
      list(APPEND results "${line}")
    elseif(line MATCHES "^TIME ")
      list(APPEND times "${line}")
    endif()
  endforeach()
  if(NOT results STREQUAL expected)
    message(FATAL_ERROR "'${command}'\nprinted:  '${results}'\nexpected: '${expected}'")
  endif()
  set(time_format "^TIME kernel=${NAME} nprocs=${NPROCS} chunk_bytes=[1-9][0-9]* wall_s=[0-9]+\\.[0-9]+ read_max_s=[0-9]+\\.[0-9]+ read_mean_s=[0-9]+\\.[0-9]+ write_max_s=[0-9]+\\.[0-9]+ write_mean_s=[0-9]+\\.[0-9]+$")
  if(NOT times MATCHES "${time_format}")
    message(FATAL_ERROR "'${command}': bad or missing TIME line: '${times}'")
  endif()
  string(FIND "${out}" "${expected}" result_at)
  string(FIND "${out}" "TIME " time_at)
  if(time_at LESS result_at)
    message(FATAL_ERROR "'${command}': TIME line before the result line")
  endif()

  if(KERNEL STREQUAL "dscal")
    execute_process(COMMAND ${CMAKE_COMMAND} -E compare_files
                            ${dir}/expected-${input} ${dir}/out-${input} RESULT_VARIABLE differ)
    if(NOT differ EQUAL 0)
      message(FATAL_ERROR "'${command}': output differs from ${dir}/expected-${input}")
    endif()
  endif()
  message(STATUS "ok: np=${NPROCS} ${input} chunk=${chunk} ${extra}: ${results}")
endforeach()
