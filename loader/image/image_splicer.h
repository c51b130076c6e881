/* image_splicer.h — the direct writer's splicer: a raw thread of the forked writer that moves the
 * queued page runs from the pipes to the O_DIRECT image (image_direct.c feeds it). */
#ifndef CRAC_IMAGE_SPLICER_H
#define CRAC_IMAGE_SPLICER_H

#include <stdint.h>

#define SPLICER_QUEUE 128

struct splicer_run {
    uint64_t off, len;
};

/* Shared by the writer and the splicer; the counters are futex words. */
struct splicer {
    int pipe_r[2], fd; /* run k is in pipe k % 2, whole before it is queued */
    struct splicer_run queue[SPLICER_QUEUE];
    volatile int32_t head, tail; /* runs queued by the writer, runs done by the splicer */
    volatile int32_t ending;     /* the writer queues no more */
    /* What the idle splicer waits on: bumped after each run queued and after `ending` (a wait on
     * `head` alone would miss the end: it does not change head). */
    volatile int32_t kick;
    volatile int32_t failed; /* the first failure's errno, 0 while every write went well */
    volatile int32_t tid;    /* the splicer's; the kernel clears it when the thread exits */
};

/* Starts the splicer on STACK (SIZE bytes, the caller's until splicer_join returned); 0, or a
 * negative errno. */
int splicer_start(struct splicer *s, void *stack, unsigned long size);
/* Waits for the splicer to end (once `ending` is set and the queue is done). */
void splicer_join(struct splicer *s);
/* Wakes whoever waits on WORD (a futex word of S). */
void splicer_wake(volatile int32_t *word);
/* Tells the splicer a run was queued or `ending` set (after the store it is to see). */
void splicer_kick(struct splicer *s);
/* Waits while *WORD is SEEN. */
void splicer_wait(volatile int32_t *word, int32_t seen);
/* LEN bytes from the pipe into the file at OFF; after a failure (*FAILED, a positive errno)
 * the bytes are read out of the pipe into nothing. -1 when the pipe itself broke. */
int splicer_move(int pipe_r, int fd, uint64_t off, uint64_t len, volatile int32_t *failed);

#endif
