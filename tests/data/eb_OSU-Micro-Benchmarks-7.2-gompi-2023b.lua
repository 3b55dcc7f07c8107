help([==[

Description
===========
OSU Micro-Benchmarks


More information
================
 - Homepage: https://mvapich.cse.ohio-state.edu/benchmarks/
]==])

whatis([==[Description: OSU Micro-Benchmarks]==])
whatis([==[Homepage: https://mvapich.cse.ohio-state.edu/benchmarks/]==])
whatis([==[URL: https://mvapich.cse.ohio-state.edu/benchmarks/]==])

local root = "/home/users/ci/mpiregress/var/install/easybuild/broadwell/software/OSU-Micro-Benchmarks/7.2-gompi-2023b"

conflict("OSU-Micro-Benchmarks")

depends_on("gompi/2023b")

prepend_path("PATH", pathJoin(root, "libexec/osu-micro-benchmarks/mpi/collective"))
prepend_path("PATH", pathJoin(root, "libexec/osu-micro-benchmarks/mpi/one-sided"))
prepend_path("PATH", pathJoin(root, "libexec/osu-micro-benchmarks/mpi/pt2pt"))
prepend_path("PATH", pathJoin(root, "libexec/osu-micro-benchmarks/mpi/startup"))
setenv("EBROOTOSUMINMICROMINBENCHMARKS", root)
setenv("EBVERSIONOSUMINMICROMINBENCHMARKS", "7.2")
setenv("EBDEVELOSUMINMICROMINBENCHMARKS", pathJoin(root, "easybuild/OSU-Micro-Benchmarks-7.2-gompi-2023b-easybuild-devel"))

-- Built with EasyBuild version 5.4.1
