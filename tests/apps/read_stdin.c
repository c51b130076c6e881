/* read_stdin: reads all of stdin with read(2) and prints the byte count and an FNV-1a checksum;
   exits non-zero on a read error. */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <unistd.h>

int main(void)
{
    static unsigned char buf[65536];
    uint64_t h = 1469598103934665603ULL;
    unsigned long long total = 0;
    for (;;) {
        ssize_t n = read(0, buf, sizeof buf);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            perror("read_stdin: read");
            return 1;
        }
        if (n == 0)
            break;
        for (ssize_t i = 0; i < n; i++) {
            h ^= buf[i];
            h *= 1099511628211ULL;
        }
        total += (unsigned long long)n;
    }
    printf("bytes=%llu fnv1a=%016llx\n", total, (unsigned long long)h);
    return 0;
}
