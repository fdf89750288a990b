# The last step of `cmake --install` (included by packaging/CMakeLists.txt's install(CODE)):
# the files that name the final prefix, the lab's Python environment, and the manifest.
#
# In: CMAKE_INSTALL_PREFIX (the final prefix), $ENV{DESTDIR} (a staging root, or empty),
# CMAKE_INSTALL_MANIFEST_FILES (everything installed so far, final paths), and the
# LOCUS_* variables set by the install(CODE) that includes this file.
# $ENV{LAB} (make install LAB=...): how the lab's `locus` command gets its Python:
#   venv   (default) a virtual environment in PREFIX/lib/locus/lab-env with the pinned
#          requirements from PyPI (lab/requirements.txt)
#   system the system's python3 with its own packages (the .deb: python3-numpy, ...)
#   none   no `locus` command

set(prefix "${CMAKE_INSTALL_PREFIX}")
set(root "$ENV{DESTDIR}")
set(libdir "${prefix}/${LOCUS_LIBDIR}")
set(datadir "${prefix}/${LOCUS_DATADIR}")
set(includedir "${prefix}/${LOCUS_INCLUDEDIR}")

# Writes ${root}${path} from template (configure_file @VAR@ substitution) and lists it.
macro(locus_generate template path)
  configure_file("${LOCUS_SOURCE_DIR}/packaging/${template}" "${root}${path}" @ONLY)
  list(APPEND CMAKE_INSTALL_MANIFEST_FILES "${path}")
  message(STATUS "Generating: ${root}${path}")
endmacro()
macro(locus_executable path)
  execute_process(COMMAND chmod 755 "${root}${path}" RESULT_VARIABLE rc)
  if(rc)
    message(FATAL_ERROR "chmod ${root}${path} failed")
  endif()
endmacro()

# pkg-config files, the installed lab's library registry, locus-run's variant table.
set(variant_table "")
set(registry "")
foreach(entry IN LISTS LOCUS_VARIANT_ENTRIES)
  string(REPLACE ":" ";" fields "${entry}")
  list(GET fields 0 name)
  list(GET fields 1 lib)
  list(GET fields 2 design)
  list(GET fields 3 debug)
  list(GET fields 4 weak)
  if(name STREQUAL "vam")
    set(what "the flagship (the vam design)")
  elseif(debug)
    set(what "the ${name} variant, a debug build that checks its invariants")
  else()
    set(what "the ${name} variant of the ${design} design")
  endif()
  locus_generate(locus.pc.in "${libdir}/pkgconfig/${lib}.pc")
  string(APPEND variant_table "${name} lib${lib}.so.${LOCUS_VERSION_MAJOR}\n")
  if(registry)
    string(APPEND registry ",\n")
  endif()
  # "file" relative: the lab resolves it against the registry folder's parent, PREFIX/lib.
  string(APPEND registry "  {\"name\": \"${name}\", \"file\": \"lib${lib}.so\", \"design\": \"${design}\", \"debug\": ${debug}, \"weakly_aligned\": ${weak}}")
endforeach()
string(STRIP "${variant_table}" variant_table)
file(WRITE "${root}${libdir}/locus/variants.json" "[\n${registry}\n]\n")
list(APPEND CMAKE_INSTALL_MANIFEST_FILES "${libdir}/locus/variants.json")
locus_generate(locus-run.in "${prefix}/${LOCUS_BINDIR}/locus-run")
locus_executable("${prefix}/${LOCUS_BINDIR}/locus-run")

# The lab.
set(lab "$ENV{LAB}")
if(lab STREQUAL "")
  set(lab venv)
endif()
if(lab STREQUAL "venv")
  set(env "${libdir}/locus/lab-env")
  set(python "${env}/bin/python")
  message(STATUS "Installing the lab's environment: ${root}${env} (pip, lab/requirements.txt)")
  execute_process(COMMAND python3 -m venv --clear "${root}${env}" RESULT_VARIABLE rc)
  if(NOT rc)
    execute_process(COMMAND "${root}${python}" -m pip install -q --disable-pip-version-check
                            -r "${LOCUS_SOURCE_DIR}/lab/requirements.txt" RESULT_VARIABLE rc)
  endif()
  if(rc)
    message(FATAL_ERROR "the lab's environment could not be made (python3-venv and PyPI are "
                        "needed; LAB=system uses the system's packages, LAB=none skips the lab)")
  endif()
  # Not relocatable as a whole (pip writes the path into its scripts), but `locus` runs
  # ${env}/bin/python only, which finds its environment from its own path.
  # Its folders are listed too (and the lib64 link): uninstall removes them when empty.
  file(GLOB_RECURSE env_files LIST_DIRECTORIES true RELATIVE "${root}${env}" "${root}${env}/*")
  list(TRANSFORM env_files PREPEND "${env}/")
  list(APPEND CMAKE_INSTALL_MANIFEST_FILES ${env_files})
elseif(lab STREQUAL "system")
  set(python /usr/bin/python3)
elseif(NOT lab STREQUAL "none")
  message(FATAL_ERROR "LAB=${lab}: expected venv, system or none")
endif()
if(NOT lab STREQUAL "none")
  # Where the installed lab finds its data and its libraries' registry: read by common.py.
  set(module "${libdir}/locus/python/locus_lab/installed.py")
  file(WRITE "${root}${module}" "# Written by make install (packaging/finish.cmake).\n"
       "LAB_DATA = \"${datadir}/locus/lab\"\nBUILD_DIR = \"${libdir}/locus\"\n")
  list(APPEND CMAKE_INSTALL_MANIFEST_FILES "${module}")
  locus_generate(locus.in "${prefix}/${LOCUS_BINDIR}/locus")
  locus_executable("${prefix}/${LOCUS_BINDIR}/locus")
endif()

# The manifest for `make uninstall`: final paths (CMake lists them without the staging root),
# itself included.
set(manifest "${datadir}/locus/install-manifest.txt")
list(APPEND CMAKE_INSTALL_MANIFEST_FILES "${manifest}")
list(JOIN CMAKE_INSTALL_MANIFEST_FILES "\n" lines)
string(APPEND lines "\n")
file(WRITE "${root}${manifest}" "${lines}")
message(STATUS "Manifest: ${root}${manifest}")
