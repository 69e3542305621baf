# Checks that an exercise's README quotes, word for word, what its judge prints on the starter as handed out.
#   cmake -DCOMMAND=<judge> -DREADME=<README.md> -P readme.cmake
execute_process(COMMAND ${COMMAND} OUTPUT_VARIABLE out ERROR_VARIABLE err RESULT_VARIABLE rc)
file(READ ${README} readme)
string(FIND "${readme}" "${out}" at)
if(at EQUAL -1)
  message(FATAL_ERROR "${README} does not quote the judge's output on the starter; it prints:\n${out}")
endif()
