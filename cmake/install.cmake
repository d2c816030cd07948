# `cmake --install build --prefix P`: the mlpc binary, the static libraries, every header
# mlpc/mlpc.h reaches (P/include/mlpc/{ir,compiler,...}) and a CMake package, so a program does
# find_package(mlpc) and links mlpc::mlpc. Both <mlpc/mlpc.h> and the tree's own "ir/graph.h"
# includes resolve there (the include dirs P/include and P/include/mlpc).
include(CMakePackageConfigHelpers)
include(GNUInstallDirs)

set(MLPC_LIBRARIES mlpc_ir mlpc_host mlpc_passes mlpc_codegen mlpc_runtime mlpc_reference
                    mlpc_io mlpc_compiler mlpc_api)
install(TARGETS ${MLPC_LIBRARIES} EXPORT mlpcTargets
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR})
install(DIRECTORY ir host passes codegen runtime io compiler dump
        DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/mlpc
        FILES_MATCHING PATTERN "*.h" PATTERN "*.def")
install(FILES mlpc/mlpc.h DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/mlpc)

set(MLPC_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/mlpc)
install(EXPORT mlpcTargets NAMESPACE mlpc:: DESTINATION ${MLPC_CMAKE_DIR})
configure_package_config_file(${CMAKE_CURRENT_LIST_DIR}/mlpcConfig.cmake.in
                              ${CMAKE_CURRENT_BINARY_DIR}/mlpcConfig.cmake
                              INSTALL_DESTINATION ${MLPC_CMAKE_DIR})
write_basic_package_version_file(${CMAKE_CURRENT_BINARY_DIR}/mlpcConfigVersion.cmake
                                 VERSION 0.1.0 COMPATIBILITY AnyNewerVersion)
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/mlpcConfig.cmake
              ${CMAKE_CURRENT_BINARY_DIR}/mlpcConfigVersion.cmake
        DESTINATION ${MLPC_CMAKE_DIR})
