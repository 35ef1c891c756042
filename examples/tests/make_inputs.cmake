# Writes the shared test inputs into WORK (fixture of the examples.* tests).
file(MAKE_DIRECTORY ${WORK})

function(generate name)
  execute_process(COMMAND ${GEN} ${ARGN} -o ${WORK}/${name}
                  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "gen-input ${ARGN} failed (${rc}): ${err}")
  endif()
  message(STATUS "${name}: ${out}")
endfunction()

# 3 MB + 17 bytes: no test chunk size divides it, 3 does not divide it either.
generate(main.txt --bytes 3000017 --seed 7 --matches 40)
# For chunks of 1 and 7 bytes: every line straddles chunk boundaries.
generate(small.txt --bytes 20011 --seed 3 --matches 5)
generate(empty.txt --bytes 0)

# Hand-written corner cases: blanks, explicit signs, -0, CR before LF, 18-digit
# items whose sum wraps past 2^63, and GREP's pattern (also at the very end).
set(nines 999999999999999999)
set(pi "314159265\n358979323\n846264338\n")
file(WRITE ${WORK}/edge.txt
  "  42\n+17\n-0\n\t-5\t\n7\r\n${nines}\n${nines}\n${nines}\n${nines}\n${nines}\n"
  "${nines}\n${nines}\n${nines}\n${nines}\n${nines}\n${nines}\n${nines}\n-${nines}\n0\n"
  "${pi}${pi}1\n${pi}")
file(WRITE ${WORK}/tiny.txt "7\n")
file(WRITE ${WORK}/malformed.txt "12\n34\n1a\n")
file(WRITE ${WORK}/unterminated.txt "123\n45")
