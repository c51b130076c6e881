/* self_exe_lib: the library self_exe finds next to its real file through RUNPATH $ORIGIN (in its
   own directory: each C file directly in tests/apps is built alone, and self_exe needs it). */
long self_exe_lib_square(long k) { return k * k; }
