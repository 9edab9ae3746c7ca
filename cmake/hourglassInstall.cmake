include(CMakePackageConfigHelpers)
install(TARGETS hourglass hourglass_concurrentqueue EXPORT hourglassTargets
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
  RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
install(DIRECTORY runtime/include/ queue/include/ workers/include/
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
