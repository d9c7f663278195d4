# Compares (MODE=check) or rewrites (MODE=update) the API descriptor lock.
# Inputs: PROTOC, PROTO_DIR, PROTOS (list), LOCK, OUT_DIR.
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
