# cmake -P script: configure, build and run tests/packaging/consumer.
file(REMOVE_RECURSE ${WORK})
file(MAKE_DIRECTORY ${WORK})
function(run)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "failed (${rc}): ${ARGN}")
  endif()
endfunction()
# Build type None (no optimization flags): what is tested is that a consumer
# configures, compiles, links and runs, not how fast its code is; -O3 made
# these two tests a minute of every Release run.
set(args -G ${GENERATOR} -S ${CMAKE_CURRENT_LIST_DIR}/consumer -B ${WORK}/build -DCMAKE_BUILD_TYPE=None -DWITH_SERVER=${WITH_SERVER})
if(MODE STREQUAL "find_package")
  run(${CMAKE_COMMAND} --install ${HOURGLASS_BINARY_DIR} --prefix ${WORK}/prefix)
  run(${CMAKE_COMMAND} ${args} -DCONSUMER_MODE=find_package -DCMAKE_PREFIX_PATH=${WORK}/prefix)
else()
  # The core only: building the whole server from source again costs minutes
  # of CI; the installed package (above) is where hourglass::server is tested.
  set(WITH_SERVER OFF)
  set(args -G ${GENERATOR} -S ${CMAKE_CURRENT_LIST_DIR}/consumer -B ${WORK}/build -DCMAKE_BUILD_TYPE=None)
  run(${CMAKE_COMMAND} ${args} -DCONSUMER_MODE=add_subdirectory -DHOURGLASS_SOURCE_DIR=${HOURGLASS_SOURCE_DIR})
endif()
run(${CMAKE_COMMAND} --build ${WORK}/build -j 2)
run(${WORK}/build/consumer)
if(WITH_SERVER)
  run(${WORK}/build/server_consumer)
endif()
if(EXISTS ${WORK}/build/fleet_consumer)
  run(${WORK}/build/fleet_consumer)
endif()
