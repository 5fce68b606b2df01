"""What a CUDA extension's sources need from the toolchain, read from the sources themselves (pure code over
file contents: an sdist is read without extracting it, setup.py, CMakeLists.txt and meson.build are parsed,
never run).

    reader.py     a folder, an sdist or a wheel -> {relative path: text}, with caps and a name check
    cpp.py        one file's #includes and the #if conditions that guard them
    pystatic.py   static values of Python expressions (source lists, include dirs, flags)
    discover.py   the build units: setup.py extensions, JIT load() calls, op-builder classes (profiles)
    buildsys.py   CMake and meson builds: which one pyproject.toml configures (scikit-build-core, meson-python),
                  its -D values, what CMake's and meson's library names stand for (data/buildsystems.yaml)
    cmake.py      a CMake project's units (cmakelang.py reads the language, cmakecmds.py runs its commands)
    meson.py      a meson project's units (mesonlang.py parses the language)
    facts.py      what a build asks of the toolchain: C++ / CUDA standard, arch list, nvcc floor
    classify.py   who provides an outside header or library (data/sources.yaml, extras.yaml, cuda.yaml)
    scan.py       per unit: follow the includes through the project, classify what is outside
    profiles.py   data/profiles.yaml: projects that need more than the generic reading (DeepSpeed's builders)
    load.py       a `--for` value (a path, an installed package's name) -> Scan; the groups resolve adds
"""
