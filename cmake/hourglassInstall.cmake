# find_package(hourglass) gives hourglass::hourglass (the embedding API, over
# hourglass::runtime, ::queue and ::workers) and, when the daemon library was
# built, hourglass::server and hourglass::fleet. Nothing of the build machine's paths is exported:
# moodycamel is private to queue/ and build-only.
include(CMakePackageConfigHelpers)
set(hourglass_targets hourglass hourglass_runtime hourglass_queue hourglass_workers hourglass_jobs)
set(HOURGLASS_WITH_SERVER OFF)
if(TARGET hourglass_server)
  # support (JSON, URLs) is linked privately by the static server library,
  # so it travels in the export set with it.
  list(APPEND hourglass_targets hourglass_server hourglass_support hourglass_asio)
  set(HOURGLASS_WITH_SERVER ON)
  install(DIRECTORY server/include/ DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
endif()
set(HOURGLASS_WITH_FLEET OFF)
if(TARGET hourglass_fleet)
  # hourglass::fleet: the embedding API of fleet mode (producer and consumer
  # on Redis Streams); hiredis is found again by the package config.
  list(APPEND hourglass_targets hourglass_fleet)
  if(NOT TARGET hourglass_server)
    list(APPEND hourglass_targets hourglass_asio)
  endif()
  set(HOURGLASS_WITH_FLEET ON)
  install(DIRECTORY fleet/include/ DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
endif()
install(TARGETS ${hourglass_targets} EXPORT hourglassTargets
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
  RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
install(DIRECTORY runtime/include/ queue/include/ workers/include/ jobs/include/
  DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(EXPORT hourglassTargets NAMESPACE hourglass::
  DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/hourglass)
configure_package_config_file(cmake/hourglassConfig.cmake.in
  ${CMAKE_CURRENT_BINARY_DIR}/hourglassConfig.cmake
  INSTALL_DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/hourglass)
write_basic_package_version_file(${CMAKE_CURRENT_BINARY_DIR}/hourglassConfigVersion.cmake
  COMPATIBILITY SameMinorVersion)
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/hourglassConfig.cmake
  ${CMAKE_CURRENT_BINARY_DIR}/hourglassConfigVersion.cmake
  DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/hourglass)
