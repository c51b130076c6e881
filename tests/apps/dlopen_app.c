/* dlopen_app: dlopens the library named by argv[1] (libdlopen_lib.so), calls dlopen_lib_compute,
   checks the result and a data symbol, dlcloses it; exits non-zero with a message on any mismatch. */
#include <dlfcn.h>
#include <stdio.h>

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: %s /path/to/libdlopen_lib.so\n", argv[0]);
        return 2;
    }
    void *h = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        fprintf(stderr, "dlopen_app: dlopen failed: %s\n", dlerror());
        return 1;
    }
    long (*fn)(long) = (long (*)(long))dlsym(h, "dlopen_lib_compute");
    int *data = dlsym(h, "dlopen_lib_data");
    if (!fn || !data) {
        fprintf(stderr, "dlopen_app: dlsym failed: %s\n", dlerror());
        return 1;
    }
    long r1 = fn(10); /* 4096*3 + (5+10)*10 + 1 = 12439 */
    long r2 = fn(1);  /* 4096*3 + (15+1)*10 + 1 = 12449 */
    if (r1 != 12439 || r2 != 12449 || *data != 1234) {
        fprintf(stderr, "dlopen_app: wrong results r1=%ld r2=%ld data=%d\n", r1, r2, *data);
        return 1;
    }
    if (dlclose(h) != 0) {
        fprintf(stderr, "dlopen_app: dlclose failed: %s\n", dlerror());
        return 1;
    }
    printf("dlopen_app ok r1=%ld r2=%ld\n", r1, r2);
    return 0;
}
