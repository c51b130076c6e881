/* fd_holder.c — a program for bench/pause_files.py: holds FILES written files of KIB KiB each
 * and EVENTFDS eventfds (what a checkpoint saves into files/ in its pause), then prints a line
 * every 10 ms until killed. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

int main(int argc, char **argv)
{
    if (argc != 5) {
        fprintf(stderr, "usage: fd_holder DIR FILES KIB EVENTFDS\n");
        return 2;
    }
    int files = atoi(argv[2]), kib = atoi(argv[3]), events = atoi(argv[4]);
    char *buf = malloc((size_t)kib * 1024 + 1);
    if (!buf)
        return 1;
    memset(buf, 'x', (size_t)kib * 1024);
    for (int i = 0; i < files; i++) {
        char path[4096];
        snprintf(path, sizeof(path), "%s/written-%d", argv[1], i);
        int fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0600);
        if (fd < 0 || write(fd, buf, (size_t)kib * 1024) != (ssize_t)kib * 1024) {
            perror("fd_holder: write");
            return 1;
        }
    }
    for (int i = 0; i < events; i++)
        if (eventfd((unsigned)i, 0) < 0) {
            perror("fd_holder: eventfd");
            return 1;
        }
    printf("ready\n");
    fflush(stdout);
    for (long t = 0;; t++) {
        struct timespec ts = {0, 10 * 1000000L};
        nanosleep(&ts, NULL);
        printf("tick %ld\n", t);
        fflush(stdout);
    }
}
