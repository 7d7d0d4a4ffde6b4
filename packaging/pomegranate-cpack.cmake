# Debian packages of Pomegranate: `cpack -G DEB` over a build tree
# (scripts/package.sh; docs/deploy.md "Packages"). One package per install
# component; every binary package's Depends comes from dpkg-shlibdeps
# (CPACK_DEBIAN_PACKAGE_SHLIBDEPS) plus what it runs rather than links:
#
#   component  package               holds
#   r2         pom-r2                pom-r2, pom-r2.service
#   mds        pom-mds               pom-mds, pom-mds@.service
#   mdsl       pom-mdsl              pom-mdsl, pom-mdsl@.service
#   pomctl     pomctl                pomctl, the example environment file, deploy.md
#   pomfs      pomfs                 pomfs, pomfs@.service (mount(8) runs it
#                                    through mount.fuse3: Depends fuse3)
#   lib        libpomegranate0       libpomegranate.so.0 (Debian's name: SONAME 0)
#   dev        libpomegranate-dev    libpomegranate.so, pomegranate.h, pomegranate.pc
#   python     python3-pomegranate   the Python binding (cffi over libpomegranate0)
#
# The daemons and pomfs depend on pomctl of the same version (the units'
# environment file, the docs, and the tool that runs them).
set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME pomegranate)
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGE_VENDOR "Pomegranate")
set(CPACK_PACKAGE_CONTACT "Pomegranate developers <pomegranate@localhost>")
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_STRIP_FILES ON)
set(CPACK_DEB_COMPONENT_INSTALL ON)
set(CPACK_COMPONENTS_ALL r2 mds mdsl pomctl pomfs lib dev python)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
set(CPACK_DEBIAN_PACKAGE_GENERATE_SHLIBS ON)
set(CPACK_DEBIAN_COMPRESSION_TYPE gzip) # xz takes minutes on two cores
set(CPACK_DEBIAN_PACKAGE_PRIORITY optional)

set(_pom_v "${PROJECT_VERSION}")
# systemctl daemon-reload after the units come or go (what debhelper's
# dh_installsystemd does; no unit is enabled or started: each needs
# /etc/pomegranate first, docs/deploy.md).
set(_pom_reload ${CMAKE_CURRENT_LIST_DIR}/postinst ${CMAKE_CURRENT_LIST_DIR}/postrm)

foreach(c R2 MDS MDSL POMFS)
  set(CPACK_DEBIAN_${c}_PACKAGE_CONTROL_EXTRA ${_pom_reload})
  set(CPACK_DEBIAN_${c}_PACKAGE_SECTION admin)
endforeach()
set(CPACK_DEBIAN_R2_PACKAGE_NAME pom-r2)
set(CPACK_DEBIAN_R2_DESCRIPTION "Pomegranate R2 site manager
pom-r2 registers the sites of a Pomegranate cluster, keeps its rings and
file-system records, and serves /metrics; with its systemd unit.")
set(CPACK_DEBIAN_R2_PACKAGE_DEPENDS "pomctl (= ${_pom_v})")
set(CPACK_DEBIAN_MDS_PACKAGE_NAME pom-mds)
set(CPACK_DEBIAN_MDS_DESCRIPTION "Pomegranate metadata server
pom-mds serves the slices of the directory tables from memory and commits
them to the MDSLs; with its systemd unit (one instance per port).")
set(CPACK_DEBIAN_MDS_PACKAGE_DEPENDS "pomctl (= ${_pom_v})")
set(CPACK_DEBIAN_MDSL_PACKAGE_NAME pom-mdsl)
set(CPACK_DEBIAN_MDSL_DESCRIPTION "Pomegranate metadata storage server
pom-mdsl keeps slice images and deltas in append-only segments with a
LevelDB index; with its systemd unit (one instance per disk).")
set(CPACK_DEBIAN_MDSL_PACKAGE_DEPENDS "pomctl (= ${_pom_v})")
set(CPACK_DEBIAN_POMCTL_PACKAGE_NAME pomctl)
set(CPACK_DEBIAN_POMCTL_PACKAGE_SECTION admin)
set(CPACK_DEBIAN_POMCTL_DESCRIPTION "Pomegranate cluster administration tool
pomctl starts and stops clusters, shows sites, rings and rates (top),
manages file systems and checks them (fsck).")
set(CPACK_DEBIAN_POMFS_PACKAGE_NAME pomfs)
set(CPACK_DEBIAN_POMFS_DESCRIPTION "Pomegranate FUSE client
pomfs mounts a Pomegranate file system; mount -t fuse.pomfs NAME@R2ADDR DIR
runs it through mount.fuse3 of fuse3.")
set(CPACK_DEBIAN_POMFS_PACKAGE_DEPENDS "fuse3, pomctl (= ${_pom_v})")
set(CPACK_DEBIAN_LIB_PACKAGE_NAME libpomegranate0)
set(CPACK_DEBIAN_LIB_PACKAGE_SECTION libs)
set(CPACK_DEBIAN_LIB_DESCRIPTION "Pomegranate client library
libpomegranate: files and the key/value API of a Pomegranate file system.")
set(CPACK_DEBIAN_DEV_PACKAGE_NAME libpomegranate-dev)
set(CPACK_DEBIAN_DEV_PACKAGE_SECTION libdevel)
set(CPACK_DEBIAN_DEV_DESCRIPTION "Pomegranate client library (development files)
The header pomegranate.h, the pkg-config file and an example of the
key/value API.")
set(CPACK_DEBIAN_DEV_PACKAGE_DEPENDS "libpomegranate0 (= ${_pom_v})")
set(CPACK_DEBIAN_PYTHON_PACKAGE_NAME python3-pomegranate)
set(CPACK_DEBIAN_PYTHON_PACKAGE_SECTION python)
set(CPACK_DEBIAN_PYTHON_PACKAGE_ARCHITECTURE all)
set(CPACK_DEBIAN_PYTHON_DESCRIPTION "Pomegranate client library (Python binding)
The key/value API and file calls of libpomegranate for Python 3, through
cffi.")
set(CPACK_DEBIAN_PYTHON_PACKAGE_DEPENDS
    "python3 (>= 3.9), python3-cffi, libpomegranate0 (>= ${_pom_v})")
include(CPack)
