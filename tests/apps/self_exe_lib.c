/* self_exe_lib: the library self_exe finds next to its real file through RUNPATH $ORIGIN. */
long self_exe_lib_square(long k) { return k * k; }
