# Runs one fuzzer for SECONDS on a fresh copy of its seed corpus, for the fuzz.* ctest tests:
#   cmake -DFUZZER=<exe> -DSEED_CORPUS=<dir> -DDICTIONARY=<file> -DWORK_DIR=<dir> -DSECONDS=<n>
#         -P run_fuzzer.cmake
# The copy lives in WORK_DIR (in the build tree: libFuzzer adds the inputs it finds to its
# corpus, and the source tree must stay untouched), with any crashing input saved beside it.

foreach(variable IN ITEMS FUZZER SEED_CORPUS DICTIONARY WORK_DIR SECONDS)
  if(NOT DEFINED ${variable})
    message(FATAL_ERROR "run_fuzzer.cmake: -D${variable}=... is required")
  endif()
endforeach()

# Fresh each run, so that a run fuzzes from the committed seeds alone and is repeatable.
file(REMOVE_RECURSE ${WORK_DIR}/corpus)
file(MAKE_DIRECTORY ${WORK_DIR}/corpus ${WORK_DIR}/artifacts)
file(GLOB seeds ${SEED_CORPUS}/*)
file(COPY ${seeds} DESTINATION ${WORK_DIR}/corpus)

execute_process(
  COMMAND ${FUZZER} -max_total_time=${SECONDS} -dict=${DICTIONARY} -print_final_stats=1
          -timeout=30 -artifact_prefix=${WORK_DIR}/artifacts/ ${WORK_DIR}/corpus
  RESULT_VARIABLE result)
if(NOT result EQUAL 0)
  file(GLOB artifacts ${WORK_DIR}/artifacts/*)
  message(FATAL_ERROR "${FUZZER} found a problem (exit ${result}); reproduce with: ${FUZZER} ${artifacts}")
endif()
