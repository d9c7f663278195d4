# Compares (MODE=check) or rewrites (MODE=update) the API descriptor lock.
# Inputs: PROTOC, PROTO_DIR, PROTOS (comma-separated), LOCK, OUT_DIR.
string(REPLACE "," ";" PROTOS "${PROTOS}")
# MODE=selftest proves the check can fail: it renumbers one field in a scratch copy of the
# protos and expects the comparison with the lock to report a difference.
if(MODE STREQUAL "selftest")
  set(scratch ${OUT_DIR}/api-lock-selftest)
  file(REMOVE_RECURSE ${scratch})
  file(COPY ${PROTO_DIR}/ktesio DESTINATION ${scratch})
  file(READ ${scratch}/ktesio/v1/system.proto text)
  string(REPLACE "string daemon_version = 1;" "string daemon_version = 99;" mutated "${text}")
  if(mutated STREQUAL text)
    message(FATAL_ERROR "selftest: the field to renumber was not found")
  endif()
  file(WRITE ${scratch}/ktesio/v1/system.proto "${mutated}")
  set(PROTO_DIR ${scratch})
  set(OUT_DIR ${scratch})
  set(expect_mismatch TRUE)
endif()
set(pb ${OUT_DIR}/api.descriptor.pb)
set(txt ${OUT_DIR}/api.descriptor.txt)
execute_process(
  COMMAND ${PROTOC} -I ${PROTO_DIR} --descriptor_set_out=${pb} ${PROTOS}
  WORKING_DIRECTORY ${PROTO_DIR}
  RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "protoc failed building the descriptor set")
endif()
# protoc ships descriptor.proto next to its headers.
find_file(DESCRIPTOR_PROTO google/protobuf/descriptor.proto PATHS /usr/include /usr/local/include)
get_filename_component(inc ${DESCRIPTOR_PROTO} DIRECTORY)
get_filename_component(inc ${inc} DIRECTORY)
get_filename_component(inc ${inc} DIRECTORY)
execute_process(
  COMMAND ${PROTOC} -I ${inc} --decode=google.protobuf.FileDescriptorSet google/protobuf/descriptor.proto
  INPUT_FILE ${pb}
  OUTPUT_FILE ${txt}
  RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "protoc --decode failed")
endif()
if(MODE STREQUAL "update")
  configure_file(${txt} ${LOCK} COPYONLY)
  message(STATUS "api lock updated: ${LOCK}")
elseif(expect_mismatch)
  execute_process(COMMAND ${CMAKE_COMMAND} -E compare_files ${txt} ${LOCK} RESULT_VARIABLE diff)
  if(diff EQUAL 0)
    message(FATAL_ERROR "selftest: a renumbered field went unnoticed by the api lock")
  endif()
  message(STATUS "selftest: a renumbered field is detected")
else()
  execute_process(COMMAND ${CMAKE_COMMAND} -E compare_files ${txt} ${LOCK} RESULT_VARIABLE diff)
  if(NOT diff EQUAL 0)
    execute_process(COMMAND diff -u ${LOCK} ${txt})
    message(FATAL_ERROR
      "The compiled ktesio.v1 API differs from proto/api.lock.txt (diff above). Changes must be "
      "additive (docs/api.md); if this one is, run `cmake --build <dir> --target update_api_lock` "
      "and commit the new lock.")
  endif()
  message(STATUS "api lock matches")
endif()
